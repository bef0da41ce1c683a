"""The per-table gauges of `/metrics`, written straight as Prometheus text from one query.

At 10,000 tables these are ~80,000 samples; building them as prometheus_client metric objects and letting
it format them took ~4 s on this machine type, writing the lines directly takes a small fraction of that.
Same names, help, types, labels and values as before (the exposition format is the text format 0.0.4).
"""
from __future__ import annotations

import datetime as dt
import math
from typing import Any, Callable

from django.db.models import BooleanField, Case, F, Value, When

from webapp.tables.models import RegisteredTable

GAUGES: dict[str, tuple[str, str, Callable[[Any], float | None]]] = {
    "tidemark_ro_completion_timestamp_seconds": (
        "Event time before which the RO table is complete (Unix seconds).", "completion",
        lambda v: v.timestamp() if v is not None else None),
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
    when = dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.timezone.utc)
    return when.timestamp() + (int(instant[14:]) / 1000 if len(instant) == 17 else 0)


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float) -> str:
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
    converters = [fn for _, _, fn in GAUGES.values()]
    lines: list[list[str]] = [[] for _ in names]
    durations: list[str] = []
    instants: list[list[str]] = [[] for _ in INSTANTS]
    for name, duration, earliest_pending, latest_completed, *values in rows:
        label = f'{{table="{_label(name)}"}} '
        for family, instant, out in zip(INSTANTS, (earliest_pending, latest_completed), instants):
            seconds = instant_seconds(instant or "")
            if seconds is not None:
                out.append(f"{family}{label}{_number(seconds)}")
        for family, fn, raw, out in zip(names, converters, values, lines):
            value = fn(raw)
            if value is not None:
                out.append(f"{family}{label}{_number(value)}")
        if duration is not None:
            durations.append(f"{DURATION[0]}{label}{_number(duration)}")
    text: list[str] = []
    for family, out in zip(names, lines):
        text += [f"# HELP {family} {_escape_help(GAUGES[family][0])}", f"# TYPE {family} gauge", *out]
    for family, out in zip(INSTANTS, instants):
        text += [f"# HELP {family} {_escape_help(INSTANTS[family][0])}", f"# TYPE {family} gauge", *out]
    text += [f"# HELP {DURATION[0]} {DURATION[1]}", f"# TYPE {DURATION[0]} gauge", *durations]
    return "\n".join(text) + "\n"
