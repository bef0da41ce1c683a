"""tasks.periodic: beat's automatic runs are requested through webapp.tables.services.request_run — one queued
row with the table's registered defaults, one audit entry naming the system and its trigger, one dispatch once
the transaction commits — and a table with a run in flight gets none."""
from __future__ import annotations

from tasks import periodic
from webapp.tables import services
from webapp.tables.models import AuditEvent, RegisteredTable, Run


def test_a_due_table_is_queued_through_request_run(db, tmp_path, monkeypatch, django_capture_on_commit_callbacks):
    table = RegisteredTable.objects.create(name="due", path=str(tmp_path / "due"), schedule_minutes=5,
                                           data_latency="2h", carry_over="copy", exact=True)
    sent: list[int] = []
    monkeypatch.setattr(services, "_dispatch", sent.append)
    with django_capture_on_commit_callbacks(execute=True):
        queued = periodic.trigger_due_tables()
        assert sent == []   # nothing leaves before the transaction commits
    run = Run.objects.get()
    assert queued == [run.pk] and sent == [run.pk] and run.table == table
    assert (run.kind, run.state, run.trigger, run.requested_by) == ("schedule_execute", "queued", "schedule", None)
    assert (run.data_latency, run.carry_over, run.exact) == ("2h", "copy", True)
    event = AuditEvent.objects.get(run=run)
    assert (event.user, event.actor, event.action, event.outcome) == (
        None, "system (schedule)", "request.schedule_execute", "queued")
    assert event.detail == {"data_latency": "2h", "carry_over": "copy", "exact": True}

    # the run is queued: the table is busy, so the next check queues nothing
    with django_capture_on_commit_callbacks(execute=True):
        assert periodic.trigger_due_tables() == []
    assert Run.objects.count() == 1 and sent == [run.pk]
