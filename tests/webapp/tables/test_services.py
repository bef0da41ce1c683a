"""services.request_run: a queued Run, an audit entry, and a dispatch only after commit."""
import pytest

from webapp.tables import services
from webapp.tables.models import AuditEvent, Run


def test_request_run_queues_audits_and_dispatches_on_commit(flights, operator, django_capture_on_commit_callbacks,
                                                            monkeypatch):
    sent = []
    monkeypatch.setattr(services, "_dispatch", sent.append)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = services.request_run(flights, "rollback", operator, instant="20130120020000000")
        assert sent == []  # nothing leaves before the transaction commits
    assert len(callbacks) == 1 and sent == [run.pk]
    run.refresh_from_db()
    assert (run.state, run.kind, run.instant, run.requested_by, run.trigger) == (
        "queued", "rollback", "20130120020000000", operator, "user")
    event = AuditEvent.objects.get(run=run)
    assert (event.user, event.actor, event.action, event.outcome) == (operator, "olivia", "request.rollback", "queued")
    assert event.detail == {"instant": "20130120020000000"}


def test_request_run_refuses_unknown_kind_and_parameters(flights, operator):
    with pytest.raises(ValueError, match="unknown run kind 'compact'"):
        services.request_run(flights, "compact", operator)
    with pytest.raises(ValueError, match="unknown run parameters: retain"):
        services.request_run(flights, "clean", operator, retain=3)
    assert not Run.objects.exists()


def test_partition_summary_adds_up_file_groups(finished_compaction):
    rows = services.partition_summary(finished_compaction.plan)
    assert rows == [{"partition": "2013/01/20", "file_groups": 1, "logs_compacted": 1, "logs_carried": 1,
                     "bytes_compacted": 1000, "bytes_carried": 400}]
