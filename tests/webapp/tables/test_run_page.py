"""The plan/run page is the audit: per-file-group operations, T, timings, who, outcome, refusals."""
from webapp.tables import services
from webapp.tables.models import Run


def test_run_page_lists_operations_per_file_group(viewer_client, finished_compaction):
    html = viewer_client.get(f"/runs/{finished_compaction.pk}/").content.decode()
    for text in ("fg-1_0-1-0_001.parquet", ".fg-1_001.log.1_0-1-0", ".fg-1_001.log.2_0-1-0", ".fg-1_002.log.1_0-1-0",
                 "symlink", "2013-01-20 01:00:00 UTC", "olivia", "succeeded", "42 s", "hoodie.compaction.carry.over.mode"):
        assert text in html, text


def test_refused_run_shows_reason_and_blocking_instant(viewer_client, flights):
    run = Run.objects.create(table=flights, kind="schedule_execute", state="refused",
                             refusal_reason="pending_compaction", blocking_instant="20130120010000000",
                             error="a compaction is pending")
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Refused: pending_compaction" in html and "20130120010000000" in html


def test_run_page_shows_its_audit_trail(viewer_client, flights, operator):
    run = services.request_run(flights, "clean", operator)
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert "request.clean" in html and "olivia" in html
