"""Browser test: a living table's Housekeeping and Ingestion panels in Debian's headless Chromium on the live stack
(Django server + a real Celery worker, SQLite): the panels show what the worker's sample read (policy and retention
marked as Hudi's defaults, the last clean and the files it deleted, archival, the active timeline, the last write
and the stream's query, batch and watermark), the lag ticks on its own, and an operator changes the clean policy
from the settings form; the metrics sample it queues brings the new policy to the panel.

Screenshots go to tests/artifacts/ (activity-panels.png, activity-policy.png).
"""
from __future__ import annotations

import os
import uuid

import pytest

from tests.support.browser import ARTIFACTS, PASSWORD, login
from tests.support.tables import living_table

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)


@pytest.fixture
def living(stack, tmp_path):
    """The living table registered in the stack and sampled by the worker; demo users with known passwords."""
    from django.core.management import call_command

    from tests.support.runs import register, run_to_end

    call_command("tidemark_users", password=PASSWORD, stdout=open(os.devnull, "w"))
    name = f"orders_{uuid.uuid4().hex[:6]}"
    table = living_table(stack.table_root / name, tmp_path)
    registered = register(stack.table_root / name, name=name)
    assert run_to_end(registered, "metrics").state == "succeeded"
    return registered, table


def test_panels_show_the_living_table_and_the_operator_changes_its_clean_policy(stack, living, browser):
    from tests.support.runs import wait_until
    from webapp.tables.models import Run

    registered, table = living
    facts = table.activity()
    page = login(browser, stack.url, "operator")
    page.goto(f"{stack.url}/tables/{registered.name}/")

    housekeeping = page.locator("#housekeeping-panel")
    assert housekeeping.locator("#clean-policy").inner_text().split() == ["KEEP_LATEST_COMMITS", "default"]
    assert housekeeping.locator("#clean-retention").inner_text().split() == ["10", "commits", "default"]
    assert page.inner_text("#last-clean").startswith(facts.housekeeping.last_clean or "?")
    assert "3 files deleted" in page.inner_text("#last-clean-files")
    assert page.inner_text("#archival").startswith("on keep 20–30 commits")
    assert page.inner_text("#archived") == "nothing archived yet"
    assert page.inner_text("#active-timeline") == (f"{facts.housekeeping.active_instants} instants in "
                                                   f"{facts.housekeeping.active_instant_files} files")
    assert page.inner_text("#last-write") == facts.ingestion.last_write
    assert (page.inner_text("#stream-query"), page.inner_text("#stream-batch")) == ("orders-q", "12")
    assert page.inner_text("#stream-watermark") == "2024-01-02 12:00:00 UTC"
    first = page.inner_text("#ingestion-lag")
    # the lag ticks in the page, with no reload
    page.wait_for_function(f"() => document.getElementById('ingestion-lag').textContent !== {first!r}",
                           timeout=10_000)
    page.locator("#activity").screenshot(path=str(ARTIFACTS / "activity-panels.png"))
    page.screenshot(path=str(ARTIFACTS / "activity-page.png"), full_page=True)

    page.select_option("#clean_policy", "KEEP_LATEST_FILE_VERSIONS")
    page.fill("#clean_retained", "2")
    page.click("[data-action=save-settings]")
    page.wait_for_selector(".msg.success")
    sample_run = Run.objects.get(table=registered, kind=Run.Kind.METRICS, requested_by__username="operator")
    wait_until(lambda: Run.objects.get(pk=sample_run.pk).state == "succeeded", 120, "the metrics sample")
    page.reload()
    assert page.inner_text("#clean-policy") == "KEEP_LATEST_FILE_VERSIONS"   # the table's now: no default badge
    assert page.inner_text("#clean-retention") == "2 file versions"
    assert page.input_value("#clean_retained") == "2"
    page.locator("#housekeeping-panel").screenshot(path=str(ARTIFACTS / "activity-policy.png"))
    page.close()
