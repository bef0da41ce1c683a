"""The table's timeline page: every instant of the active timeline with its time, files, records and bytes
(from the commit metadata a Java writer left), filtered by action and state, linked to the run that
recorded it; the table page's charts get the completed compactions as markers."""
from __future__ import annotations

import datetime as dt

from webapp.tables.models import RegisteredTable, Run


def test_timeline_lists_instants_with_files_and_records(operator_client, fixture_table, settings):
    path = fixture_table("v6_trips_8i1u")
    settings.TIDEMARK_TABLE_ROOTS = [str(path.parent)]
    table = RegisteredTable.objects.create(name="trips", path=str(path))
    Run.objects.create(table=table, kind="execute", state="succeeded", instant="20250331030645735")
    page = operator_client.get("/tables/trips/timeline").content.decode()
    assert page.index("20250331030645735") < page.index("20250331030642808"), "newest first"
    assert "2025-03-31 03:06:42 UTC" in page
    rows = page.split('<tr data-action="')[1:]
    assert len(rows) == 2 and all(r.startswith('deltacommit" data-state="completed"') for r in rows)
    first = rows[1]
    assert '<td class="num">3</td><td class="num">8</td>' in first and "1.2 MiB" in first
    run = Run.objects.get(table=table)
    assert f'href="/runs/{run.pk}/"' in rows[0]
    filtered = operator_client.get("/tables/trips/timeline?action=commit").content.decode()
    assert '<tr data-action="' not in filtered and "No instant matches this filter" in filtered
    assert operator_client.get("/tables/trips/timeline?state=completed").content.decode().count('<tr data-action=') == 2


def test_chart_data_carries_compaction_markers(operator_client, flights, finished_compaction):
    page = operator_client.get("/tables/flights/").content.decode()
    assert '"compactions": [{"t": "2013-01-20T00:00:42Z", "instant": "20130120020000000"' in page
    assert isinstance(finished_compaction.finished_at, dt.datetime)
