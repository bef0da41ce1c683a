"""The table page: status cards, chart data from stored samples, the operator's forms."""
import json
import re

from webapp.tables.models import Run


def chart_data(html: str) -> dict:
    return json.loads(re.search(r'<script id="chart-data" type="application/json">(.*?)</script>', html, re.S).group(1))


def test_table_page_shows_status_and_embeds_chart_series(operator_client, flights):
    html = operator_client.get("/tables/flights/").content.decode()
    assert "RO complete up to" in html and "2013-01-19 23:00:00 UTC" in html
    data = chart_data(html)
    assert [p["files"] for p in data["series"]] == [12, 4]           # oldest first
    assert [p["lag"] for p in data["series"]] == [21600.0, 10800.0]
    assert data["sla_seconds"] == 7200
    assert [b["log_records"] for b in data["tide"]] == [500, 200]
    assert 'src="/static/vendor/chart.js/chart.umd.min.js"' in html


def test_operator_sees_trigger_preview_and_maintenance_forms(operator_client, flights, finished_compaction):
    html = operator_client.get("/tables/flights/").content.decode()
    for action in ("trigger", "preview", "clean", "recover", "rollback", "refresh"):
        assert f'data-action="{action}"' in html
    assert 'data-preview-url="/api/tables/flights/preview"' in html
    assert 'id="pending-plan"' not in html                # the finished compaction is not pending


def test_a_pending_plan_offers_execute_and_roll_back(operator_client, viewer_client, flights, operator, planned):
    engine_table, plan = planned
    run = Run.objects.create(table=flights, kind="schedule", state="succeeded", instant=plan.instant,
                             plan=plan.to_dict(), requested_by=operator)
    html = operator_client.get("/tables/flights/").content.decode()
    assert 'id="pending-plan"' in html and "2 file groups" in html
    assert f'href="/runs/{run.pk}/" class="mono strong">{plan.instant}</a>' in html and "Planned by run" in html
    assert 'data-action="execute"' in html and 'data-action="rollback-pending"' in html
    assert f'value="{plan.instant}"' in html
    viewer_html = viewer_client.get("/tables/flights/").content.decode()
    assert 'id="pending-plan"' in viewer_html and 'data-action="execute"' not in viewer_html
    engine_table.rollback(plan.instant)       # gone from the timeline: gone from the page, whatever the runs say
    assert 'id="pending-plan"' not in operator_client.get("/tables/flights/").content.decode()


def test_page_follows_the_requested_run(operator_client, flights):
    run = Run.objects.create(table=flights, kind="clean", state="running", progress_done=1, progress_total=4)
    html = operator_client.get(f"/tables/flights/?run={run.pk}").content.decode()
    assert f'data-run-url="/api/runs/{run.pk}"' in html


def test_unknown_table_is_404(operator_client, db):
    assert operator_client.get("/tables/nope/").status_code == 404


def test_the_threshold_example_is_the_tables_own(operator_client, flights, db):
    """Issue 34 item 13: the placeholder is this table's newest event-time bucket, not the demo's date."""
    import datetime as dt

    from django.utils import timezone

    from webapp.tables.models import RegisteredTable

    page = operator_client.get("/tables/flights/").content.decode()
    assert 'placeholder="2013-01-20T01:00:00Z"' in page     # flights' newest tide bucket starts then
    bare = RegisteredTable.objects.create(name="bare", path=flights.path + "-bare")
    today = timezone.now().astimezone(dt.UTC).strftime("%Y-%m-%dT00:00:00Z")
    assert f'placeholder="{today}"' in operator_client.get(f"/tables/{bare.name}/").content.decode()
