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


@pytest.mark.parametrize("action, form, kind", [("clean", {}, "clean"), ("recover", {"confirm": "true"}, "recover"),
                                               ("refresh", {}, "metrics")])
def test_maintenance_actions_queue_their_kind(operator_client, flights, action, form, kind):
    assert operator_client.post(f"/tables/flights/{action}", form).status_code == 302
    assert Run.objects.get().kind == kind
    assert AuditEvent.objects.get().action == f"request.{kind}"


def test_the_table_pages_clean_is_a_dry_run_whose_page_offers_the_clean(operator_client, flights):
    """Issue 34 item 14: Clean previews first (a dry-run run: what would be deleted), then cleans on confirmation."""
    page = operator_client.get("/tables/flights/").content.decode()
    assert "Preview clean…" in page and 'name="dry_run" value="true"' in page
    assert operator_client.post("/tables/flights/clean", {"dry_run": "true"}).status_code == 302
    preview = Run.objects.get()
    assert (preview.kind, preview.dry_run) == ("clean", True)
    Run.objects.filter(pk=preview.pk).update(state="succeeded", result={
        "dry_run": True, "policy": "KEEP_LATEST_COMMITS", "retained": 10,
        "files_to_delete": {"2013/01/20": ["a.parquet", "b.parquet"], "2013/01/21": [".c.log.1_0-1-0"]}})
    run_page = operator_client.get(f"/runs/{preview.pk}/").content.decode()
    assert "Clean preview: nothing was deleted" in run_page and '<strong id="clean-preview-count">3</strong>' in run_page
    assert 'id="clean-now-form"' in run_page
    operator_client.post("/tables/flights/clean")          # "Clean now"
    assert Run.objects.filter(kind="clean", dry_run=False).count() == 1


def test_recover_shows_what_it_would_look_at_before_it_runs(operator_client, flights, tmp_path):
    """Issue 34 item 14: the first POST shows the pending instants and asks again; nothing is queued."""
    import shutil
    from pathlib import Path

    from tests.support.tables import three_day_table

    table = three_day_table(tmp_path / "src")
    shutil.rmtree(flights.path)
    shutil.copytree(table.path, flights.path)
    hoodie = Path(flights.path) / ".hoodie"
    (hoodie / "20990101000000000.deltacommit.requested").write_bytes(b"")
    (hoodie / "20990101000000000.deltacommit.inflight").write_bytes(b"")
    page = operator_client.post("/tables/flights/recover").content.decode()
    assert "Recover flights?" in page and "20990101000000000" in page and "inflight" in page
    assert 'name="confirm" value="true"' in page and not Run.objects.exists()
    assert operator_client.post("/tables/flights/recover", {"confirm": "true"}).status_code == 302
    assert Run.objects.get().kind == "recover"


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
