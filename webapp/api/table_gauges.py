"""The per-table gauges of `/metrics`, written straight as Prometheus text from one query.

At 10,000 tables these are ~80,000 samples; building them as prometheus_client metric objects and letting
it format them took ~4 s on this machine type, writing the lines directly takes a small fraction of that.
Same names, help, types, labels and values as before (the exposition format is the text format 0.0.4).
"""
from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

from django.db.models import BooleanField, Case, F, Value, When

from webapp.tables.models import RegisteredTable


def _TIMESTAMP(v: dt.datetime | None) -> float | None:
    return v.timestamp() if v is not None else None


def _SECONDS(v: Any) -> float | None:
    """A datetime column as the driver returns it unconverted: a datetime (PostgreSQL) or, on SQLite, the
    stored UTC text "YYYY-MM-DD HH:MM:SS[.ffffff]"."""
    if v is None:
        return None
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v)
    if v.tzinfo is None:
        v = v.replace(tzinfo=dt.UTC)
    seconds: float = v.timestamp()
    return seconds


def _raw(rows: Any) -> Any:
    """The query's rows straight from the database cursor, without Django's per-value converters (at 10,000
    tables a scrape spent more time converting values than the query took); `_SECONDS` reads the datetimes."""
    from django.db import connections

    sql, params = rows.query.sql_with_params()
    with connections[rows.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


GAUGES: dict[str, tuple[str, str, Callable[[Any], float | None]]] = {
    "tidemark_ro_completion_timestamp_seconds": (
        "Event time before which the RO table is complete (Unix seconds).", "completion", _TIMESTAMP),
    "tidemark_remaining_log_files": ("Log files not yet compacted into base files.", "log_files", float),
    "tidemark_remaining_log_bytes": ("Bytes in log files not yet compacted.", "log_bytes", float),
    "tidemark_file_slices_with_logs": ("File slices that still have log files.", "slices", float),
    "tidemark_pending_compactions": ("Compaction plans requested or inflight on the timeline.",
                                     "pending_compactions", float),
    "tidemark_freshness_sla_breached": ("1 when the RO freshness lag exceeds the table's SLA.", "breached",
                                        lambda v: 1.0 if v else 0.0),
    "tidemark_corrupt_log_blocks": ("Corrupt log blocks of committed instants (their records are missing from "
                                    "reads).", "corrupt_log_blocks", float),
}
# Hudi's earliestInflightCompactionInstant / latestCompletedCompactionInstant, read off the latest sample
INSTANTS: dict[str, tuple[str, str]] = {
    "tidemark_earliest_inflight_compaction_timestamp_seconds": (
        "Instant time of the oldest pending (requested or inflight) compaction (Unix seconds; Hudi's "
        "earliestInflightCompactionInstant).", "earliest_pending_compaction"),
    "tidemark_latest_completed_compaction_timestamp_seconds": (
        "Instant time of the newest completed compaction (Unix seconds; Hudi's latestCompletedCompactionInstant).",
        "latest_completed_compaction"),
}
DURATION = ("tidemark_sample_duration_seconds", "Duration of the table's last full sample.")


def instant_seconds(instant: str) -> float | None:
    """A Hudi instant time (yyyyMMddHHmmss[SSS], UTC) as Unix seconds; None for "" or a malformed one."""
    if not instant.isdigit() or len(instant) not in (14, 17):
        return None
    when = dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
    return when.timestamp() + (int(instant[14:]) / 1000 if len(instant) == 17 else 0)


_EXACT = 10**15   # integers below this print as repr(float(n)) == f"{n}.0"


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float) -> str:
    if type(value) is int and -_EXACT < value < _EXACT:   # most gauges: counts from the database
        return f"{value}.0"   # what repr(float(value)) gives for them, without the float round trip
    if value == value and value not in (math.inf, -math.inf):   # the common case first: a finite number
        return repr(float(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render() -> str:
    """Every per-table gauge family, from each table's latest sample and sampling state (the compaction
    instants through the one join to the latest sample, by primary key)."""
    fields = [source for _, source, _ in GAUGES.values()]
    # the latest sample's keys as copied onto SamplingState (webapp.tables.latest): narrow rows, no join
    # to the samples; "breached" is the list page's rule (lag over the table's SLA as it is now)
    breached = Case(When(freshness_sla_minutes__isnull=False,
                         sampling__lag_seconds__gt=F("freshness_sla_minutes") * 60, then=Value(True)),
                    default=Value(False), output_field=BooleanField())
    rows = (RegisteredTable.objects.filter(sampling__latest_sample__isnull=False).annotate(breached=breached)
            .values_list("name", "sampling__last_sample_seconds",
                         *(f"sampling__latest_sample__{source}" for _, source in INSTANTS.values()),
                         *(f if f == "breached" else f"sampling__{f}" for f in fields)).order_by("name"))
    names = list(GAUGES)
    converters = [_SECONDS if fn is _TIMESTAMP else fn for _, _, fn in GAUGES.values()]
    rows = _raw(rows)
    # Column by column: one tight comprehension per family instead of a Python loop body per value.
    columns = list(zip(*rows)) or [()] * (4 + len(names))
    labels = [f'{{table="{_label(name)}"}} ' for name in columns[0]]

    def family_lines(family: str, values: Any) -> list[str]:
        return [f"{family}{label}{_number(v)}" for label, v in zip(labels, values) if v is not None]

    durations = family_lines(DURATION[0], columns[1])
    instants = [family_lines(family, [instant_seconds(v or "") for v in column])
                for family, column in zip(INSTANTS, columns[2:4])]
    lines = [family_lines(family, map(fn, column)) for family, fn, column in zip(names, converters, columns[4:])]
    text: list[str] = []
    for family, out in zip(names, lines):
        text += [f"# HELP {family} {_escape_help(GAUGES[family][0])}", f"# TYPE {family} gauge", *out]
    for family, out in zip(INSTANTS, instants):
        text += [f"# HELP {family} {_escape_help(INSTANTS[family][0])}", f"# TYPE {family} gauge", *out]
    text += [f"# HELP {DURATION[0]} {DURATION[1]}", f"# TYPE {DURATION[0]} gauge", *durations]
    return "\n".join(text) + "\n"
