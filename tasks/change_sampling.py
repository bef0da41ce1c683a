"""Sampling at scale: a cheap change check for every table, a full sample only for those that changed.

Beat's periodic task fans the registered tables out in chunks onto the sampling queue (tasks.queues), so
several sampling workers share a cycle and no sample waits behind a compaction run. For each table of a
chunk the worker asks the engine for the table's timeline mark (one listing of `.hoodie/`,
engine.observe.changes) and compares it with the mark stored on the table's SamplingState:

- the mark moved (a commit, compaction, clean, rollback, a new plan …) → full sample (tasks.sampling);
- the mark is the same but the last sample is older than the floor interval
  (`TIDEMARK_SAMPLE_FLOOR_SECONDS`, default 3600) → full sample anyway, so "sampled at" keeps moving and
  nothing that escapes the mark (a table moved under the same path) stays unseen for long;
- otherwise the full sample is skipped: only the check's time and counters are written.

A full sample stores the mark it was taken under (tasks.sampling.refresh), so a run's own sample makes
the next check a skip. A stale mark written by a concurrent check can only cause one extra sample, never
a missed change: marks are only ever written as observed *before* the sample or check that stores them.
Costs and outcomes (checks, samples, skips, failures, seconds spent) are counters on SamplingState,
exported by /metrics (webapp.api.sampling_metrics).
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Iterable

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from engine import Table
from tasks import sampling
from webapp.tables.models import RegisteredTable, SamplingState

log = logging.getLogger(__name__)


def _positive_env(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return value


def floor_interval() -> dt.timedelta:
    """How long an unchanged table may go without a full sample."""
    return dt.timedelta(seconds=_positive_env("TIDEMARK_SAMPLE_FLOOR_SECONDS", 3600))


def chunk_size() -> int:
    """Tables per sampling task: big enough that a task's bookkeeping is one transaction, small enough
    that a cycle spreads across the sampling workers."""
    return _positive_env("TIDEMARK_SAMPLE_CHUNK", 500)


@dataclass
class CycleReport:
    """What one pass over a set of tables did."""

    checked: int = 0
    changed: int = 0
    floor: int = 0
    sampled: int = 0
    skipped: int = 0
    failed: int = 0
    check_seconds: float = 0.0
    sample_seconds: float = 0.0
    triggered: list[int] = field(default_factory=list)

    def add(self, other: CycleReport) -> None:
        for name in ("checked", "changed", "floor", "sampled", "skipped", "failed", "check_seconds",
                     "sample_seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.triggered.extend(other.triggered)


def chunks(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def fan_out() -> int:
    """Queue one `sample_tables` task per chunk of registered tables on the sampling queue; returns chunks."""
    from tasks import queues
    from tasks.jobs import sample_tables

    ids = list(RegisteredTable.objects.order_by("pk").values_list("pk", flat=True))
    parts = chunks(ids, chunk_size())
    for part in parts:
        sample_tables.apply_async(args=[part], queue=queues.sampling_queue())
    return len(parts)


def sample_tables(table_ids: Iterable[int], now: dt.datetime | None = None) -> CycleReport:
    """Check every table of `table_ids`, fully sample the changed and the floor-due ones, act on SLAs."""
    from tasks.periodic import check_sla

    now = now or timezone.now()
    ids = list(table_ids)
    _ensure_states(ids)
    tables = (RegisteredTable.objects.filter(pk__in=ids).order_by("pk")
              .select_related("sampling", "sampling__latest_sample"))
    report, states = CycleReport(), []
    floor = floor_interval()
    for table in tables:
        state = table.sampling
        outcome = _visit(table, state, now, floor, report)
        states.append(state)
        if outcome is not None:
            sample, previous = outcome
            run = check_sla(table, sample, previous)
            if run is not None:
                report.triggered.append(run.pk)
    _save(states)
    return report


def _ensure_states(ids: list[int]) -> None:
    existing = set(SamplingState.objects.filter(table_id__in=ids).values_list("table_id", flat=True))
    missing = [SamplingState(table_id=i) for i in ids if i not in existing]
    if missing:
        SamplingState.objects.bulk_create(missing, ignore_conflicts=True)


def _visit(table: RegisteredTable, state: SamplingState, now: dt.datetime, floor: dt.timedelta,
           report: CycleReport):
    """One table: check, then sample or skip. Sets the state's counters (as F-expressions, so concurrent
    samplers add up); returns (new sample, previous sample) when a sample was taken."""
    started = time.perf_counter()
    state.checked_at = now
    state.checks = F("checks") + 1
    try:
        mark = Table.mark(table.path)
    except Exception as exc:   # gone, unreadable, permissions: counted and shown, never fatal to the cycle
        spent = time.perf_counter() - started
        report.checked += 1
        report.failed += 1
        report.check_seconds += spent
        state.check_seconds = F("check_seconds") + spent
        state.failures = F("failures") + 1
        state.error = f"change check failed: {type(exc).__name__}: {exc}"
        return None
    spent = time.perf_counter() - started
    report.checked += 1
    report.check_seconds += spent
    state.check_seconds = F("check_seconds") + spent
    changed = mark.digest != state.mark
    floor_due = state.sampled_at is None or now - state.sampled_at >= floor or state.latest_sample_id is None
    if changed:
        state.changed_at = now
        report.changed += 1
    if not (changed or floor_due):
        state.skips = F("skips") + 1
        report.skipped += 1
        return None
    if not changed:
        report.floor += 1
    previous = state.latest_sample
    started = time.perf_counter()
    sample = sampling.refresh_quietly(table, mark=mark)
    spent = time.perf_counter() - started
    report.sample_seconds += spent
    state.sample_seconds = F("sample_seconds") + spent
    if sample is None:
        report.failed += 1
        state.failures = F("failures") + 1
        state.error = "full sample failed (see the worker's log)"
        return None
    report.sampled += 1
    state.samples = F("samples") + 1
    state.last_sample_seconds = spent
    state.mark, state.newest_instant, state.error = mark.digest, mark.newest_instant or "", ""
    return sample, previous


SAVED_FIELDS = ["mark", "newest_instant", "checked_at", "changed_at", "checks", "samples", "skips", "failures",
                "check_seconds", "sample_seconds", "last_sample_seconds", "error"]


def _save(states: list[SamplingState]) -> None:
    """One transaction for the chunk's bookkeeping (one UPDATE per table would cost a commit each)."""
    with transaction.atomic():
        SamplingState.objects.bulk_update(states, SAVED_FIELDS, batch_size=250)
