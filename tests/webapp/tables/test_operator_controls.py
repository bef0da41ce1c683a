"""Cancel, pause/resume, settings and unregister — through the API and the pages, audited, refused with
409 when the state does not allow them, and honoured by the worker and beat."""
from __future__ import annotations

import json

import pytest

from tests.support.api_schema import validate
from webapp.tables.models import AuditEvent, RegisteredTable, Run


def post(client, url, body=None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def test_cancel_a_queued_run_means_it_never_starts(operator_client, flights, finished_compaction, monkeypatch):
    from tasks import runner

    # perform() runs here inside the test's transaction: its close_old_connections() would close the test's own
    # connection when a live-stack test earlier in this process left Django on a PostgreSQL database.
    monkeypatch.setattr(runner, "close_old_connections", lambda: None)

    run = Run.objects.create(table=flights, kind="clean", state="queued")
    response = post(operator_client, f"/api/runs/{run.pk}/cancel")
    assert response.status_code == 202 and response.json()["state"] == "cancelled"
    validate("/api/runs/{id}/cancel", "post", response)
    assert runner.perform(run.pk) == "cancelled"
    run.refresh_from_db()
    assert run.started_at is None and run.error == "cancelled by olivia before it started"
    assert AuditEvent.objects.get(action="cancel").outcome == "cancelled"
    again = post(operator_client, f"/api/runs/{run.pk}/cancel")
    assert again.status_code == 409 and again.json()["error"] == f"run {run.pk} is already cancelled"
    done = post(operator_client, f"/api/runs/{finished_compaction.pk}/cancel")
    assert done.status_code == 409


def test_cancel_a_running_compaction_asks_the_engine_to_stop(operator_client, viewer_client, flights):
    running = Run.objects.create(table=flights, kind="schedule_execute", state="running")
    clean = Run.objects.create(table=flights, kind="clean", state="running")
    assert post(viewer_client, f"/api/runs/{running.pk}/cancel").status_code == 403
    page = operator_client.post(f"/runs/{running.pk}/cancel")
    assert page.status_code == 302
    running.refresh_from_db()
    assert running.cancel_requested and running.state == "running"
    assert "cancel requested" in operator_client.get(f"/runs/{running.pk}/").content.decode()
    refused = post(operator_client, f"/api/runs/{clean.pk}/cancel")
    assert refused.status_code == 409 and "cannot be cancelled" in refused.json()["error"]


def test_a_cancel_that_can_no_longer_take_effect_is_refused(operator_client, flights):
    committing = Run.objects.create(table=flights, kind="schedule_execute", state="running", instant="20260101000000000",
                                    progress_done=3, progress_total=3, progress_unit="file groups")
    refused = post(operator_client, f"/api/runs/{committing.pk}/cancel")
    assert (refused.status_code, refused.json()["error"]) == (
        409, f"run {committing.pk} has written all 3 of its file groups and is committing compaction "
             "20260101000000000: a cancel can no longer take effect")
    committing.refresh_from_db()
    assert not committing.cancel_requested
    planning = Run.objects.create(table=flights, kind="schedule_execute", state="running",
                                  progress_done=2, progress_total=3, progress_unit="file groups")
    assert post(operator_client, f"/api/runs/{planning.pk}/cancel").status_code == 202


def test_a_cancel_the_engine_never_saw_is_reported_too_late(operator_client, flights):
    """Accepted between the engine's last look and its commit: the run says the cancel did not take effect."""
    run = Run.objects.create(table=flights, kind="execute", state="running", instant="20260101000000000")
    assert post(operator_client, f"/api/runs/{run.pk}/cancel").status_code == 202
    Run.objects.filter(pk=run.pk).update(state="succeeded")
    body = operator_client.get(f"/api/runs/{run.pk}").json()
    assert body["cancel_too_late"] is True and body["state"] == "succeeded"
    assert "cancel came too late" in body["detail"]
    assert "cancel came too late" in operator_client.get(f"/runs/{run.pk}/").content.decode()
    honoured = Run.objects.create(table=flights, kind="execute", state="cancelled", cancel_requested=True)
    assert operator_client.get(f"/api/runs/{honoured.pk}").json()["cancel_too_late"] is False


def test_pause_and_resume_stop_the_schedule_and_the_sla_trigger(operator_client, flights, monkeypatch):
    from tasks import periodic

    queued = []
    monkeypatch.setattr(periodic, "enqueue_compaction", lambda table, trigger: queued.append(table.name) or Run(pk=0))
    RegisteredTable.objects.filter(pk=flights.pk).update(schedule_minutes=5)
    paused = post(operator_client, "/api/tables/flights/pause")
    validate("/api/tables/{name}/pause", "post", paused)
    assert paused.json()["paused"] is True
    assert periodic.trigger_due_tables() == [] and queued == []
    assert operator_client.post("/tables/flights/resume").status_code == 302
    periodic.trigger_due_tables()
    assert queued == ["flights"]
    assert [e.action for e in AuditEvent.objects.order_by("at")] == ["pause", "resume"]


def test_edit_settings_validates_and_audits_old_and_new(operator_client, flights):
    response = operator_client.patch("/api/tables/flights", json.dumps({"freshness_sla_minutes": 30,
                                                                          "schedule_minutes": 15}),
                                     content_type="application/json")
    assert response.status_code == 200, response.content
    validate("/api/tables/{name}", "patch", response)
    assert response.json()["freshness_sla_minutes"] == 30 and response.json()["schedule_minutes"] == 15
    assert AuditEvent.objects.get(action="settings").detail["freshness_sla_minutes"] == {"from": 120, "to": 30}
    bad = operator_client.patch("/api/tables/flights", json.dumps({"freshness_sla_minutes": 10**20}),
                                content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error"].startswith("freshness_sla_minutes must be from 1")
    unknown = operator_client.patch("/api/tables/flights", json.dumps({"path": "/elsewhere"}),
                                    content_type="application/json")
    assert unknown.status_code == 400 and "unknown key 'path'" in unknown.json()["error"]
    page = operator_client.post("/tables/flights/settings", {"schedule_minutes": "abc", "data_latency": "2h",
                                                             "freshness_sla_minutes": "30", "carry_over": "copy"})
    assert page.status_code == 400 and 'id="settings-error"' in page.content.decode()
    assert 'value="abc"' in page.content.decode(), "the settings form keeps what was typed"


@pytest.mark.parametrize("active", [True, False])
def test_unregister(operator_client, flights, active):
    if active:
        Run.objects.create(table=flights, kind="clean", state="queued")
    response = operator_client.delete("/api/tables/flights")
    if active:
        assert response.status_code == 409 and "cancel it or wait" in response.json()["error"]
        assert RegisteredTable.objects.exists()
    else:
        assert response.status_code == 204 and not RegisteredTable.objects.exists()
        assert AuditEvent.objects.get(action="unregister").detail["table"] == "flights"


def test_clean_and_recover_show_their_dry_run_before_anything_is_queued(operator_client, flights, planned):
    from webapp.tables.models import Run

    page = operator_client.get("/tables/flights/").content.decode()
    assert page.count('name="preview" value="1"') == 2
    cleaned = operator_client.post("/tables/flights/clean", {"preview": "1"})
    assert cleaned.status_code == 200 and 'id="maintenance-preview"' in cleaned.content.decode()
    assert "dry run: nothing changed yet" in cleaned.content.decode() and 'data-action="confirm-clean"' in cleaned.content.decode()
    recovered = operator_client.post("/tables/flights/recover", {"preview": "1"}).content.decode()
    assert "Nothing to recover" in recovered and "the table is quiescent" in recovered
    assert not Run.objects.exists()                       # the previews queued nothing
    confirmed = operator_client.post("/tables/flights/clean")
    assert confirmed.status_code == 302 and Run.objects.get().kind == "clean"
