"""Sampling at scale: a cheap change check for every table, a full sample only for those that changed.

Beat's periodic task fans the registered tables out in chunks onto the sampling queue (webapp.dispatch), so
several sampling workers share a cycle and no sample waits behind a compaction run. For each table of a
chunk the worker asks the engine for the table's timeline mark (one listing of `.hoodie/`,
engine.observe.changes) and compares it with the mark stored on the table's SamplingState:

- the mark moved (a commit, compaction, clean, rollback, a new plan …) → full sample (tasks.sampling);
- the mark is the same but the last sample is older than the floor interval
  (`TIDEMARK_SAMPLE_FLOOR_SECONDS`, default 3600) → full sample anyway, so nothing that escapes the mark
  (a table replaced under the same path) stays unseen for long; when it reads exactly what the latest
  sample says, no new row is stored (the history holds changes; SamplingState.sampled_at moves);
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
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from engine import Table, env
from tasks import location as locations
from tasks import sampling
from tasks.periodic import check_sla
from webapp.tables.models import MetricSample, RegisteredTable, SamplingState

log = logging.getLogger(__name__)


def floor_interval() -> dt.timedelta:
    """How long an unchanged table may go without a full sample."""
    return dt.timedelta(seconds=env.whole("TIDEMARK_SAMPLE_FLOOR_SECONDS", 3600, unit="seconds"))


@dataclass
class CycleReport:
    """What one pass over a set of tables did."""

    checked: int = 0
    changed: int = 0
    floor: int = 0
    sampled: int = 0
    confirmed: int = 0      # floor samples identical to the latest: not stored again
    skipped: int = 0
    failed: int = 0
    check_seconds: float = 0.0
    sample_seconds: float = 0.0
    triggered: list[int] = field(default_factory=list)

    def add(self, other: CycleReport) -> None:
        for name in ("checked", "changed", "floor", "sampled", "confirmed", "skipped", "failed", "check_seconds",
                     "sample_seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.triggered.extend(other.triggered)


def sample_tables(table_ids: Iterable[int], now: dt.datetime | None = None) -> CycleReport:
    """Check every table of `table_ids`, fully sample the changed and the floor-due ones, act on SLAs."""
    now = now or timezone.now()
    ids = list(table_ids)
    _ensure_states(ids)
    tables = (RegisteredTable.objects.filter(pk__in=ids).order_by("pk")
              .select_related("sampling", "sampling__latest_sample"))
    report, book = CycleReport(), Bookkeeping(now)
    floor = floor_interval()
    for table in tables:
        outcome = _visit(table, table.sampling, now, floor, report, book)
        # An unchanged table still breaches its SLA as time passes: judge every table on its latest sample
        # (a database read), not only the ones sampled in this cycle.
        sample = outcome[0] if outcome is not None else table.sampling.latest_sample
        if sample is not None:
            run = check_sla(table, sample)
            if run is not None:
                report.triggered.append(run.pk)
    book.save()
    return report


def _ensure_states(ids: list[int]) -> None:
    existing = set(SamplingState.objects.filter(table_id__in=ids).values_list("table_id", flat=True))
    missing = [SamplingState(table_id=i) for i in ids if i not in existing]
    if missing:
        SamplingState.objects.bulk_create(missing, ignore_conflicts=True)


class Bookkeeping:
    """The chunk's SamplingState updates, written in one transaction at the end: the skipped tables (nearly
    all of them) in one UPDATE, each sampled or failed table in one of its own. Counters are F-expressions,
    so concurrent samplers add up. A skipped table is charged the mean check time of the chunk's skipped
    tables (the totals stay exact; per-table check time is not worth an UPDATE per table)."""

    def __init__(self, now: dt.datetime) -> None:
        self.now = now
        self.skipped: list[int] = []
        self.skipped_seconds = 0.0
        self.others: list[tuple[int, dict[str, Any]]] = []

    def skip(self, table_id: int, check_s: float) -> None:
        self.skipped.append(table_id)
        self.skipped_seconds += check_s

    def update(self, table_id: int, check_s: float, **fields: Any) -> None:
        self.others.append((table_id, {"checked_at": self.now, "checks": F("checks") + 1,
                                       "check_seconds": F("check_seconds") + check_s, **fields}))

    def save(self) -> None:
        with transaction.atomic():
            if self.skipped:
                mean = self.skipped_seconds / len(self.skipped)
                for i in range(0, len(self.skipped), 500):
                    SamplingState.objects.filter(table_id__in=self.skipped[i:i + 500]).update(
                        checked_at=self.now, checks=F("checks") + 1, skips=F("skips") + 1,
                        check_seconds=F("check_seconds") + mean, error="")   # the table reads again
            for table_id, fields in self.others:
                SamplingState.objects.filter(table_id=table_id).update(**fields)


def _visit(table: RegisteredTable, state: SamplingState, now: dt.datetime, floor: dt.timedelta,
           report: CycleReport, book: Bookkeeping) -> tuple[MetricSample | None, MetricSample | None] | None:
    """One table: check, then sample or skip, noted in `book`; returns (new sample, previous sample) when a
    sample was taken (the previous one twice when a floor sample confirmed it)."""
    started = time.perf_counter()
    report.checked += 1
    try:
        mark = Table.mark(locations.checked(table.path))  # the allow-list holds for checks too
    except Exception as exc:   # gone, unreadable, permissions: counted and shown, never fatal to the cycle
        check_s = time.perf_counter() - started
        report.failed += 1
        report.check_seconds += check_s
        book.update(table.pk, check_s, failures=F("failures") + 1,
                    error=f"change check failed: {type(exc).__name__}: {exc}")
        return None
    check_s = time.perf_counter() - started
    report.check_seconds += check_s
    changed = mark.digest != state.mark
    floor_due = state.sampled_at is None or now - state.sampled_at >= floor or state.latest_sample_id is None
    if not (changed or floor_due):
        report.skipped += 1
        book.skip(table.pk, check_s)
        return None
    report.changed += changed
    report.floor += not changed
    seen = {"changed_at": now} if changed else {}
    previous = state.latest_sample
    started = time.perf_counter()
    try:
        _, fields = sampling.read(table, mark)
    except Exception as exc:
        sample_s = time.perf_counter() - started
        log.exception("could not sample metrics of table %s", table.name)
        report.failed += 1
        report.sample_seconds += sample_s
        book.update(table.pk, check_s, **seen, failures=F("failures") + 1,
                    sample_seconds=F("sample_seconds") + sample_s,
                    error=f"full sample failed: {type(exc).__name__}: {exc}")
        return None
    sample_s = time.perf_counter() - started
    report.sampled += 1
    report.sample_seconds += sample_s
    done = {**seen, "samples": F("samples") + 1, "sample_seconds": F("sample_seconds") + sample_s,
            "last_sample_seconds": sample_s, "mark": mark.digest, "newest_instant": mark.newest_instant or "",
            "error": "", "sampled_at": now}
    if not changed and sampling.same_as(previous, fields):
        # A floor sample that says nothing new is not stored again: the history holds changes, and
        # SamplingState.sampled_at says when the numbers were last confirmed.
        report.confirmed += 1
        book.update(table.pk, check_s, **done)
        return previous, previous
    sample = sampling.store(table, mark, fields)
    book.update(table.pk, check_s, **{**done, "sampled_at": sample.taken_at})
    return sample, previous
