"""Each table's Hudi version (as its newest sample read it) on the list, the table page and the API, and the
version filter of both; a table not sampled yet shows none and matches no version."""
from __future__ import annotations

import datetime as dt

import pytest

from tests.support.api_schema import validate
from webapp.tables.models import MetricSample, RegisteredTable

T = dt.datetime(2013, 1, 21, tzinfo=dt.UTC)


@pytest.fixture
def three(flights):
    """flights at version 6, orders at version 8 (its older sample said 6: the newest counts), fresh unsampled."""
    MetricSample.objects.create(table=flights, taken_at=T, table_version=6)
    orders = RegisteredTable.objects.create(name="orders", path=flights.path + "-orders")
    MetricSample.objects.create(table=orders, taken_at=T, table_version=6)
    MetricSample.objects.create(table=orders, taken_at=T + dt.timedelta(hours=1), table_version=8)
    RegisteredTable.objects.create(name="fresh", path=flights.path + "-fresh")


def test_list_page_shows_each_version_and_filters_by_it(viewer_client, three):
    page = viewer_client.get("/").content.decode()
    assert page.count('data-version="6"') == 1 and page.count('data-version="8"') == 1
    assert 'title="Hudi table version 8">v8</span>' in page
    assert '<option value="8" >Hudi table version 8</option>' in page
    only8 = viewer_client.get("/?version=8").content.decode()
    assert ">orders</a>" in only8 and ">flights</a>" not in only8 and ">fresh</a>" not in only8
    assert 'value="8" selected' in only8


def test_api_reports_and_filters_versions(viewer_client, three):
    response = viewer_client.get("/api/tables")
    validate("/api/tables", "get", response)
    assert {t["name"]: t["table_version"] for t in response.json()["tables"]} == {
        "flights": 6, "orders": 8, "fresh": None}
    assert [t["name"] for t in viewer_client.get("/api/tables?version=6").json()["tables"]] == ["flights"]
    assert viewer_client.get("/api/tables?version=7").json()["tables"] == []
    bad = viewer_client.get("/api/tables?version=eight")
    assert bad.status_code == 400 and "version must be a Hudi table version number" in bad.json()["error"]
    detail = viewer_client.get("/api/tables/orders")
    validate("/api/tables/{name}", "get", detail)
    assert detail.json()["table_version"] == 8


def test_table_page_shows_the_version_beside_the_name(viewer_client, three):
    assert 'data-version="8"' in viewer_client.get("/tables/orders/").content.decode()
    assert "data-version" not in viewer_client.get("/tables/fresh/").content.decode()
