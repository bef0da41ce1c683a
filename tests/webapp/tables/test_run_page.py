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


def test_stored_values_read_as_words_not_python(viewer_client, flights):
    """Issue 34 item 11: a result's records, flags and nothings in words."""
    import re

    run = Run.objects.create(table=flights, kind="clean", state="succeeded",
                             result={"compaction_stats": {"log_files_compacted": 152, "records_updated": 12000},
                                     "restored_ro": {}, "dry_run": False, "note": None, "files_deleted": 3})
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    # either order: PostgreSQL's jsonb orders a record's keys its own way
    assert "log files compacted 152 · records updated 12,000" in html or \
        "records updated 12,000 · log files compacted 152" in html
    section = html[html.index("<dl class=\"facts\">", html.index("files deleted") - 2000):]
    assert not re.search(r"\{'|\bFalse\b|\bNone\b", section), "a Python repr on the run page"
    assert "restored ro" in html and "compaction stats" in html


def test_a_dry_run_unschedule_reads_as_not_done(viewer_client, flights):
    """Issue 34 item 12: "Would unschedule", a dry-run badge, and marked so in the runs list."""
    result = {"instant": "20130120020000000", "dry_run": True, "unscheduled_file_groups": ["fg-1"],
              "remaining_file_groups": 2, "renames": [], "message": "would unschedule fg-1 from compaction "
              "20130120020000000: would move 0 log(s) written since planning into the previous slice; 2 file "
              "group(s) stay planned"}
    run = Run.objects.create(table=flights, kind="unschedule", state="succeeded", instant="20130120020000000",
                             dry_run=True, result=result)
    html = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Would unschedule (dry run, nothing changed)" in html and "dry run: nothing changed" in html
    assert "Unscheduled:" not in html
    listing = viewer_client.get("/runs/").content.decode()
    row = listing[listing.index(f'/runs/{run.pk}/"'):]
    assert "dry run" in row[:row.index("</tr>")]


def test_the_audit_leaves_empty_values_out(viewer_client, flights, operator):
    """Issue 34 item 11: no bare `instant=` in the audit log."""
    services.audit(operator, "cancel", table=flights, outcome="cancelled", detail={"instant": "", "run": 5})
    html = viewer_client.get("/audit/").content.decode()
    assert "run=5" in html and "instant=" not in html
