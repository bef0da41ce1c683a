"""Browser test: Hudi table version 6, 8 and 9 tables side by side, as an operator sees them in Debian's
headless Chromium on the live stack (Django server + a real Celery worker, SQLite): the list shows both with their
versions and filters by version; the v8 table's page shows its version and a plan scheduled outside the control
plane (read from the timeline), which the operator executes and watches to the end — the run's kind reads the
same before and after the live refresh.

Screenshots go to tests/artifacts/ (versions-list.png, versions-v8-table.png, versions-v8-done.png).
"""
from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

from tests.support.browser import ARTIFACTS, PASSWORD, RUN_TIMEOUT_MS, login
from tests.support.demo_tables import demo_table
from tests.support.tables import table_copy

BATCHES = 3

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def templates(tmp_path_factory, spark) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("browser-versions")
    return {v: demo_table(root / f"v{v}" / "flights", spark, batches=BATCHES, table_version=v) for v in (6, 8, 9)}


@pytest.fixture
def tables(stack, templates):
    """Both demo tables registered and sampled by the worker; demo users with known passwords."""
    from django.core.management import call_command

    from tests.support.runs import register, run_to_end

    call_command("tidemark_users", password=PASSWORD, stdout=open(os.devnull, "w"))
    out = {}
    for version, template in templates.items():
        name = f"flights-v{version}-{uuid.uuid4().hex[:4]}"
        out[version] = register(table_copy(template, stack.table_root / name), name=name,
                                freshness_sla_minutes=24 * 60)
        assert run_to_end(out[version], "metrics").state == "succeeded"
    return out


def threshold_inside_backlog(table) -> str:
    tide = [b for b in table.samples.order_by("-taken_at").first().tide if b["start"] and b["log_bytes"]]
    assert len(tide) > 2, "the demo table should have logs spread over event time"
    return tide[len(tide) // 2]["end"]


def test_v6_and_v8_listed_and_a_cli_plan_on_the_v8_page_executed(stack, tables, browser):
    from engine import Table

    ARTIFACTS.mkdir(exist_ok=True)
    page = login(browser, stack.url, "operator")
    page.on("dialog", lambda dialog: dialog.accept())

    page.goto(f"{stack.url}/")
    for version, table in tables.items():
        row = page.locator("#tables tr", has=page.locator(f"a:text-is('{table.name}')"))
        assert row.count() == 1
        assert row.locator("[data-version]").inner_text().strip() == f"v{version}"
    page.screenshot(path=str(ARTIFACTS / "versions-list.png"), full_page=True)
    for shown in (9, 8):
        page.select_option("#version-filter", str(shown))
        page.click(".filters button[type=submit]")
        page.wait_for_url(re.compile(rf".*version={shown}"))
        for version, table in tables.items():
            assert page.locator(f"#tables a:text-is('{table.name}')").count() == (version == shown), (shown, version)

    # A plan scheduled outside the control plane (as `tidemark compaction schedule` does): no run knows it.
    v8 = tables[8]
    plan = Table.open(v8.path).schedule_compaction(threshold=threshold_inside_backlog(v8))
    assert not v8.runs.filter(instant=plan.instant).exists()
    page.goto(f"{stack.url}/tables/{v8.name}/")
    assert page.inner_text("h1 [data-version]").strip() == "v8"
    assert page.inner_text("#pending-plan a.mono").strip() == plan.instant
    assert page.is_visible("#pending-outside")
    assert page.inner_text("#pending-count").strip() == "1"     # the stat card reads the same timeline
    groups = page.inner_text("#pending-groups")
    assert groups == f"{len(plan.operations)} file group{'s' if len(plan.operations) != 1 else ''}"
    page.wait_for_timeout(500)   # let the charts draw before the screenshot
    page.screenshot(path=str(ARTIFACTS / "versions-v8-table.png"), full_page=True)
    before = page.inner_text("#completion").strip()

    # Execute it from the card and watch it: the kind reads the same server-rendered and after each poll.
    page.click("button[data-action=execute]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    label = page.inner_text("#progress-kind").strip()
    assert label == "execute plan"
    page.wait_for_function("() => ['succeeded','failed','refused'].includes("
                           "document.getElementById('progress-state').textContent.trim())", timeout=RUN_TIMEOUT_MS)
    assert page.inner_text("#progress-state").strip() == "succeeded", page.inner_text("#progress-detail")
    assert page.inner_text("#progress-kind").strip() == label
    page.wait_for_url(re.compile(r".*[?&]done=\d+"), timeout=60_000)
    page.wait_for_function("() => document.getElementById('progress-state').textContent.trim() === 'succeeded'",
                           timeout=30_000)
    assert page.inner_text("#progress-kind").strip() == label
    assert page.get_attribute("#progress-bar", "class") == "ok"
    assert page.locator("#pending-plan").count() == 0
    after = page.inner_text("#completion").strip()
    assert after != before and re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", after)
    assert plan.instant in {c.instant for c in Table.open(v8.path).compactions() if c.state == "completed"}
    page.wait_for_timeout(600)
    page.screenshot(path=str(ARTIFACTS / "versions-v8-done.png"), full_page=True)
    page.close()
