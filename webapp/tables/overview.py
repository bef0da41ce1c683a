"""The status of many tables at once, read from stored rows in four queries whatever their number.

Tables, their newest MetricSample and their newest run come back as plain dicts (`.values()`): the list
page, GET /api/tables and /metrics show 1,000 tables, and building model instances for them would cost
more than the queries.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from webapp.tables.health import Health, assess
from webapp.tables.models import MetricSample, RegisteredTable, Run, SamplingState

TABLE_FIELDS = ("id", "name", "path", "schedule_minutes", "data_latency", "freshness_sla_minutes", "carry_over",
                "exact", "paused")
SAMPLE_FIELDS = ("table_id", "taken_at", "ro_completion_time", "ro_freshness_time", "freshness_lag_seconds",
                 "remaining_log_files", "remaining_log_bytes", "file_slices_with_logs", "pending_compactions",
                 "late_records", "corrupt_log_blocks", "sla_breached", "earliest_pending_compaction",
                 "latest_completed_compaction", "oldest_log_instant", "catalog", "table_version", "id")
RUN_FIELDS = ("id", "table_id", "kind", "state", "refusal_reason")


@dataclass
class TableStatus:
    table: dict[str, Any]
    sample: dict[str, Any] | None
    last_run: dict[str, Any] | None
    failed_last_day: int = 0
    sampling_error: str = ""   # why the table's latest change check or sample failed ("" when it did not)

    @property
    def health(self) -> Health:
        return assess(self.sample, self.sla, self.failed_last_day, timezone.now(), self.sampling_error)

    @property
    def sla(self) -> str:
        return sla_status(self.table["freshness_sla_minutes"], self.sample)

    @property
    def late(self) -> bool:
        return bool(self.sample and self.sample["late_records"])


def sla_status(sla_minutes: int | None, sample: dict[str, Any] | None) -> str:
    """"none" (no SLA), "unknown" (not sampled yet), "breached" or "ok"."""
    if sla_minutes is None:
        return "none"
    lag = sample["freshness_lag_seconds"] if sample else None
    if lag is None:
        return "unknown"
    return "breached" if lag > sla_minutes * 60 else "ok"


def latest_samples(tables: QuerySet[RegisteredTable]) -> dict[int, dict[str, Any]]:
    """The newest sample of each of `tables`, in one query: each table's SamplingState points at it
    (webapp.tables.latest), so this is a primary-key lookup per table, never a scan of the samples."""
    ids = SamplingState.objects.filter(table__in=tables.order_by().values("pk")).values("latest_sample_id")
    return {row["table_id"]: row for row in MetricSample.objects.filter(id__in=ids).values(*SAMPLE_FIELDS)}


def latest_runs(tables: QuerySet[RegisteredTable]) -> dict[int, dict[str, Any]]:
    """The newest run (other than metrics refreshes) of each of `tables`, in one query."""
    newest = (Run.objects.filter(table=OuterRef("pk")).exclude(kind=Run.Kind.METRICS)
              .order_by("-queued_at", "-id").values("id")[:1])
    ids = tables.order_by().annotate(run_id=Subquery(newest)).values("run_id")
    return {row["table_id"]: row for row in Run.objects.filter(id__in=ids).values(*RUN_FIELDS)}


def failed_last_day(tables: QuerySet[RegisteredTable]) -> dict[int, int]:
    """Runs that failed in the last 24 hours, per table, not counting those a later success redid (a run of
    the same kind) or repaired (a recover) (one grouped query)."""
    since = timezone.now() - dt.timedelta(days=1)

    def last_success(**which: Any) -> Subquery:
        return Subquery(Run.objects.filter(table=OuterRef("table_id"), state=Run.State.SUCCEEDED, **which)
                        .order_by("-queued_at").values("queued_at")[:1])

    rows = (Run.objects.filter(table__in=tables.order_by().values("pk"), state=Run.State.FAILED, queued_at__gte=since)
            .annotate(redone_at=last_success(kind=OuterRef("kind")), repaired_at=last_success(kind=Run.Kind.RECOVER))
            .filter(Q(redone_at__isnull=True) | Q(queued_at__gt=F("redone_at")))
            .filter(Q(repaired_at__isnull=True) | Q(queued_at__gt=F("repaired_at")))
            .values("table_id").annotate(n=Count("id")).order_by())
    return {row["table_id"]: row["n"] for row in rows}


def statuses(tables: QuerySet[RegisteredTable]) -> list[TableStatus]:
    samples, runs, failed = latest_samples(tables), latest_runs(tables), failed_last_day(tables)
    return [TableStatus({f: t[f] for f in TABLE_FIELDS}, samples.get(t["id"]), runs.get(t["id"]), failed.get(t["id"], 0),
                        t["sampling__error"] or "")
            for t in tables.values(*TABLE_FIELDS, "sampling__error")]
