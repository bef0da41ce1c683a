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
RUN_FIELDS = ("id", "table_id", "kind", "state", "refusal_reason", "finished_at")
# The runs that compact (the list's "last compaction": a clean or a metrics refresh since says nothing of it)
COMPACTION_KINDS = (Run.Kind.SCHEDULE, Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE)


@dataclass
class TableStatus:
    table: dict[str, Any]
    sample: dict[str, Any] | None
    last_run: dict[str, Any] | None
    failed_last_day: int = 0
    sampling_error: str = ""   # why the table's latest change check or sample failed ("" when it did not)
    last_compaction: dict[str, Any] | None = None
    last_write_at: dt.datetime | None = None   # the newest write's completion, as the latest sample read it

    @property
    def health(self) -> Health:
        return assess(self.sample, self.sla, self.failed_last_day, timezone.now(), self.sampling_error,
                      last_write_at=self.last_write_at)

    @property
    def stale_seconds(self) -> float | None:
        """How long, against the clock, since the table's last write (None: no write known)."""
        return None if self.last_write_at is None else max(0.0, (timezone.now() - self.last_write_at).total_seconds())

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


def latest_runs(tables: QuerySet[RegisteredTable], kinds: tuple[str, ...] | None = None) -> dict[int, dict[str, Any]]:
    """The newest run (other than metrics refreshes; only of `kinds` when given) of each of `tables`, in one query."""
    runs = Run.objects.filter(table=OuterRef("pk")).exclude(kind=Run.Kind.METRICS)
    if kinds is not None:
        runs = runs.filter(kind__in=kinds)
    newest = runs.order_by("-queued_at", "-id").values("id")[:1]
    ids = tables.order_by().annotate(run_id=Subquery(newest)).values("run_id")
    return {row["table_id"]: row for row in Run.objects.filter(id__in=ids).values(*RUN_FIELDS)}


def newest_runs(tables: QuerySet[RegisteredTable]) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """`latest_runs` and the newest compaction run of each of `tables`, in one query for both: of the (at
    most two) runs fetched per table, the newest is its last run, the newest compaction its last compaction."""
    def newest(kinds: tuple[str, ...] | None) -> Subquery:
        runs = Run.objects.filter(table=OuterRef("pk")).exclude(kind=Run.Kind.METRICS)
        return Subquery((runs.filter(kind__in=kinds) if kinds else runs).order_by("-queued_at", "-id").values("id")[:1])

    picked = tables.order_by()
    wanted = Q(id__in=picked.annotate(i=newest(None)).values("i")) | Q(id__in=picked.annotate(i=newest(COMPACTION_KINDS)).values("i"))
    last: dict[int, dict[str, Any]] = {}
    compaction: dict[int, dict[str, Any]] = {}
    for run in Run.objects.filter(wanted).order_by("queued_at", "id").values(*RUN_FIELDS):   # oldest first: newest wins
        last[run["table_id"]] = run
        if run["kind"] in COMPACTION_KINDS:
            compaction[run["table_id"]] = run
    return last, compaction


def written_at(value: Any) -> dt.datetime | None:
    """A sample's `activity.ingestion.last_write_at` (ISO text) as a datetime, for staleness against the clock."""
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None


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
