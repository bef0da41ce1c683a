"""The tables list at scale: search, status filters, sorting and keyset pagination, all in the database.

Each table's newest sample's sort and filter keys sit on its SamplingState row (kept by webapp.tables.latest
with the pointer to the sample), so a page of the list is one query on narrow rows whatever the number of
tables, plus the page's own samples and runs: filter and sort on those keys,
then take the rows after the cursor (keyset pagination — no OFFSET, so page 100 costs what page 1 does,
and a table registered meanwhile never shifts a page). The pages and GET /api/tables share this module.

Cursors are opaque to clients: the sort value and the (unique) name of the last row of a page, base64url
JSON. Missing values sort as the lowest value (an unsampled table first ascending, last descending),
as they always did on this page.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Count, F, Field, FloatField, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.expressions import Combinable
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from webapp.tables import health
from webapp.tables.filters import filter_tables
from webapp.tables.inputs import InvalidInput, parse_table_version
from webapp.tables.models import MetricSample, RegisteredTable, Run
from webapp.tables.overview import SAMPLE_FIELDS, TABLE_FIELDS, TableStatus, failed_last_day, newest_runs, written_at

KEY = "sampling__"   # the latest sample's sort/filter keys, copied onto SamplingState (webapp.tables.latest)
NEVER = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
ACTIVE = (Run.State.QUEUED, Run.State.RUNNING)


def _number(field: str, output: Field[Any, Any]) -> Coalesce:
    return Coalesce(F(f"{KEY}{field}"), Value(-1), output_field=output)


def _sla_rank() -> Case:
    """breached, unknown, ok, none — the order of SLA urgency."""
    return Case(When(freshness_sla_minutes__isnull=True, then=Value(3)),
                When(**{f"{KEY}lag_seconds__isnull": True}, then=Value(1)),
                When(breached(), then=Value(0)), default=Value(2), output_field=IntegerField())


SORTS: dict[str, Callable[[], Combinable]] = {
    "name": lambda: F("name"),
    "completion": lambda: Coalesce(F(f"{KEY}completion"), Value(NEVER)),
    "lag": lambda: _number("lag_seconds", FloatField()),
    "files": lambda: _number("log_files", IntegerField()),
    "bytes": lambda: _number("log_bytes", IntegerField()),
    "slices": lambda: _number("slices", IntegerField()),
    "sla": _sla_rank,
    "health": lambda: F("health_rank"),   # worst first ascending (annotated by with_health)
}


def breached() -> Q:
    """The newest sample's lag exceeds the table's SLA (computed, so an edited SLA applies at once)."""
    return Q(freshness_sla_minutes__isnull=False) & Q(**{f"{KEY}lag_seconds__gt": F("freshness_sla_minutes") * 60})


def _last_run_state() -> Subquery:
    """The state of the table's newest run other than a metrics refresh (uses the (table, -queued_at) index)."""
    return Subquery(Run.objects.filter(table=OuterRef("pk")).exclude(kind=Run.Kind.METRICS)
                    .order_by("-queued_at", "-id").values("state")[:1])


STATUSES: dict[str, Callable[[], Q]] = {
    "breached": breached,
    "late": lambda: Q(**{f"{KEY}late_records__gt": 0}),
    "backlog": lambda: Q(**{f"{KEY}log_files__gt": 0}),
    "pending": lambda: Q(**{f"{KEY}pending_compactions__gt": 0}),
    # its newest run failed, or its change check / sample fails (storage unreadable, table gone);
    # `last_run_state` is annotated by `select` for this filter only
    "failing": lambda: Q(last_run_state=Run.State.FAILED) | Q(sampling__error__gt=""),
    # critical or warning (webapp.tables.health); `health_rank` is annotated by with_health
    "unhealthy": lambda: Q(health_rank__lte=health.LEVELS.index("warning")),
}


def _instant_before(seconds: float) -> str:
    """The greatest Hudi instant at least `seconds` old (instants compare as strings; millis padded)."""
    return (timezone.now() - dt.timedelta(seconds=seconds)).strftime("%Y%m%d%H%M%S") + "999"


def with_health(tables: QuerySet[RegisteredTable]) -> QuerySet[RegisteredTable]:
    """`tables` annotated with `health_rank`: webapp.tables.health.assess as one SQL expression (the index of
    its level in health.LEVELS, worst first), so "worst first" sorts and "unhealthy" filters in the database."""
    if "health_rank" in tables.query.annotations:
        return tables
    since = timezone.now() - dt.timedelta(days=1)
    failed = (Run.objects.filter(table=OuterRef("pk"), state=Run.State.FAILED, queued_at__gte=since)
              .order_by().values("table").annotate(n=Count("id")).values("n")[:1])
    pending = f"{KEY}latest_sample__earliest_pending_compaction"

    def pending_for(seconds: float) -> Q:
        return Q(**{f"{pending}__gt": "", f"{pending}__lte": _instant_before(seconds)})

    waiting = f"{KEY}latest_sample__oldest_log_instant"

    def backlog_for(seconds: float) -> Q:
        return Q(**{f"{waiting}__gt": "", f"{waiting}__lte": _instant_before(seconds)})

    def logs_per_slice(bound: float) -> Q:
        return Q(**{f"{KEY}slices__gt": 0, f"{KEY}log_files__gte": F(f"{KEY}slices") * bound})

    wrote = f"{KEY}latest_sample__activity__ingestion__last_write_at"

    def stale_for(seconds: float) -> Q:
        # the engine's ISO times ("…T12:00:00.000Z") sort as strings, as instants do
        cutoff = (timezone.now() - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.999Z")
        return Q(**{f"{wrote}__isnull": False, f"{wrote}__lte": cutoff})

    warn, crit = (Q(failed_day__gte=health.FAILED_RUNS_PER_DAY[i]) | pending_for(health.PENDING_PLAN_AGE_S[i])
                  | backlog_for(health.BACKLOG_AGE_S[i]) | logs_per_slice(health.LOGS_PER_SLICE[i])
                  | stale_for(health.STALE_AGE_S[i]) for i in (0, 1))
    crit |= Q(**{f"{KEY}corrupt_log_blocks__gt": 0}) | breached()
    warn |= Q(**{f"{KEY}late_records__gt": 0})
    rank = health.LEVELS.index
    return tables.annotate(failed_day=Coalesce(Subquery(failed), Value(0))).annotate(health_rank=Case(
        When(**{f"{KEY}latest_sample__isnull": True}, then=Value(rank("unknown"))),
        When(crit, then=Value(rank("critical"))), When(warn, then=Value(rank("warning"))),
        default=Value(rank("ok")), output_field=IntegerField()))


@dataclass
class ListPage:
    rows: list[TableStatus]
    next_cursor: str | None
    prev_cursor: str | None
    sort: str
    status: str


def select(params: Mapping[str, str]) -> QuerySet[RegisteredTable]:
    """The tables matching ?q=, ?status= (unknown status: InvalidInput naming the known ones) and ?version=
    (the Hudi table version the newest sample read)."""
    tables = filter_tables(RegisteredTable.objects.all(), params)
    version = parse_table_version(params.get("version"))
    if version is not None:
        tables = tables.filter(**{f"{KEY}table_version": version})
    status = params.get("status") or ""
    if status:
        if status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        if status == "failing":
            tables = tables.annotate(last_run_state=_last_run_state())
        if status == "unhealthy":
            tables = with_health(tables)
        tables = tables.filter(STATUSES[status]())
    return tables


def table_versions() -> list[int]:
    """The Hudi table versions the engine reads and writes, which the list's version filter offers."""
    from engine import SUPPORTED_TABLE_VERSIONS

    return sorted(SUPPORTED_TABLE_VERSIONS)


def summary(tables: QuerySet[RegisteredTable]) -> dict[str, int]:
    """Counts for the tiles, in one aggregate query. Tables with runs in flight are matched against the few
    active runs, selected once (the state index), not by probing every table's runs with a correlated EXISTS
    (at 10,000 tables that probe was most of the query)."""
    running = Run.objects.filter(state__in=ACTIVE).order_by().values("table_id")
    return tables.order_by().aggregate(
        tables=Count("pk"), breached=Count("pk", filter=breached()),
        late=Count("pk", filter=Q(**{f"{KEY}late_records__gt": 0})),
        running=Count("pk", filter=Q(pk__in=running)))


def page(params: Mapping[str, str], limit: int) -> ListPage:
    """One page of the list for ?q= &status= &sort=[-]key &after= | &before= (cursors from earlier pages)."""
    status = params.get("status") or ""
    sort = params.get("sort") or ("health" if status == "unhealthy" else "name")
    key = sort.lstrip("-")
    if key not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)} (prefix - for descending), got {sort!r}")
    descending = sort.startswith("-")
    tables = select(params)
    if key == "health":
        tables = with_health(tables)
    tables = tables.annotate(sort_key=SORTS[key]())
    after, before = params.get("after"), params.get("before")
    if after and before:
        raise InvalidInput("give either after or before, not both")
    backwards = bool(before)
    given = before or after
    cursor = decode_cursor(given, key) if given else None
    # Walking backwards is walking forwards in the opposite order, then reversing the page.
    forward_desc = descending != backwards
    if cursor is not None:
        tables = tables.filter(_beyond(cursor, forward_desc))
    order = ["-sort_key", "-name"] if forward_desc else ["sort_key", "name"]
    rows = list(tables.order_by(*order).values(*TABLE_FIELDS, "sort_key", "sampling__latest_sample_id",
                                               "sampling__error")[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    if backwards:
        rows.reverse()
    has_next = more if not backwards else True
    has_prev = (more if backwards else cursor is not None) and bool(rows)
    statuses = _statuses(rows)
    return ListPage(statuses,
                    next_cursor=encode_cursor(rows[-1]["sort_key"], rows[-1]["name"]) if rows and has_next else None,
                    prev_cursor=encode_cursor(rows[0]["sort_key"], rows[0]["name"]) if has_prev else None,
                    sort=sort, status=status)


def _beyond(cursor: tuple[Any, str], descending: bool) -> Q:
    value, name = cursor
    if descending:
        return Q(sort_key__lt=value) | Q(sort_key=value, name__lt=name)
    return Q(sort_key__gt=value) | Q(sort_key=value, name__gt=name)


def _statuses(rows: list[dict[str, Any]]) -> list[TableStatus]:
    """The page's tables with their latest samples and runs (two queries for the page's rows only)."""
    ids = [r["id"] for r in rows]
    runs, compactions = newest_runs(RegisteredTable.objects.filter(pk__in=ids)) if ids else ({}, {})
    failed = failed_last_day(RegisteredTable.objects.filter(pk__in=ids)) if ids else {}
    sample_ids = [r["sampling__latest_sample_id"] for r in rows if r["sampling__latest_sample_id"] is not None]
    samples = {s["id"]: s for s in MetricSample.objects.filter(id__in=sample_ids)
               .values(*SAMPLE_FIELDS, last_write_at=KT("activity__ingestion__last_write_at"))}
    return [TableStatus({f: row[f] for f in TABLE_FIELDS}, samples.get(row["sampling__latest_sample_id"]),
                        runs.get(row["id"]), failed.get(row["id"], 0), row["sampling__error"] or "",
                        last_compaction=compactions.get(row["id"]),
                        last_write_at=written_at((samples.get(row["sampling__latest_sample_id"]) or {}).get("last_write_at")))
            for row in rows]


def encode_cursor(value: Any, name: str) -> str:
    raw = value.isoformat() if isinstance(value, dt.datetime) else value
    text = json.dumps([raw, name], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, key: str) -> tuple[Any, str]:
    """The (sort value, name) of a cursor made for sort `key`; InvalidInput for anything else."""
    try:
        raw, name = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(name, str):
            raise ValueError("name is not a string")
        if key == "completion":
            return dt.datetime.fromisoformat(raw), name
        if key == "name":
            if not isinstance(raw, str):
                raise ValueError("value is not a name")
            return raw, name
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ValueError("value is not a number")
        return raw, name
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as exc:   # RecursionError: [[[[… nested
        raise InvalidInput(f"invalid page cursor {cursor[:40]!r} for sort {key!r} ({type(exc).__name__}); "
                           "start again from the first page") from None
