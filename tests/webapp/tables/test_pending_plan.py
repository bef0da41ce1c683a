"""The pending-plan card and `pending_plan` JSON come from the table's timeline (read through the engine once per
request), not from Run rows: a plan scheduled with `tidemark compaction schedule` (no run) is pending on the page
and in the API with its instant, threshold and file groups, on table versions 6 and 8; once it is gone from the
timeline it is gone from both. An unreadable table still renders, saying why."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import Table
from engine.cli import main
from tests.support.api_schema import validate
from tests.support.tables import DAYS, THRESHOLD, day_file
from webapp.tables.models import Run


def cli_table(path: str, table_version: int) -> None:
    """A two-file-group table with one log per day, made and planned with the CLI only."""
    assert main(["create", path, "--name", Path(path).name, "--record-key", "id", "--ordering-field", "seq",
                 "--event-time-field", "ts", "--table-version", str(table_version),
                 "--config", "hoodie.bucket.index.num.buckets=2"]) == 0
    sources = Path(path).parent / "sources"
    sources.mkdir()
    for i, day in enumerate(DAYS):
        assert main(["write", path, "--input", day_file(sources, i, day, keys=8)]) == 0
    assert main(["compaction", "schedule", path, "--threshold", THRESHOLD]) == 0


@pytest.mark.parametrize("table_version", [6, 8, 9])
def test_a_plan_scheduled_from_the_cli_is_pending_on_the_page_and_in_the_json(operator_client, flights, capsys,
                                                                              table_version):
    cli_table(flights.path, table_version)
    capsys.readouterr()
    (plan,) = [c for c in Table.open(flights.path).compactions() if c.state != "completed"]
    groups = sorted(op.file_id for op in Table.open(flights.path).compaction(plan.instant).operations)
    assert len(groups) == 2 and not Run.objects.exists()

    page = operator_client.get("/tables/flights/").content.decode()
    assert '<div class="value" id="pending-count">1</div>' in page   # the stat agrees with the card, not the sample
    card = page[page.index('id="pending-plan"'):page.index("</section>", page.index('id="pending-plan"'))]
    assert f">{plan.instant}</a>" in card and 'id="pending-state">requested<' in card
    assert '<span id="pending-threshold">2024-01-02 12:00:00 UTC</span>' in card
    assert '<span id="pending-groups">2 file groups</span>' in card and "(of" not in card
    assert 'id="pending-outside"' in card                     # no run planned it: said so, not hidden
    assert sorted(re.findall(r'<option value="([^"]+)">', card)) == groups   # unschedule offers each group
    assert card.count(f'name="instant" value="{plan.instant}"') == 5    # execute, roll back, validate, unschedule, repair

    response = operator_client.get("/api/tables/flights")
    validate("/api/tables/{name}", "get", response)
    pending = response.json()["pending_plan"]
    assert (pending["instant"], pending["state"], pending["threshold"]) == (plan.instant, "requested",
                                                                            "2024-01-02T12:00:00Z")
    assert pending["file_groups"] == 2 and sorted(op["file_id"] for op in pending["operations"]) == groups
    assert pending["run_id"] is None

    # Rolled back from the CLI: gone from the page and the JSON at once, no run involved.
    assert main(["rollback", flights.path, "--instant", plan.instant]) == 0
    assert 'id="pending-plan"' not in operator_client.get("/tables/flights/").content.decode()
    assert operator_client.get("/api/tables/flights").json()["pending_plan"] is None


def test_an_unreadable_table_still_renders_and_says_why(operator_client, flights):
    """`flights` here is an empty folder: no timeline to read."""
    page = operator_client.get("/tables/flights/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="timeline-error"' in html and 'id="pending-plan"' not in html
    body = operator_client.get("/api/tables/flights").json()
    assert body["pending_plan"] is None and flights.path in body["timeline_error"]
