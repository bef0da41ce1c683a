"""Sample retention: old samples are rolled up so the database stops growing with time.

Three tiers, each an environment setting (days; read on every roll-up):
- `TIDEMARK_SAMPLES_RAW_DAYS` (default 7): samples younger than this stay as taken;
- `TIDEMARK_SAMPLES_HOURLY_DAYS` (default 90): older samples become one row per table and hour; past this
  age the hourly rows become one row per table and day;
- `TIDEMARK_SAMPLES_KEEP_DAYS` (default 400; 0 keeps daily rows forever): older rows are deleted.

A rolled-up row is the newest sample of its bucket (its backlog and completion time are the state at the
end of the bucket) with the bucket's *peak* freshness lag, "breached" when any sample of the bucket
breached, `rolled_up` = how many samples it stands for, and no tide (only the latest sample's tide is
ever shown). A table's latest sample is never rolled up (an unchanged table's may be weeks old). Cut-offs are
aligned to whole buckets, so a bucket is rolled up once, completely.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from engine import ConfigError, env
from webapp.tables.models import MetricSample, RegisteredTable, SamplingState

HOUR, DAY = 3600, 86400
FIELDS = ("id", "table_id", "taken_at", "freshness_lag_seconds", "sla_breached", "rolled_up")
BATCH = 2000
TABLES_PER_PASS = 200   # a first roll-up of a month of history reads at most this many tables' rows at once


@dataclass(frozen=True)
class Retention:
    raw_days: float = 7
    hourly_days: float = 90
    keep_days: float = 400

    @classmethod
    def from_env(cls) -> Retention:
        values = {key: env.number(f"TIDEMARK_SAMPLES_{key.split('_')[0].upper()}_DAYS", default, unit="days",
                                 minimum=0, exclusive=False)
                  for key, default in (("raw_days", 7), ("hourly_days", 90), ("keep_days", 400))}
        retention = cls(**values)
        if retention.hourly_days < retention.raw_days:
            raise ConfigError("TIDEMARK_SAMPLES_HOURLY_DAYS must be at least TIDEMARK_SAMPLES_RAW_DAYS")
        if retention.keep_days and retention.keep_days < retention.hourly_days:
            raise ConfigError("TIDEMARK_SAMPLES_KEEP_DAYS must be 0 (forever) or at least TIDEMARK_SAMPLES_HOURLY_DAYS")
        return retention


@dataclass
class RollupReport:
    rolled_hourly: int = 0   # rows folded away into hourly rows
    rolled_daily: int = 0
    deleted: int = 0


def roll_up(now: dt.datetime | None = None, retention: Retention | None = None) -> RollupReport:
    """Apply the retention tiers once (beat runs this hourly; re-running it changes nothing)."""
    now = now or timezone.now()
    retention = retention or Retention.from_env()
    report = RollupReport()
    report.rolled_hourly = _roll(_aligned(now - dt.timedelta(days=retention.raw_days), HOUR), HOUR)
    report.rolled_daily = _roll(_aligned(now - dt.timedelta(days=retention.hourly_days), DAY), DAY)
    if retention.keep_days:
        report.deleted, _ = MetricSample.objects.filter(
            taken_at__lt=now - dt.timedelta(days=retention.keep_days)).delete()
    return report


def _aligned(moment: dt.datetime, bucket_s: int) -> dt.datetime:
    seconds = int(moment.timestamp()) // bucket_s * bucket_s
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def _roll(before: dt.datetime, bucket_s: int) -> int:
    """Fold every (table, bucket) group of finer rows taken before `before` into its newest row."""
    folded = 0
    ids = list(RegisteredTable.objects.order_by("pk").values_list("pk", flat=True))
    for i in range(0, len(ids), TABLES_PER_PASS):
        folded += _roll_tables(ids[i:i + TABLES_PER_PASS], before, bucket_s)
    return folded


def _roll_tables(table_ids: list[int], before: dt.datetime, bucket_s: int) -> int:
    """`_roll` for some tables: their rows are read whole first (SQLite does not isolate a cursor from its
    own connection's writes), a bounded number at a time."""
    latest = SamplingState.objects.filter(table_id__in=table_ids, latest_sample__isnull=False)
    rows = list(MetricSample.objects.filter(table_id__in=table_ids, resolution_seconds__lt=bucket_s,
                                            taken_at__lt=before)
                .exclude(id__in=latest.values("latest_sample_id"))   # a table's latest sample stays as taken
                .order_by("table_id", "taken_at", "id").values(*FIELDS))
    folded = 0
    keep: list[MetricSample] = []
    drop: list[int] = []
    for group in _groups(iter(rows), bucket_s):
        newest = group[-1]
        lags = [r["freshness_lag_seconds"] for r in group if r["freshness_lag_seconds"] is not None]
        keep.append(MetricSample(id=newest["id"], resolution_seconds=bucket_s,
                                 rolled_up=sum(r["rolled_up"] for r in group),
                                 freshness_lag_seconds=max(lags) if lags else None,
                                 sla_breached=any(r["sla_breached"] for r in group), tide=[],
                                 backlog_heatmap={}))
        drop.extend(r["id"] for r in group[:-1])
        folded += len(group) - 1
        if len(keep) >= BATCH:
            _write(keep, drop)
            keep, drop = [], []
    _write(keep, drop)
    return folded


def _groups(rows: Iterator[dict[str, Any]], bucket_s: int) -> Iterator[list[dict[str, Any]]]:
    group: list[dict[str, Any]] = []
    key = None
    for row in rows:
        row_key = (row["table_id"], int(row["taken_at"].timestamp()) // bucket_s)
        if group and row_key != key:
            yield group
            group = []
        key = row_key
        group.append(row)
    if group:
        yield group


def _write(keep: list[MetricSample], drop: list[int]) -> None:
    if not keep and not drop:
        return
    with transaction.atomic():
        MetricSample.objects.bulk_update(
            keep, ["resolution_seconds", "rolled_up", "freshness_lag_seconds", "sla_breached", "tide", "backlog_heatmap"],
            batch_size=500)
        for i in range(0, len(drop), 500):
            MetricSample.objects.filter(id__in=drop[i:i + 500]).delete()
