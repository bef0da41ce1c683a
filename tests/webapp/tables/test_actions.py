"""Page actions: each POST queues one run with its arguments and audits who asked."""
import datetime as dt

import pytest

from webapp.tables.models import AuditEvent, Run


def test_trigger_queues_schedule_execute_with_arguments(operator_client, flights, operator):
    response = operator_client.post("/tables/flights/trigger", {
        "threshold": "2013-01-20T01:00:00Z", "data_latency": "", "carry_over": "copy", "exact": "true"})
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == f"/tables/flights/?run={run.pk}"
    assert (run.kind, run.state, run.carry_over, run.exact, run.requested_by) == (
        "schedule_execute", "queued", "copy", True, operator)
    assert run.threshold == dt.datetime(2013, 1, 20, 1, tzinfo=dt.UTC)
    assert AuditEvent.objects.get(run=run).actor == "olivia"


def test_trigger_with_bad_threshold_says_why_and_queues_nothing(operator_client, flights):
    response = operator_client.post("/tables/flights/trigger", {"threshold": "soon"})
    assert response.status_code == 400
    assert "malformed threshold &#x27;soon&#x27;" in response.content.decode()
    assert not Run.objects.exists()


@pytest.mark.parametrize("action, kind", [("clean", "clean"), ("recover", "recover"), ("refresh", "metrics")])
def test_maintenance_actions_queue_their_kind(operator_client, flights, action, kind):
    assert operator_client.post(f"/tables/flights/{action}").status_code == 302
    assert Run.objects.get().kind == kind
    assert AuditEvent.objects.get().action == f"request.{kind}"


def test_rollback_needs_a_valid_instant(operator_client, flights):
    operator_client.post("/tables/flights/rollback", {"instant": "bad"})
    assert not Run.objects.exists()
    operator_client.post("/tables/flights/rollback", {"instant": "20130120020000000"})
    assert Run.objects.get().instant == "20130120020000000"


def test_plan_only_queues_a_schedule_run_and_execute_runs_the_plan(operator_client, flights):
    operator_client.post("/tables/flights/trigger", {"data_latency": "2h", "mode": "schedule"})
    assert Run.objects.get().kind == "schedule"
    busy = operator_client.post("/tables/flights/execute", {"instant": "20130120020000000"}, follow=True)
    assert "one compaction at a time" in busy.content.decode() and not Run.objects.filter(kind="execute").exists()
    Run.objects.filter(kind="schedule").update(state="succeeded")   # as the worker leaves it
    operator_client.post("/tables/flights/execute", {"instant": "20130120020000000"})
    executed = Run.objects.get(kind="execute")
    assert executed.instant == "20130120020000000"
    assert AuditEvent.objects.filter(action="request.execute", run=executed).exists()
