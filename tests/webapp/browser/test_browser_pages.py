"""Browser test of the pages' first hour (issue 34, items 10–15): Debian's headless Chromium on Django's live
server (no worker: the runs a page shows are recorded here, the table itself is a real one on disk, so Clean's and
Recover's dry runs read it through the engine).

- a GET on a form's address (a reload after a refused register form, /alerts/new) lands on the form's page;
- a run page reads in words (no False, None, {…});
- a dry-run unschedule is marked as one on its page and in the Runs list;
- the threshold placeholder is the table's own time;
- Clean and Recover show their dry run and ask before anything is queued;
- a paused table is badged, the list shows the last compaction, rollbacks are marked on the charts, and at
  820 px the list's last column stays on screen.

Screenshots go to tests/artifacts/pages-*.png for a human to look at.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone

from engine import Table
from tests.support.browser import ARTIFACTS, PASSWORD, login
from tests.support.records import make_user, sample
from tests.support.tables import day_file, table_with_plan
from webapp.accounts.roles import OPERATOR
from webapp.tables.models import RegisteredTable, Run

HOUR = dt.timedelta(hours=1)


def _cleanable_table(path: Path) -> None:
    """A real table, compacted twice with a write since, whose old slices a clean would delete."""
    table, plan = table_with_plan(str(path))
    table.update_settings({"hoodie.clean.automatic": "false", "hoodie.cleaner.commits.retained": "1"})
    table.run_compaction(plan.instant, local=True)
    table.write(day_file(path.parent, 9, "04", keys=8))
    table.run_compaction(table.schedule_compaction(strategy="unbounded").instant, local=True)
    table.write(day_file(path.parent, 10, "05", keys=8))


@pytest.fixture
def orders(transactional_db, tmp_path, settings):
    """The table registered (paused) with a day of samples, its runs as workers record them, an operator."""
    root = tmp_path / "tables"
    root.mkdir()
    settings.TIDEMARK_TABLE_ROOTS = [str(root)]
    _cleanable_table(root / "orders")
    pending = "20240106000000000"
    user = make_user("olivia", OPERATOR)
    user.set_password(PASSWORD)
    user.save()
    table = RegisteredTable.objects.create(name="orders", path=str(root / "orders"), freshness_sla_minutes=180,
                                           paused=True)
    RegisteredTable.objects.create(name="orders-backfill-with-a-long-name", path=str(root / "orders-backfill"),
                                   freshness_sla_minutes=60)
    now = timezone.now().replace(microsecond=0)
    tide = [{"start": "2024-01-04T00:00:00.000Z", "end": "2024-01-04T01:00:00.000Z", "log_files": 2,
             "log_records": 16, "log_bytes": 9000}]
    for h in range(12, -1, -1):
        s = sample(table, now - h * HOUR, completion=dt.datetime(2024, 1, 3, tzinfo=dt.UTC), lag_s=(3 + h % 4) * 3600,
                   files=2 + (12 - h) % 5, log_bytes=(2 + (12 - h) % 5) << 20, slices=2, pending=1, tide=tide if h == 0 else None)
    facts = Table.open(str(root / "orders")).activity().to_dict()   # the panels as the sampler stores them
    written = now - 30 * HOUR   # 30 h without a write: stale
    facts["ingestion"].update(last_write_at=written.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                              last_write_at_ms=int(written.timestamp() * 1000))
    s.activity = facts
    s.save()
    for i, (minutes, size) in enumerate(((2, 40 << 20), (3, 55 << 20), (5, 90 << 20))):
        end = now - (10 - 4 * i) * HOUR
        Run.objects.create(table=table, kind="schedule_execute", state="succeeded", instant=f"2024010{i + 1}120000000",
                           requested_by=user, queued_at=end - dt.timedelta(minutes=minutes), started_at=end -
                           dt.timedelta(minutes=minutes), finished_at=end,
                           plan={"threshold": "2024-01-02T12:00:00Z", "settings_used": {
                               "hoodie.compaction.exact": {"value": False, "source": "default"}}},
                           result={"instant": f"2024010{i + 1}120000000", "records_written": 16_000,
                                   "compaction_stats": {"log_files_compacted": 152, "log_bytes_compacted": size,
                                                        "records_updated": 0},
                                   "catalog_sync": None, "services": {"clean": None, "archive": {}}})
    Run.objects.create(table=table, kind="rollback", state="succeeded", instant="20240102120000000",
                       queued_at=now - 5 * HOUR, started_at=now - 5 * HOUR, finished_at=now - 5 * HOUR,
                       result={"instant": "20240102120000000", "was_completed": False, "restored_ro": {},
                               "deleted_files": []})
    Run.objects.create(table=table, kind="unschedule", state="succeeded", instant=pending, dry_run=True,
                       queued_at=now - HOUR, result={"instant": pending, "dry_run": True, "renames": [],
                                                     "unscheduled_file_groups": ["fg-1"], "remaining_file_groups": 1,
                                                     "message": f"would unschedule fg-1 from compaction {pending}"})
    Run.objects.create(table=table, kind="unschedule", state="succeeded", instant="20240101000000000",
                       queued_at=now - 2 * HOUR)
    Run.objects.create(table=table, kind="clean", state="succeeded", queued_at=now)   # newer than every compaction
    return table


def _shot(page, name: str, **kw) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.wait_for_timeout(400)   # charts finish their animation
    page.screenshot(path=str(ARTIFACTS / f"pages-{name}.png"), full_page=True, **kw)


def test_the_first_hour_of_an_operator_on_the_pages(live_server, orders, browser):
    url = live_server.url
    page = login(browser, url, "olivia")
    page.on("dialog", lambda dialog: dialog.accept())

    # 15: the list: paused badge, last compaction (not the newer clean), stale last write
    row = page.locator("#tables tr", has=page.locator("a:text-is('orders')"))
    assert row.locator("[data-paused]").inner_text() == "paused"
    assert row.locator("[data-last-compaction]").inner_text().startswith("compaction succeeded")
    assert "30 h ago" in row.locator("[data-last-write]").inner_text()
    _shot(page, "list")

    # 10: a refused register form, then its address reloaded as a GET: the list with the form, not a blank 405
    page.click("summary:text('Register a table')")
    page.fill("#register-form input[name=name]", "orders")
    page.fill("#register-form input[name=path]", "/nowhere")
    page.click("#register-form button[type=submit]")
    page.wait_for_selector("#register-error")
    response = page.goto(f"{url}/tables/register")
    assert response.ok and page.url == f"{url}/" and "carries out an action when its form is sent" in page.inner_text(".messages")
    _shot(page, "register-get")
    page.goto(f"{url}/alerts/new")
    assert page.url == f"{url}/alerts/" and page.is_visible("#channel-form")

    # 11: a run page in words
    compaction = orders.runs.filter(kind="schedule_execute").order_by("-finished_at").first()
    page.goto(f"{url}/runs/{compaction.pk}/")
    text = page.inner_text("main")
    for raw in ("False", "None", "{'", "{}"):
        assert raw not in text, raw
    assert "log files compacted 152" in page.inner_text("#result")
    _shot(page, "run")
    rollback = orders.runs.get(kind="rollback")
    page.goto(f"{url}/runs/{rollback.pk}/")
    assert "restored ro" in page.inner_text("#result") and "restored_ro" not in page.inner_text("main")

    # 12: the dry-run unschedule reads as one, on its page and in the Runs list
    page.goto(f"{url}/runs/")
    kinds = [page.inner_text(f"#runs tbody tr:nth-child({i}) td:nth-child(3)") for i in range(1, 7)]
    assert "unschedule plan dry run" in kinds and "unschedule plan" in kinds
    _shot(page, "runs")
    dry = orders.runs.get(kind="unschedule", dry_run=True)
    page.goto(f"{url}/runs/{dry.pk}/")
    assert page.inner_text("#unschedule-summary").startswith("Would unschedule") and page.is_visible("#dry-run-badge")

    # 13: the threshold placeholder is the table's own newest event time
    page.goto(f"{url}/tables/orders/")
    assert page.get_attribute("#threshold", "placeholder") == "2024-01-04T00:00:00Z"   # its newest tide bucket

    # 15, 17: rollbacks marked on the charts, trends charted, the stale and paused badges
    assert page.is_visible("#stale-badge") and page.is_visible("h1 [data-paused]")
    assert page.inner_text("#ingestion-lag").startswith("30 h")
    drawn = page.evaluate("() => Chart.getChart('backlog-chart').options.plugins.verticalMarkers.markers.length")
    assert drawn == 1
    assert page.evaluate("() => Chart.getChart('trend-chart').data.datasets[0].data.length") == 3
    _shot(page, "table")

    # 14: Clean and Recover show their dry run, then ask
    runs_before = Run.objects.count()
    page.click("button[data-action=clean]")
    page.wait_for_selector("#maintenance-preview")
    heading = page.inner_text("#maintenance-preview h2")
    planned = int(heading.split()[2])
    assert heading == f"Would delete {planned} files" and planned > 0
    assert page.locator("#preview-files tbody tr").count() == planned and Run.objects.count() == runs_before
    _shot(page, "clean-preview")
    page.click("[data-action=cancel-preview]")
    page.click("button[data-action=recover]")
    page.wait_for_selector("#maintenance-preview")
    assert "Nothing to recover" in page.inner_text("#maintenance-preview h2")
    assert "the table is quiescent" in page.inner_text("#preview-lines")
    _shot(page, "recover-preview")
    page.go_back()
    page.click("button[data-action=clean]")
    page.click("button[data-action=confirm-clean]")
    page.wait_for_selector(".msg.success")
    assert "Clean queued as run" in page.inner_text(".messages") and Run.objects.count() == runs_before + 1

    # 15: at 820 px the list's last column stays on screen
    narrow = browser.new_page(viewport={"width": 820, "height": 900})
    narrow.context.add_cookies(page.context.cookies())
    narrow.goto(f"{url}/")
    right = narrow.evaluate("() => document.querySelector('#tables thead th:last-child').getBoundingClientRect().right")
    assert right <= 820, right
    assert narrow.evaluate("() => document.documentElement.scrollWidth") <= 820
    _shot(narrow, "list-820")

    # 17: a channel's test alert
    page.goto(f"{url}/alerts/")
    page.fill("#channel-target", "https://hooks.example/tidemark")
    page.click("[data-action=add-channel]")
    page.click("[data-action=test-channel]")
    page.wait_for_selector(".msg.success")
    assert "Test alert queued" in page.inner_text(".messages")
    assert page.inner_text("#deliveries tbody tr:first-child td:nth-child(2)") == "test"
    _shot(page, "channel")
    narrow.close()
    page.close()
