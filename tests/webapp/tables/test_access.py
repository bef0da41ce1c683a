"""webapp.tables.access is the one way the web opens a registered table: a folder swapped for a link out of
TIDEMARK_TABLE_ROOTS after registration is refused by every page and API call that reads it — the timeline
page among them — and no other web module opens a table itself."""
from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support.tables import three_day_table

ROOT = Path(__file__).resolve().parents[3]
# Modules allowed to call Table.open: the access module, discovery (candidates under a checked root) and the
# demo command (the table it has just created).
OPENERS = {"webapp/tables/access.py", "webapp/tables/discovery.py",
           "webapp/tables/management/commands/tidemark_demo.py"}
REFUSED = "outside the allowed table roots"


@pytest.fixture
def swapped(flights, tmp_path):
    """flights' registered folder replaced by a link to a real table outside the roots."""
    outside = tmp_path / "outside" / "t"
    outside.parent.mkdir()
    three_day_table(outside.parent)   # creates <outside.parent>/t with three days of writes
    folder = Path(flights.path)
    shutil.rmtree(folder)
    folder.symlink_to(outside, target_is_directory=True)
    return flights


def test_the_timeline_page_refuses_a_table_swapped_out_of_the_roots(viewer_client, swapped):
    page = viewer_client.get("/tables/flights/timeline").content.decode()
    assert REFUSED in page
    assert not re.search(r"\b\d{17}\b", page), "an instant of the table outside the roots was shown"


def test_every_read_refuses_it(operator_client, swapped):
    assert REFUSED in operator_client.get("/api/tables/flights").json()["timeline_error"]
    assert REFUSED in operator_client.get("/tables/flights/").content.decode()
    preview = operator_client.post("/api/tables/flights/preview", json.dumps({"threshold": "2013-01-02T00:00:00Z"}),
                                   content_type="application/json")
    assert preview.status_code == 400 and REFUSED in preview.json()["error"]
    edit = operator_client.patch("/api/tables/flights", json.dumps({"clean_policy": "KEEP_LATEST_COMMITS"}),
                                 content_type="application/json")
    assert edit.status_code == 400 and REFUSED in edit.json()["error"]


def test_only_the_access_module_opens_tables():
    openers = set()
    for path in (ROOT / "webapp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "Table.open":
                openers.add(str(path.relative_to(ROOT)))
    assert openers <= OPENERS, openers - OPENERS
