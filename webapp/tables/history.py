"""A table's sample history for its charts, downsampled so a month of 5-minute samples stays ~500 points.

The window is chosen on the page (?range=1d|7d|30d|all, default 7d). When it holds more samples than
points, it is cut into equal time buckets and each bucket is drawn as one point: its last backlog values
(the state at the end of the bucket) and its *peak* freshness lag, so a short breach stays visible however
long the history — the same rule as the hourly/daily rows of webapp.tables.retention.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from webapp.tables.models import MetricSample, RegisteredTable
from webapp.tables.status import iso

RANGES = {"1d": dt.timedelta(days=1), "7d": dt.timedelta(days=7), "30d": dt.timedelta(days=30), "all": None}
DEFAULT_RANGE = "7d"
POINTS = 500
FIELDS = ("taken_at", "remaining_log_files", "remaining_log_bytes", "file_slices_with_logs",
          "freshness_lag_seconds")


def chart_series(table: RegisteredTable, window: str = DEFAULT_RANGE, points: int = POINTS,
                 newest: dt.datetime | None = None) -> list[dict[str, Any]]:
    """The chart points of `table` over `window` (a key of RANGES) up to its newest sample (`newest`),
    oldest first, at most `points`. The window ends at the newest sample, not now, so a table that stopped
    changing still shows its last week."""
    span = RANGES.get(window, RANGES[DEFAULT_RANGE])
    samples = MetricSample.objects.filter(table=table)
    if span is not None and newest is not None:
        samples = samples.filter(taken_at__gte=newest - span)
    rows = list(samples.order_by("taken_at", "id").values_list(*FIELDS))
    return [_point(bucket) for bucket in downsample(rows, points)]


# One sample as values_list gives it: taken_at first.
Row = tuple[Any, ...]


def downsample(rows: list[Row], points: int) -> list[list[Row]]:
    """`rows` (taken_at first, oldest first) in at most `points` consecutive, equally long time buckets."""
    if len(rows) <= points:
        return [[r] for r in rows]
    start, end = rows[0][0], rows[-1][0]
    width = (end - start) / points or dt.timedelta(microseconds=1)
    buckets: list[list[Row]] = []
    current_index = None
    for row in rows:
        index = min(int((row[0] - start) / width), points - 1)
        if index != current_index:
            buckets.append([])
            current_index = index
        buckets[-1].append(row)
    return buckets


def _point(bucket: list[Row]) -> dict[str, Any]:
    taken_at, files, size, slices, _ = bucket[-1]
    lags = [r[4] for r in bucket if r[4] is not None]
    return {"t": iso(taken_at), "files": files, "bytes": size, "slices": slices, "lag": max(lags) if lags else None}
