"""The tables list and GET /api/tables at scale (webapp.tables.listing), on SQLite and on PostgreSQL:
keyset pages walk every table exactly once in order (forwards and back, whatever the sort, with missing
values and ties), the status filters select in the database, bad cursors are refused with a clear message,
and the latest-sample pointer follows every new sample."""
from __future__ import annotations

import datetime as dt
import re

import pytest
from django.test import Client

from webapp.accounts.roles import VIEWER
from webapp.tables import latest, listing
from webapp.tables.inputs import InvalidInput
from webapp.tables.models import MetricSample, RegisteredTable, Run, SamplingState

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
N = 130


@pytest.fixture
def many(stack_env) -> list[RegisteredTable]:
    """N tables: every 7th never sampled, lags with ties, an SLA on every 3rd, late data on every 5th,
    a pending plan on every 11th; each sampled table has an older and a newer sample."""
    tables = RegisteredTable.objects.bulk_create(
        [RegisteredTable(name=f"t{i:03d}", path=f"/x/t{i:03d}", freshness_sla_minutes=60 if i % 3 == 0 else None)
         for i in range(N)])
    SamplingState.objects.bulk_create([SamplingState(table=t) for t in tables], ignore_conflicts=True)
    rows = []
    for i, t in enumerate(tables):
        if i % 7 == 0:
            continue
        rows.append(MetricSample(table=t, taken_at=T0, freshness_lag_seconds=99_999, remaining_log_files=999))
        rows.append(MetricSample(table=t, taken_at=T0 + dt.timedelta(hours=1), freshness_lag_seconds=(i % 10) * 900.0,
                                 ro_completion_time=T0 - dt.timedelta(minutes=i % 4), remaining_log_files=i % 6,
                                 late_records=5 if i % 5 == 0 else 0, pending_compactions=1 if i % 11 == 0 else 0))
    MetricSample.objects.bulk_create(rows)
    latest.point_at_newest([t.pk for t in tables])
    return tables


def walk(params: dict, limit: int) -> list[str]:
    names, cursor = [], None
    while True:
        page = listing.page({**params, **({"after": cursor} if cursor else {})}, limit)
        names += [r.table["name"] for r in page.rows]
        if page.next_cursor is None:
            return names
        cursor = page.next_cursor


def expected_order(tables, key, descending: bool) -> list[str]:
    def value(t):
        s = SamplingState.objects.get(table=t).latest_sample
        if key == "lag":
            return -1 if s is None or s.freshness_lag_seconds is None else s.freshness_lag_seconds
        if key == "files":
            return -1 if s is None else s.remaining_log_files
        return (s.ro_completion_time if s and s.ro_completion_time else listing.NEVER)
    return [t.name for t in sorted(tables, key=lambda t: (value(t), t.name), reverse=descending)]


@pytest.mark.parametrize("sort", ["name", "-name", "lag", "-lag", "files", "-files", "completion", "-completion"])
def test_keyset_pages_visit_every_table_once_in_order(many, sort):
    names = walk({"sort": sort}, limit=17)
    key = sort.lstrip("-")
    if key == "name":
        assert names == sorted((t.name for t in many), reverse=sort.startswith("-"))
    else:
        assert names == expected_order(many, key, sort.startswith("-"))


def test_before_cursor_returns_the_previous_page(many):
    first = listing.page({"sort": "-lag"}, 20)
    second = listing.page({"sort": "-lag", "after": first.next_cursor}, 20)
    assert first.prev_cursor is None and second.prev_cursor is not None
    back = listing.page({"sort": "-lag", "before": second.prev_cursor}, 20)
    assert [r.table["name"] for r in back.rows] == [r.table["name"] for r in first.rows]
    assert back.next_cursor is not None


def test_status_filters_select_in_the_database(many):
    def names(status: str) -> set[str]:
        return set(walk({"status": status}, limit=50))

    sampled = [i for i in range(N) if i % 7]
    assert names("breached") == {f"t{i:03d}" for i in sampled if i % 3 == 0 and (i % 10) * 900 > 3600}
    assert names("late") == {f"t{i:03d}" for i in sampled if i % 5 == 0}
    assert names("pending") == {f"t{i:03d}" for i in sampled if i % 11 == 0}
    assert names("backlog") == {f"t{i:03d}" for i in sampled if i % 6}
    failed, recovered = many[1], many[2]
    Run.objects.create(table=failed, kind="clean", state="failed")
    Run.objects.create(table=recovered, kind="clean", state="failed", queued_at=T0)
    Run.objects.create(table=recovered, kind="clean", state="succeeded", queued_at=T0 + dt.timedelta(minutes=1))
    Run.objects.create(table=recovered, kind="metrics", state="failed", queued_at=T0 + dt.timedelta(minutes=2))
    SamplingState.objects.filter(table=many[3]).update(error="change check failed: gone")
    assert names("failing") == {"t001", "t003"}     # newest run failed, or sampling fails; metrics runs ignored
    summary = listing.summary(RegisteredTable.objects.all())
    assert summary["tables"] == N and summary["late"] == len(names("late"))
    assert summary["breached"] == len(names("breached"))


def test_search_combines_with_filters_and_sort(many):
    assert walk({"q": "t01", "status": "late", "sort": "-name"}, 5) == ["t015", "t010"]


def test_bad_cursor_sort_and_status_are_refused_clearly(many):
    with pytest.raises(InvalidInput, match="invalid page cursor"):
        listing.page({"after": "not-a-cursor"}, 10)
    with pytest.raises(InvalidInput, match="sort must be one of"):
        listing.page({"sort": "size"}, 10)
    with pytest.raises(InvalidInput, match="status must be one of"):
        listing.page({"status": "sad"}, 10)
    name_cursor = listing.page({}, 10).next_cursor
    with pytest.raises(InvalidInput, match="invalid page cursor"):
        listing.page({"sort": "lag", "after": name_cursor}, 10)


def test_latest_pointer_follows_new_samples_but_not_older_ones(many):
    table = many[1]
    newer = MetricSample.objects.create(table=table, taken_at=T0 + dt.timedelta(days=1), remaining_log_files=42)
    MetricSample.objects.create(table=table, taken_at=T0 - dt.timedelta(days=1), remaining_log_files=7)  # backfill
    assert SamplingState.objects.get(table=table).latest_sample_id == newer.pk
    fresh = RegisteredTable.objects.create(name="fresh", path="/x/fresh")
    assert SamplingState.objects.filter(table=fresh, latest_sample=None).exists()


@pytest.fixture
def client(stack_env) -> Client:
    from tests.support.records import make_user

    c = Client()
    c.force_login(make_user("scale-viewer", VIEWER))
    return c


def test_api_pages_link_next_and_previous(many, client):
    body = client.get("/api/tables?limit=50&sort=-lag").json()
    assert body["count"] == N and len(body["tables"]) == 50 and body["previous"] is None
    seen = [t["name"] for t in body["tables"]]
    while body["next"]:
        body = client.get(body["next"]).json()
        seen += [t["name"] for t in body["tables"]]
    assert seen == expected_order(many, "lag", True)
    assert client.get("/api/tables?status=late&limit=5").json()["count"] == len(walk({"status": "late"}, 50))
    bad = client.get("/api/tables?after=xyz")
    assert bad.status_code == 400 and "invalid page cursor" in bad.json()["error"]


def test_list_page_shows_one_page_with_a_next_link(many, client):
    html = client.get("/?sort=name").content.decode()
    assert len(re.findall(r'class="strong">', html)) == 100
    nxt = re.search(r'href="\?([^"]+)" rel="next"', html).group(1).replace("&amp;", "&")
    rest = client.get(f"/?{nxt}").content.decode()
    assert re.findall(r'<a href="/tables/([-\w]+)/" class="strong">', rest) == [f"t{i:03d}" for i in range(100, N)]
    assert 'rel="prev"' in rest and 'rel="next"' not in rest
    assert "invalid page cursor" in client.get("/?after=zzz", follow=True).content.decode()
