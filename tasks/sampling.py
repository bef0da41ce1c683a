"""Metric samples: the table's freshness and backlog, read through the engine and stored over time.

Pages and the API read only the latest stored sample per table, never the storage, so sampling happens
here: after every run, and for all tables on beat's schedule.

Freshness lag is how far the RO view trails the newest data: the newest event time still in logs minus
the RO completion time ("complete up to"). When no log remains the RO view holds everything (lag 0);
before any event-time compaction the RO view promises nothing, so the lag spans all logged data (newest
minus oldest log event time). It is an event-time distance, so a table of historical data (the 2013
flights demo) has a meaningful lag too, where wall-clock lag would be years.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engine import Table, TimelineMark
from tasks import heatmap
from tasks import location as locations
from tasks import watch
from webapp.tables.models import MetricSample, RegisteredTable, SamplingState

log = logging.getLogger(__name__)

TIDE_BUCKET = "1h"


def _when(value: Any) -> dt.datetime | None:
    """An engine time (ISO-8601 string, datetime or epoch ms) as an aware datetime; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value / 1000, dt.timezone.utc)
    parsed = parse_datetime(str(value).replace("Z", "+00:00"))
    if parsed is None:
        raise ValueError(f"engine returned an unreadable time {value!r}")
    return parsed


def newest_logged(tide: list[dict[str, Any]]) -> dt.datetime | None:
    """End of the newest event-time bucket that still has log records (None without logs)."""
    ends = [_when(b.get("end")) for b in tide if (b.get("log_records") or b.get("log_bytes"))]
    return max((e for e in ends if e is not None), default=None)


def oldest_logged(tide: list[dict[str, Any]]) -> dt.datetime | None:
    starts = [_when(b.get("start")) for b in tide if (b.get("log_records") or b.get("log_bytes"))]
    return min((s for s in starts if s is not None), default=None)


def freshness_lag_seconds(completion: dt.datetime | None, tide: list[dict[str, Any]]) -> float | None:
    """See the module docstring; None when the table holds no data at all."""
    newest = newest_logged(tide)
    if newest is None:
        return 0.0 if completion is not None else None
    since = completion or oldest_logged(tide)
    return max((newest - since).total_seconds(), 0.0) if since is not None else None


def sla_breached(table: RegisteredTable, lag_seconds: float | None) -> bool:
    sla = table.freshness_sla_minutes
    return sla is not None and lag_seconds is not None and lag_seconds > sla * 60


def read(table: RegisteredTable, mark: TimelineMark | None = None) -> tuple[TimelineMark, dict[str, Any]]:
    """Freshness, backlog and tide of `table` through the engine, as MetricSample fields (nothing stored),
    with the timeline mark they were read under (`mark`, or taken here first)."""
    location = locations.checked(table.path)  # the allow-list holds for reads too
    mark = mark or Table.mark(location)
    engine_table = Table.open(location)
    fresh = engine_table.freshness().to_dict()
    backlog = engine_table.metrics().to_dict()
    tide = [bucket.to_dict() for bucket in engine_table.tide(bucket=TIDE_BUCKET)]
    completion = _when(fresh.get("ro_completion_time"))
    lag = freshness_lag_seconds(completion, tide)
    compactions = engine_table.compactions()
    pending = [c.instant for c in compactions if c.state != "completed"]
    completed = [c.instant for c in compactions if c.state == "completed"]
    return mark, {
        "ro_completion_time": completion,
        "ro_freshness_time": _when(fresh.get("ro_freshness_time")),
        "freshness_lag_seconds": lag,
        "remaining_log_files": backlog["remaining_log_files"],
        "remaining_log_bytes": backlog["remaining_log_bytes"],
        "file_slices_with_logs": backlog["file_slices_with_logs"],
        "pending_compactions": backlog["pending_compactions"],
        "late_records": fresh.get("late_records") or 0,
        "corrupt_log_blocks": backlog.get("corrupt_log_blocks") or 0,
        "earliest_pending_compaction": min(pending, default=""),
        "oldest_log_instant": backlog.get("oldest_log_instant") or "",
        "latest_completed_compaction": max(completed, default=""),
        "sla_breached": sla_breached(table, lag),
        "tide": tide,
        "backlog_heatmap": heatmap.read(engine_table, tide),
        "catalog": engine_table.catalog_status().to_dict(),
    }


def store(table: RegisteredTable, mark: TimelineMark, fields: dict[str, Any]) -> MetricSample:
    """Store `fields` as the table's newest sample, with the mark they were read under; breaches, late data
    and corrupt blocks it shows against the previous sample are audited and alerted once (tasks.watch)."""
    previous = MetricSample.objects.filter(table=table).order_by("-taken_at", "-pk").first()
    sample = MetricSample.objects.create(table=table, taken_at=timezone.now(), **fields)
    SamplingState.objects.filter(table=table).update(mark=mark.digest, newest_instant=mark.newest_instant or "")
    watch.observe(table, sample, previous)
    return sample


def same_as(sample: MetricSample | None, fields: dict[str, Any]) -> bool:
    """`fields` say nothing `sample` did not (a floor sample of an unchanged table)."""
    return sample is not None and all(getattr(sample, key) == value for key, value in fields.items())


def refresh(table: RegisteredTable, mark: TimelineMark | None = None) -> MetricSample:
    """Read freshness, backlog and tide through the engine and store them as the table's newest sample.

    The timeline mark (`mark`, or taken here first) is stored with it, so the next change check skips the
    table unless something happened after this sample started (tasks.change_sampling).
    """
    return store(table, *read(table, mark))


def refresh_quietly(table: RegisteredTable, mark: TimelineMark | None = None) -> MetricSample | None:
    """`refresh`, logging instead of raising: a run's outcome is already recorded, sampling is extra."""
    try:
        return refresh(table, mark)
    except Exception:
        log.exception("could not sample metrics of table %s", table.name)
        return None
