"""Metric samples: the table's freshness and backlog, read through the engine and stored over time.

Pages and the API read only the latest stored sample per table, never the storage, so sampling happens
here: after every run, and for all tables on beat's schedule.

Freshness lag is the engine's (`engine.Table.freshness_lag`, the same number `tidemark tide` prints): how
far the RO view trails the newest data, in event time.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from engine import Table, TimelineMark
from tasks import heatmap, watch
from tasks import location as locations
from webapp.tables.models import MetricSample, RegisteredTable, SamplingState

log = logging.getLogger(__name__)

TIDE_BUCKET = "1h"


def _when(value: Any) -> dt.datetime | None:
    """An engine time (ISO-8601 string, datetime or epoch ms) as an aware datetime; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value / 1000, dt.UTC)
    parsed = parse_datetime(str(value).replace("Z", "+00:00"))
    if parsed is None:
        raise ValueError(f"engine returned an unreadable time {value!r}")
    return parsed


def sla_breached(table: RegisteredTable, lag_seconds: float | None) -> bool:
    sla = table.freshness_sla_minutes
    return sla is not None and lag_seconds is not None and lag_seconds > sla * 60


def read(table: RegisteredTable, mark: TimelineMark | None = None) -> tuple[TimelineMark, dict[str, Any]]:
    """Freshness, backlog and tide of `table` through the engine, as MetricSample fields (nothing stored),
    with the timeline mark they were read under (`mark`, or taken here first)."""
    location = locations.checked(table.path)  # the allow-list holds for reads too
    mark = mark or Table.mark(location)
    engine_table = locations.open_table(location)
    freshness = engine_table.freshness()
    fresh = freshness.to_dict()
    backlog = engine_table.metrics().to_dict()
    buckets = engine_table.tide(bucket=TIDE_BUCKET)
    tide = [bucket.to_dict() for bucket in buckets]
    completion = _when(fresh.get("ro_completion_time"))
    delta = engine_table.freshness_lag(freshness=freshness, buckets=buckets)
    lag = None if delta is None else delta.total_seconds()
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
        "table_version": engine_table.config.version,
        "activity": _activity(engine_table),
    }


# What the clock says when a sample is read: a sample keeps only what the table says (an unchanged table's floor
# sample must equal the previous one, `same_as`); the page and the API measure the lag from `last_write_at` themselves.
_CLOCK_FIELDS = ("checked_at", "checked_at_ms", "lag_seconds")


def _activity(engine_table: Table) -> dict[str, Any]:
    """engine.Table.activity() as stored: housekeeping, and ingestion without the moment it was read."""
    activity = engine_table.activity().to_dict()
    activity["ingestion"] = {k: v for k, v in activity["ingestion"].items() if k not in _CLOCK_FIELDS}
    return activity


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
