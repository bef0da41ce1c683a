"""The table page's progress box says the same before and after a live refresh: the server renders it from
`webapp.tables.status.progress_view` and the run JSON table.js polls carries the same words and classes, and the
script holds no copy of the kind labels, badge classes or state rules (it reads only fields the JSON has)."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from webapp.tables.models import Run

SCRIPT = Path(__file__).resolve().parents[3] / "static" / "tidemark" / "table.js"


def box(page: str, element_id: str) -> tuple[str, str]:
    """(class, text) of the progress box element `element_id` as the server rendered it."""
    found = re.search(rf'<(\w+) id="{element_id}"(?: class="([^"]*)")?[^>]*>(.*?)</\1>', page, re.S)
    assert found, element_id
    return found.group(2) or "", html.unescape(found.group(3)).strip()


@pytest.mark.parametrize("fields", [
    {"kind": Run.Kind.SCHEDULE, "state": Run.State.QUEUED},
    {"kind": Run.Kind.SCHEDULE_EXECUTE, "state": Run.State.RUNNING, "progress_done": 3, "progress_total": 8,
     "progress_unit": "file groups", "instant": "20130120020000000"},
    {"kind": Run.Kind.EXECUTE, "state": Run.State.SUCCEEDED, "progress_done": 8, "progress_total": 8,
     "progress_unit": "file groups", "instant": "20130120020000000"},
    {"kind": Run.Kind.CLEAN, "state": Run.State.FAILED, "error": "storage unreachable (error id 3f2a)\ntrace line"},
    {"kind": Run.Kind.SCHEDULE_EXECUTE, "state": Run.State.REFUSED, "refusal_reason": "pending_compaction",
     "blocking_instant": "20130120020000000", "error": "a compaction is pending"},
], ids=lambda f: f"{f['kind']}-{f['state']}")
def test_the_box_reads_the_same_from_the_page_and_from_the_json(operator_client, flights, fields):
    run = Run.objects.create(table=flights, **fields)
    page = operator_client.get(f"/tables/flights/?run={run.pk}").content.decode()
    shown = operator_client.get(f"/api/runs/{run.pk}").json()
    assert box(page, "progress-kind")[1] == shown["kind_label"]
    assert box(page, "progress-state") == (f"badge {shown['state_class']}", shown["state"])
    assert box(page, "progress-text")[1] == shown["progress_text"]
    assert box(page, "progress-detail")[1] == shown["detail"]
    assert box(page, "progress-bar")[0] == shown["bar_class"]
    assert shown["bar_class"] == ("" if run.is_active else "ok" if run.state == Run.State.SUCCEEDED else "bad")
    if run.state == Run.State.FAILED:
        assert shown["detail"] == "storage unreachable (error id 3f2a)"        # the first line only
    if run.state == Run.State.REFUSED:
        assert "refused: pending_compaction (blocked by 20130120020000000)" in shown["detail"]
    if run.state == Run.State.QUEUED:
        assert shown["progress_text"] == "waiting for a worker"


def test_table_js_renders_only_fields_the_server_shapes(operator_client, flights):
    script = SCRIPT.read_text()
    run = Run.objects.create(table=flights, kind=Run.Kind.SCHEDULE, state=Run.State.SUCCEEDED)
    fields = set(operator_client.get(f"/api/runs/{run.pk}").json())
    assert set(re.findall(r"\brun\.([a-z_]+)", script)) <= fields
    for literal in (*Run.State.values, *Run.Kind.values):
        assert f'"{literal}"' not in script and f"'{literal}'" not in script, literal
