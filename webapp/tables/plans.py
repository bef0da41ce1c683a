"""Compactions of a table as the control plane shows them: the plan still pending on the table's timeline
(as the engine reported it in the newest sample, whoever scheduled it: a run, the CLI or another writer),
which an operator can execute or roll back, and the newest completed one, which the engine can also roll
back while no later instant depends on it."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from webapp.tables.models import MetricSample, RegisteredTable, Run

PLANNING = (Run.Kind.SCHEDULE, Run.Kind.SCHEDULE_EXECUTE)


@dataclass(frozen=True)
class PendingPlan:
    """The pending compaction on the timeline; `run` is the run that planned it (None: planned elsewhere),
    and the threshold and file groups are known from that run's recorded plan only."""

    instant: str
    run: Run | None

    @property
    def threshold(self) -> dt.datetime | str | None:
        return (self.run.plan or {}).get("threshold") if self.run is not None else None

    @property
    def file_groups(self) -> int | None:
        return len((self.run.plan or {}).get("operations") or []) if self.run is not None else None


def pending_plan(table: RegisteredTable) -> PendingPlan | None:
    """The compaction pending on the table's timeline as of its newest sample (the serial trigger allows one
    at a time; the worker samples the table with every run's outcome, the change check after outside writers)."""
    sample = MetricSample.objects.filter(sampling_latest__table=table).first()
    instant = sample.earliest_pending_compaction if sample is not None else ""
    if not instant:
        return None
    run = (table.runs.filter(kind__in=PLANNING, instant=instant).exclude(plan__isnull=True)
           .order_by("-queued_at", "-id").first())
    return PendingPlan(instant, run)


def rollback_candidate(table: RegisteredTable, pending: PendingPlan | None) -> str:
    """The instant the Roll back form offers first: the pending plan, else the newest completed compaction
    not rolled back yet ("" when there is none). The engine still checks that nothing depends on it."""
    if pending is not None:
        return pending.instant
    done = (table.runs.filter(kind__in=(Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE), state=Run.State.SUCCEEDED)
            .exclude(instant="").order_by("-finished_at", "-id").first())
    if done is None or table.runs.filter(kind=Run.Kind.ROLLBACK, instant=done.instant,
                                         state=Run.State.SUCCEEDED).exists():
        return ""
    return done.instant
