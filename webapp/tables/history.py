"""A table's sample history for its charts, downsampled so a month of 5-minute samples stays ~500 points.

The window is chosen on the page (?range=1d|7d|30d|all, default 7d). When it holds more samples than
points, it is cut into equal time buckets and each bucket is drawn as one point: its last backlog values
(the state at the end of the bucket) and its *peak* freshness lag, so a short breach stays visible however
long the history — the same rule as the hourly/daily rows of webapp.tables.retention.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from webapp.tables.models import MetricSample, RegisteredTable, Run
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


TREND_RUNS = 500   # newest completed compactions drawn on the trend chart


def compaction_trends(table: RegisteredTable, limit: int = TREND_RUNS) -> list[dict[str, Any]]:
    """Per completed compaction run (oldest first): when it finished, how long it ran, the log bytes it
    rewrote into base files and its cost in core-seconds — all as the run recorded them."""
    runs = (table.runs.filter(kind__in=(Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE), state=Run.State.SUCCEEDED,
                              started_at__isnull=False, finished_at__isnull=False)
            .order_by("-finished_at").only("id", "started_at", "finished_at", "result", "plan")[:limit])
    return [_trend_point(run) for run in reversed(list(runs))]


def _trend_point(run: Run) -> dict[str, Any]:
    seconds = (run.finished_at - run.started_at).total_seconds()   # type: ignore[operator]
    return {"t": iso(run.finished_at), "run": run.pk, "seconds": round(seconds, 3),
            "bytes": rewritten_bytes(run), "core_seconds": round(seconds * run_cores(run), 3)}


def rewritten_bytes(run: Run) -> int | None:
    """Log bytes the compaction folded into base files: Hudi's write stats of its commit, else its plan's sum."""
    stats = (run.result or {}).get("compaction_stats") or {}
    if stats.get("log_bytes_compacted") is not None:
        return int(stats["log_bytes_compacted"])
    sizes = [op.get("bytes_compacted") for op in (run.plan or {}).get("operations") or []]
    return sum(sizes) if sizes and None not in sizes else None


def run_cores(run: Run) -> int:
    """The cores a run held: what it recorded (`cores` in its result, a Spark run's executors), else one — an
    in-process run compacts on one worker slot."""
    cores = (run.result or {}).get("cores")
    return int(cores) if isinstance(cores, int) and cores > 0 else 1
