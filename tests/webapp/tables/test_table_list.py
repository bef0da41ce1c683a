"""The tables list: latest sample per table, SLA and late-data status, sorting, filtering, constant queries."""
import datetime as dt
import re

from tests.support.records import T0, sample
from webapp.tables.models import RegisteredTable, Run


def rows(html: str) -> list[str]:
    return re.findall(r'<a href="/tables/([-\w]+)/" class="strong">', html)


def test_list_shows_the_latest_sample(operator_client, flights):
    html = operator_client.get("/").content.decode()
    assert "2013-01-19 23:00:00 UTC" in html            # completion of the latest sample, not the older one
    assert "2013-01-19 18:00:00 UTC" not in html
    assert "3 h" in html and "SLA breached" in html      # 3 h lag against a 2 h SLA
    assert "late data: 17" in html
    assert "corrupt blocks: 2" in html   # damaged committed data is flagged where the table is listed
    assert "3.0 MiB" in html and "1 pending" in html


def test_list_sorts_and_filters(operator_client, flights):
    other = RegisteredTable.objects.create(name="aaa-fresh", path="/x/aaa")
    sample(other, T0, completion=T0, lag_s=60, files=50)
    RegisteredTable.objects.create(name="zzz-unsampled", path="/x/zzz")
    assert rows(operator_client.get("/").content.decode()) == ["aaa-fresh", "flights", "zzz-unsampled"]
    assert rows(operator_client.get("/?sort=-files").content.decode())[:2] == ["aaa-fresh", "flights"]
    assert rows(operator_client.get("/?sort=-lag").content.decode())[0] == "flights"
    assert rows(operator_client.get("/?status=breached").content.decode()) == ["flights"]
    assert rows(operator_client.get("/?q=zzz").content.decode()) == ["zzz-unsampled"]


def test_list_shows_last_run_outcome(operator_client, flights, operator):
    Run.objects.create(table=flights, kind="schedule_execute", state="refused", refusal_reason="pending_compaction")
    html = operator_client.get("/").content.decode()
    assert ">compaction</a>" in html and 'title="pending_compaction">refused' in html


def test_list_query_count_does_not_grow_with_tables(operator_client, flights, django_assert_max_num_queries):
    for i in range(60):
        table = RegisteredTable.objects.create(name=f"t{i:03d}", path=f"/x/t{i}")
        for h in range(3):
            sample(table, T0 + dt.timedelta(hours=h), completion=T0, lag_s=h * 60, files=h)
        Run.objects.create(table=table, kind="clean", state="succeeded")
    # session, user, role check, summary, page, its samples, its runs, its failed runs
    with django_assert_max_num_queries(8):
        response = operator_client.get("/")
    assert len(rows(response.content.decode())) == 61


def test_list_badges_paused_tables_and_shows_the_last_compaction_not_a_later_clean(operator_client, flights, operator):
    flights.paused = True
    flights.save()
    compaction = Run.objects.create(table=flights, kind="schedule_execute", state="succeeded",
                                    finished_at=T0 + dt.timedelta(hours=2))
    Run.objects.create(table=flights, kind="clean", state="succeeded")   # newer, not a compaction
    html = operator_client.get("/").content.decode()
    row = html[html.index('<tbody>'):html.index('</tbody>')]
    assert "data-paused" in row and ">paused<" in row
    cell = row[row.index("data-last-compaction"):]
    assert f"/runs/{compaction.pk}/" in cell and "compaction" in cell and ">clean<" not in cell
    assert "2013-01-20 02:00:00 UTC" in cell


def test_rollbacks_are_marked_on_the_charts_and_the_list_fits_narrow_windows(operator_client, flights):
    import json
    from pathlib import Path

    Run.objects.create(table=flights, kind="rollback", state="succeeded", instant="20130120020000000",
                       finished_at=T0 + dt.timedelta(minutes=30))
    page = operator_client.get("/tables/flights/").content.decode()
    chart = json.loads(page.split('id="chart-data" type="application/json">')[1].split("</script>")[0])
    assert [m["instant"] for m in chart["rollbacks"]] == ["20130120020000000"]
    script = (Path(__file__).parents[3] / "static/tidemark/table.js").read_text()
    assert 'id: "verticalMarkers"' in script and "verticalMarkers: rollbacks" in script
    css = (Path(__file__).parents[3] / "static/tidemark/app.css").read_text()
    assert "@media (max-width: 1000px)" in css and "#tables .opt { display: none; }" in css


def test_a_nested_cursor_is_a_400_not_a_crash(viewer_client, flights):
    import base64

    cursor = base64.urlsafe_b64encode(b"[" * 100_000).decode().rstrip("=")
    response = viewer_client.get(f"/api/tables?after={cursor}")
    assert response.status_code == 400 and "invalid page cursor" in response.json()["error"]
