"""Browser tests: a real Chromium (Debian's package, headless) drives the live stack — Django server and a
real Celery worker on SQLite + the filesystem broker — through the operator's and the viewer's journeys.

Screenshots of the list, table and plan pages are written to tests/artifacts/ for a human to look at.
"""
from __future__ import annotations

import datetime as dt
import re
import uuid
from pathlib import Path

import pytest

from tests.support.browser import ARTIFACTS, PASSWORD, login, wait_for_run
from tests.support.tables import table_copy

DEMO_BATCHES = 4

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory, spark) -> Path:
    from engine.demo import run_demo

    path = tmp_path_factory.mktemp("browser-demo") / "flights"
    run_demo(str(path), spark, batches=DEMO_BATCHES)
    return path


@pytest.fixture
def demo(stack, demo_template):
    """The flights demo table registered in the stack, sampled by the worker; demo users with known passwords."""
    from django.core.management import call_command

    from tests.support.runs import register, run_to_end

    call_command("tidemark_users", password=PASSWORD, stdout=open("/dev/null", "w"))
    name = f"flights-{uuid.uuid4().hex[:6]}"
    table = register(table_copy(demo_template, stack.table_root / name), name=name, freshness_sla_minutes=24 * 60)
    assert run_to_end(table, "metrics").state == "succeeded"
    return table


def threshold_inside_backlog(table) -> str:
    """An event time in the middle of the table's log backlog (from the tide), so T compacts part of it."""
    tide = [b for b in table.samples.order_by("-taken_at").first().tide if b["start"] and b["log_bytes"]]
    assert len(tide) > 2, "the demo table should have logs spread over event time"
    return tide[len(tide) // 2]["end"]


def moment(text: str) -> dt.datetime:
    """A time as the pages print it ("2013-01-06 00:00:00 UTC") or as the API does (ISO with Z)."""
    return dt.datetime.fromisoformat(text.replace(" UTC", "+00:00").replace("Z", "+00:00"))


def test_operator_previews_triggers_watches_rolls_back_and_reads_the_plan(stack, demo, browser):
    from engine import Table

    ARTIFACTS.mkdir(exist_ok=True)
    page = login(browser, stack.url, "operator")
    asked: list[str] = []     # destructive forms ask first; the question names what they undo
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))

    page.goto(f"{stack.url}/")
    row = page.locator("#tables tr", has=page.locator(f"a:text-is('{demo.name}')"))
    assert row.count() == 1
    completion = row.locator("[data-completion]").inner_text().strip()      # freshness: RO complete up to
    assert completion == "nothing compacted yet" or re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", completion)
    assert row.locator("[data-sla] .badge").inner_text() in ("within SLA", "SLA breached", "lag unknown")
    page.screenshot(path=str(ARTIFACTS / "list.png"), full_page=True)

    page.goto(f"{stack.url}/tables/{demo.name}/")
    before = page.inner_text("#completion").strip()
    instants_before = [i.instant for i in Table.open(demo.path).timeline()]

    # Preview: per-partition compacted vs carried and the completion time it would publish; writes nothing.
    page.fill("#threshold", threshold_inside_backlog(demo))
    page.click("#preview-button")
    page.wait_for_selector("#preview-table", timeout=120_000)
    projected = page.inner_text("#preview-completion").strip()
    assert re.match(r"\d{4}-\d\d-\d\dT", projected), projected
    assert page.locator("#preview-table tbody tr").count() >= 1
    assert [i.instant for i in Table.open(demo.path).timeline()] == instants_before

    # Trigger and watch it to completion: "complete up to" moves past what the preview promised.
    page.click("button[data-action=trigger]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    assert page.is_visible("#progress")
    after = wait_for_run(page)
    # "Complete up to" moved to exactly what the preview projected (the page shows whole seconds).
    assert after != before and moment(after) == moment(projected).replace(microsecond=0)
    progress = page.inner_text("#progress-text")
    done, total = re.search(r"(\d+) / (\d+)", progress).groups()
    assert done == total and int(total) > 0
    page.wait_for_timeout(600)  # let the progress bar's width transition finish before the screenshot
    page.screenshot(path=str(ARTIFACTS / "table.png"), full_page=True)

    # The plan page: operations per file group, T, who, outcome.
    page.click("#progress-link")
    page.wait_for_selector("#operations")
    assert page.locator("#operations tbody tr").count() >= 1
    instant = page.inner_text("#run-instant").strip()
    assert page.inner_text("#run-user").strip() == "operator"
    assert "succeeded" in page.inner_text("h1")
    page.screenshot(path=str(ARTIFACTS / "plan.png"), full_page=True)

    # Plan only, then roll that plan back: "complete up to" stays where the completed compaction put it.
    page.goto(f"{stack.url}/tables/{demo.name}/")
    page.fill("#threshold", threshold_inside_backlog(demo))
    page.select_option("#mode", "schedule")
    page.click("button[data-action=trigger]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    assert wait_for_run(page) == after
    pending = page.inner_text("#pending-plan a.mono").strip()
    assert pending in {c.instant for c in Table.open(demo.path).compactions() if c.state == "requested"}
    page.click("button[data-action=rollback-pending]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    assert asked[-1].startswith(f"Roll back the pending compaction plan {pending}?")
    assert wait_for_run(page) == after
    assert page.locator("#pending-plan").count() == 0
    assert pending not in {c.instant for c in Table.open(demo.path).compactions()}
    assert instant in {c.instant for c in Table.open(demo.path).compactions() if c.state == "completed"}

    # Roll back the completed compaction itself (the form offers it): its base files and carry-overs go,
    # the logs it compacted are read again, and "complete up to" returns to where it was before.
    assert page.input_value("#rollback-instant") == instant
    page.click("button[data-action=rollback]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    assert asked[-1].startswith(f"Roll back instant {instant} on {demo.name}?")
    assert wait_for_run(page) == before
    assert instant not in {c.instant for c in Table.open(demo.path).compactions()}
    page.close()


def test_viewer_sees_no_actions_and_a_forged_post_is_403(stack, demo, browser):
    from webapp.tables.models import Run

    page = login(browser, stack.url, "viewer")
    page.goto(f"{stack.url}/tables/{demo.name}/")
    assert page.locator("[data-action]").count() == 0
    assert page.locator("form[action*='/trigger'], form[action*='/rollback']").count() == 0
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    runs_before = Run.objects.filter(table=demo).count()
    forged = page.request.post(f"{stack.url}/tables/{demo.name}/trigger", form={"csrfmiddlewaretoken": token},
                               headers={"X-CSRFToken": token, "Referer": page.url})
    assert forged.status == 403
    api = page.request.post(f"{stack.url}/api/tables/{demo.name}/compactions", data="{}",
                            headers={"X-CSRFToken": token, "Content-Type": "application/json", "Referer": page.url})
    assert api.status == 403 and "operator role" in api.json()["error"]
    assert Run.objects.filter(table=demo).count() == runs_before
    page.close()


def test_timeline_alerts_and_cancel_pages(stack, demo, browser):
    """The timeline page after a compaction, the alert channel pages, and the cancel button (which asks
    first and ends a queued run as cancelled); screenshots for a human to look at."""
    from django.utils import timezone

    from tests.support.runs import run_to_end
    from webapp.tables.models import Run

    ARTIFACTS.mkdir(exist_ok=True)
    compacted = run_to_end(demo, "schedule_execute", threshold=dt.datetime.fromisoformat(
        threshold_inside_backlog(demo).replace("Z", "+00:00")))
    assert compacted.state == "succeeded", compacted.error
    page = login(browser, stack.url, "operator")
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))

    # The health column: sortable, worst first, with the reason under the badge.
    page.goto(f"{stack.url}/?sort=health")
    health = page.locator("#tables tr", has=page.locator(f"a:text-is('{demo.name}')")).locator("[data-health]")
    assert health.get_attribute("data-health") in ("critical", "warning", "ok")
    assert page.inner_text("th a.sort[href*='sort=-health']").lower().startswith("health ▲")
    page.screenshot(path=str(ARTIFACTS / "list-health.png"), full_page=True)

    page.goto(f"{stack.url}/tables/{demo.name}/")
    page.click("#timeline-link")
    page.wait_for_selector("#timeline")
    assert page.locator("#timeline tbody tr").count() > 2
    page.select_option("select[name=action]", "commit")
    page.click("#timeline-filters button")
    page.wait_for_url(re.compile(r".*action=commit"))
    row = page.locator("#timeline tbody tr").first
    assert compacted.instant in row.inner_text() and row.locator(f"a[href='/runs/{compacted.pk}/']").count() == 1
    page.goto(f"{stack.url}/tables/{demo.name}/timeline")
    page.screenshot(path=str(ARTIFACTS / "timeline.png"), full_page=True)

    page.goto(f"{stack.url}/alerts/")
    assert "No alert channels yet" in page.inner_text("#channels")
    page.fill("#channel-target", "not a url")
    page.click("button[data-action=add-channel]")
    assert "is not an http(s) URL" in page.inner_text("#channel-error")
    assert page.input_value("#channel-target") == "not a url"
    page.fill("#channel-target", "https://hooks.example/services/T0/B0")
    page.click("button[data-action=add-channel]")
    page.wait_for_url(re.compile(r".*/alerts/\d+/$"))
    assert "Nothing sent to this channel yet" in page.inner_text("#deliveries")
    page.screenshot(path=str(ARTIFACTS / "alert-channel.png"), full_page=True)
    page.goto(f"{stack.url}/alerts/")
    page.screenshot(path=str(ARTIFACTS / "alerts.png"), full_page=True)

    # A run nobody dispatched stays queued: its page offers Cancel, which asks, then it never starts.
    queued = Run.objects.create(table=demo, kind="clean", state="queued", queued_at=timezone.now())
    page.goto(f"{stack.url}/runs/{queued.pk}/")
    page.screenshot(path=str(ARTIFACTS / "run-cancel.png"), full_page=True)
    page.click("button[data-action=cancel]")
    page.wait_for_selector("#cancelled")
    assert asked[-1].startswith(f"Cancel run #{queued.pk} (clean)?")
    assert "cancelled" in page.inner_text("h1")
    queued.refresh_from_db()
    assert queued.state == "cancelled"
    page.close()


def fits(page, selector: str) -> bool:
    """The element needs no sideways scrolling, and neither does any card it sits in."""
    return page.eval_on_selector(selector, """el => {
        for (let node = el; node; node = node.parentElement) {
            if (node.scrollWidth > node.clientWidth + 1 && getComputedStyle(node).overflowX !== 'visible') return false;
            if (node.classList && node.classList.contains('card')) break;
        }
        const card = el.closest('.card').getBoundingClientRect(), box = el.getBoundingClientRect();
        return box.left >= card.left && box.right <= card.right;
    }""")


def test_preview_fits_and_pending_plan_validate_unschedule(stack, demo, browser):
    """The preview table fits its card; a plan-only trigger leaves a pending plan whose card validates it (the
    run page lists Valid per file group), lists an unschedule's renames in a dry run without asking, and
    unschedules one file group after asking, naming it. Screenshots for a human to look at."""
    from engine import Table

    ARTIFACTS.mkdir(exist_ok=True)
    page = login(browser, stack.url, "operator")
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.goto(f"{stack.url}/tables/{demo.name}/")
    page.fill("#threshold", threshold_inside_backlog(demo))
    page.click("#preview-button")
    page.wait_for_selector("#preview-table", timeout=120_000)
    assert fits(page, "#preview-table") and fits(page, ".preview-head")
    assert re.search(r"\d+ logs?\s*\d+(\.\d+)? (B|KiB|MiB|GiB)", page.inner_text("#preview-table tfoot"))
    page.locator("#trigger-card").screenshot(path=str(ARTIFACTS / "preview.png"))

    page.select_option("#mode", "schedule")
    page.click("button[data-action=trigger]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    wait_for_run(page)
    pending = page.inner_text("#pending-plan a.mono").strip()
    groups = [c for c in Table.open(demo.path).compaction(pending).operations]
    assert len(groups) >= 2

    page.click("#plan-admin summary")
    page.click("button[data-action=validate-plan]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    wait_for_run(page)
    assert "all valid" in page.inner_text("#plan-admin-runs")
    page.locator("#plan-admin-runs a").first.click()
    page.wait_for_selector("#validation")
    assert page.locator("#validation tbody tr").count() == len(groups)
    assert page.locator("#validation .badge.ok").count() == len(groups)
    page.screenshot(path=str(ARTIFACTS / "plan-validate.png"), full_page=True)

    # A dry run asks nothing and changes nothing; the real unschedule asks, naming the file group.
    page.goto(f"{stack.url}/tables/{demo.name}/")
    one = groups[0]
    key = f"{one.partition}/{one.file_id}" if one.partition else one.file_id
    page.select_option("#unschedule-file-group", key)
    page.click("button[data-action=unschedule-plan]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    wait_for_run(page)
    assert not asked and len(Table.open(demo.path).compaction(pending).operations) == len(groups)
    page.uncheck("#unschedule-form input[name=dry_run]")
    page.select_option("#unschedule-file-group", key)
    page.click("button[data-action=unschedule-plan]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    assert asked[-1].startswith(f"Unschedule {key} from compaction plan {pending}?")
    wait_for_run(page)
    left = Table.open(demo.path).compaction(pending).operations
    assert len(left) == len(groups) - 1 and one.file_id not in {op.file_id for op in left}
    page.screenshot(path=str(ARTIFACTS / "plan-admin.png"), full_page=True)
    page.locator("#plan-admin-runs a").first.click()
    page.wait_for_selector("#plan-admin-result")
    assert key in page.inner_text("#plan-admin-result")
    page.screenshot(path=str(ARTIFACTS / "plan-unschedule.png"), full_page=True)
    page.close()
