"""The table page's backlog heatmap: partitions × event-time buckets from the latest sample, darker where more
log bytes wait, each cell titled with what it holds; a sample without one says so."""
from __future__ import annotations

from webapp.tables.models import MetricSample

DAY = 86_400_000
E = 1_357_603_200_000   # 2013-01-08T00:00Z


def test_heatmap_rows_columns_and_shades(operator_client, flights):
    latest = MetricSample.objects.filter(table=flights).order_by("-taken_at").first()
    latest.backlog_heatmap = {"bucket_ms": DAY, "rows": ["origin=JFK", "origin=EWR"],
                              "cells": [[0, E, 3, 3 << 20], [0, E + 2 * DAY, 1, 1000], [1, E + DAY, 1, 50_000],
                                        [1, None, 1, 10]]}
    latest.save()
    page = operator_client.get("/tables/flights/").content.decode()
    table = page[page.index('id="heatmap"'):page.index("</table>", page.index('id="heatmap"'))]
    assert table.count("<tr>") == 3                                  # two partitions and the label row
    assert table.count('<td class="h') == 2 * 4                     # 3 days (gap kept) + unknown event time
    assert 'class="h5" title="origin=JFK · 2013-01-08 00:00 → 2013-01-09 00:00 UTC: 3 log files, 3.0 MiB"' in table
    assert "unknown event time: 1 log file, 10 B" in table and ">unknown<" in table
    assert table.count('class="h0"') == 4 and "event-time bucket of 1 d" in page


def test_no_heatmap_without_backlog(operator_client, flights):
    page = operator_client.get("/tables/flights/").content.decode()
    assert 'id="heatmap-card"' in page and 'id="heatmap"' not in page and "No log backlog to map" in page
