"""Runs history filters by table, user, outcome and date (pages and API alike)."""
import datetime as dt
import re

import pytest

from webapp.tables.models import RegisteredTable, Run

DAY = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)


@pytest.fixture
def history(flights, operator, viewer):
    other = RegisteredTable.objects.create(name="other", path="/x/other")
    return {
        "a": Run.objects.create(table=flights, kind="clean", state="succeeded", requested_by=operator, queued_at=DAY),
        "b": Run.objects.create(table=flights, kind="schedule_execute", state="refused", trigger="schedule",
                                queued_at=DAY + dt.timedelta(days=1)),
        "c": Run.objects.create(table=other, kind="rollback", state="failed", requested_by=operator,
                                queued_at=DAY + dt.timedelta(days=2)),
    }


def ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'<td><a href="/runs/(\d+)/">', html)]


@pytest.mark.parametrize("query, expected", [
    ("", ["c", "b", "a"]), ("table=flights", ["b", "a"]), ("user=olivia", ["c", "a"]), ("user=system", ["b"]),
    ("state=failed", ["c"]), ("since=2026-03-02", ["c", "b"]), ("until=2026-03-02", ["b", "a"]),
    ("since=2026-03-02&until=2026-03-02", ["b"]),
])
def test_runs_page_filters(viewer_client, history, query, expected):
    html = viewer_client.get(f"/runs/?{query}").content.decode()
    assert ids(html) == [history[k].pk for k in expected]


def test_api_runs_filters_the_same_way(viewer_client, history):
    body = viewer_client.get("/api/runs?table=flights&state=refused").json()
    assert [r["id"] for r in body["runs"]] == [history["b"].pk]
    assert body["runs"][0]["requested_by"] is None and body["runs"][0]["trigger"] == "schedule"


def test_bad_date_is_a_400_naming_it(viewer_client, history):
    response = viewer_client.get("/api/runs?since=last-week")
    assert response.status_code == 400 and "since must be a date" in response.json()["error"]
