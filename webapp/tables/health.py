"""A table's health at a glance: the worst of what its latest sample and its recent runs say.

Each signal has a warning and a critical bound (module constants, the defaults an on-call operator would
start with): the backlog age (how long the oldest uncompacted log has waited, wall clock), the age of the
oldest pending plan, log files per file slice (read amplification of the snapshot), failed runs in the last
day, corrupt blocks, the freshness SLA and late data. The level is
"critical", "warning", "ok" or "unknown" (never sampled), with the reasons that made it so.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

LEVELS = ("critical", "warning", "unknown", "ok")     # worst first: the sort order of "worst first"
PENDING_PLAN_AGE_S = (15 * 60, 60 * 60)               # (warning, critical)
BACKLOG_AGE_S = (6 * 3600, 24 * 3600)                 # data waiting in logs since a write this long ago
LOGS_PER_SLICE = (8, 32)
FAILED_RUNS_PER_DAY = (1, 3)
STALE_AGE_S = (6 * 3600, 24 * 3600)                   # no write for this long: ingestion may have stopped


@dataclass
class Health:
    level: str = "ok"
    reasons: list[str] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return LEVELS.index(self.level)

    def flag(self, level: str, reason: str) -> None:
        self.reasons.append(reason)
        if LEVELS.index(level) < self.rank:
            self.level = level


def _instant_time(instant: str) -> dt.datetime | None:
    if not instant or not instant.isdigit() or len(instant) not in (14, 17):
        return None
    return dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.0f} h" if seconds < 3 * 86400 else f"{seconds / 86400:.0f} d"


def staleness(seconds: float | None) -> str:
    """"critical", "warning", "ok" or "unknown" (no write known) for this long since the last write."""
    if seconds is None:
        return "unknown"
    return "critical" if seconds >= STALE_AGE_S[1] else "warning" if seconds >= STALE_AGE_S[0] else "ok"


def _bounded(health: Health, value: float, bounds: tuple[float, float], reason: str) -> None:
    if value >= bounds[1]:
        health.flag("critical", reason)
    elif value >= bounds[0]:
        health.flag("warning", reason)


def assess(sample: dict[str, Any] | None, sla: str, failed_last_day: int, now: dt.datetime,
           sampling_error: str = "", last_write_at: dt.datetime | None = None) -> Health:
    """The health of one table from its latest sample (a dict of MetricSample fields), its SLA status, the
    number of its runs that failed in the last 24 hours, and why its latest sampling failed ("" when it did
    not): a table that can no longer be read (deleted, its credentials gone) is critical, whatever its last
    good sample said."""
    health = Health()
    if sampling_error:
        health.flag("critical", f"the table cannot be read: {sampling_error.splitlines()[0][:200]}")
    if sample is None:
        if sampling_error:
            return health
        return Health("unknown", ["not sampled yet"])
    if sample.get("corrupt_log_blocks"):
        health.flag("critical", f"{sample['corrupt_log_blocks']} corrupt log blocks")
    if sla == "breached":
        health.flag("critical", "freshness SLA breached")
    pending_since = _instant_time(sample.get("earliest_pending_compaction") or "")
    if pending_since is not None:
        age = (now - pending_since).total_seconds()
        _bounded(health, age, PENDING_PLAN_AGE_S, f"a compaction plan pending for {age / 60:.0f} min")
    waiting_since = _instant_time(sample.get("oldest_log_instant") or "")
    if waiting_since is not None:
        age = (now - waiting_since).total_seconds()
        _bounded(health, age, BACKLOG_AGE_S, f"oldest uncompacted log written {_hours(age)} ago")
    slices = sample.get("file_slices_with_logs") or 0
    if slices:
        per_slice = (sample.get("remaining_log_files") or 0) / slices
        _bounded(health, per_slice, LOGS_PER_SLICE, f"{per_slice:.1f} log files per slice")
    _bounded(health, failed_last_day, FAILED_RUNS_PER_DAY, f"{failed_last_day} failed runs in the last day")
    if sample.get("late_records"):
        health.flag("warning", f"late data: {sample['late_records']} records")
    if last_write_at is not None:   # against the clock: a stopped ingestion changes no other signal
        age = (now - last_write_at).total_seconds()
        _bounded(health, age, STALE_AGE_S, f"no write for {_hours(age)}")
    return health
