"""What each run kind asks of the engine: one small function per kind, all through `engine.Table`.

Each takes the opened table, the Run row (its arguments), the lease (passed to the engine as its lock)
and the progress callback, and returns an `Outcome`: the instant it concerned, the plan and the result
as JSON (`.to_dict()`). They never touch the timeline themselves; refusals surface as `engine.Refused`.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine import Cancelled, CompactionPlan, Refused, Table, TableLock
from tasks.spark_session import warm_enabled
from webapp.tables.models import Run

Progress = Callable[[int, int, str], None]

# A trigger whose plan is empty is refused (nothing was written), like one blocked by a pending plan: the
# operator reads "refused: nothing_to_compact" and the reason, never a failure.
NOTHING_TO_COMPACT = "nothing_to_compact"


@dataclass
class Outcome:
    instant: str | None = None
    plan: dict[str, Any] | None = None
    result: dict[str, Any] | None = None


def _schedule_kwargs(run: Run) -> dict[str, Any]:
    """The run's trigger arguments: an explicit T wins, else the run's or the registered table's data
    latency; whatever is still unset is left to the table's own settings (the engine's defaults)."""
    latency = None if run.threshold else (run.data_latency or run.table.data_latency or None)
    return {"threshold": run.threshold, "data_latency": latency,
            "carry_over": run.carry_over or None, "exact": run.exact}


def _planned(plan: CompactionPlan) -> CompactionPlan:
    """The plan when one was written; a Refused(nothing_to_compact) naming the threshold otherwise."""
    if plan.instant is None:
        upto = plan.threshold.isoformat().replace("+00:00", "Z") if plan.threshold else "the threshold"
        raise Refused(NOTHING_TO_COMPACT, f"nothing to compact up to {upto}: no log file of the latest slices "
                                          "qualifies; no plan written")
    return plan


def schedule(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    plan = _planned(table.schedule_compaction(strategy="event_time", **_schedule_kwargs(run), lock=lock))
    return Outcome(instant=plan.instant, plan=plan.to_dict())


class CancelCheck:
    """`should_stop` for the engine: has an operator asked to cancel this run? (Read at most once a second:
    the engine polls it while file groups are written.)"""

    def __init__(self, run_id: int, every_s: float = 1.0) -> None:
        self.run_id, self.every_s = run_id, every_s
        self._last, self._answer = 0.0, False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self._answer and now - self._last >= self.every_s:
            self._last = now
            self._answer = Run.objects.filter(pk=self.run_id, cancel_requested=True).exists()
        return self._answer


def _placement() -> bool | None:
    """A worker that keeps a warm Spark session runs every compaction on it (waiting for it while it starts);
    one without (`TIDEMARK_WARM_SPARK=0`) leaves the choice to the engine: small plans in-process."""
    return False if warm_enabled() else None


def execute(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    result = table.run_compaction(run.instant or None, lock=lock, on_progress=progress,
                                  should_stop=CancelCheck(run.pk), local=_placement())
    plan = table.compaction(result.instant)
    return Outcome(instant=result.instant, plan=plan.to_dict(), result=_with_stats(table, result.to_dict()))


def schedule_execute(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    planned = schedule(table, run, lock, progress)  # Refused(nothing_to_compact) before anything is recorded
    # Recorded before executing, so the run shows its plan (and instant) while the compaction runs.
    Run.objects.filter(pk=run.pk).update(instant=planned.instant, plan=planned.plan)
    # A cancel asked while planning is honoured by the engine before the first file group starts.
    try:
        result = table.run_compaction(planned.instant, lock=lock, on_progress=progress,
                                      should_stop=CancelCheck(run.pk), local=_placement())
    except (Refused, Cancelled):
        raise   # lease lost, table moved on, or cancelled (the engine rolled its plan back): nothing to undo here
    except Exception:
        _withdraw_plan(table, run, planned.instant or "", lock)
        raise
    return Outcome(instant=result.instant, plan=planned.plan, result=_with_stats(table, result.to_dict()))


def _with_stats(table: Table, result: dict[str, Any]) -> dict[str, Any]:
    """The result plus what Hudi's metrics report for a compaction (log files and bytes compacted, records
    updated), read from its commit's write stats — the figures /metrics sums up."""
    for instant in table.timeline_details():
        if instant.instant == result["instant"] and instant.action == "commit":
            result["compaction_stats"] = {"log_files_compacted": instant.log_files_compacted,
                                          "log_bytes_compacted": instant.log_bytes_compacted,
                                          "records_updated": instant.records_updated}
    result["cores"] = _cores_held()
    return result


def _cores_held() -> int:
    """The cores a compaction run held, for its cost in core-seconds (the table page's trends): a warm worker runs
    compactions on its Spark session, whose task slots are its cores; otherwise the engine runs them in this
    process, one file group per CPU at a time."""
    if warm_enabled():
        from engine.spark import get_spark  # the worker's warm session, started with the worker

        return int(get_spark().sparkContext.defaultParallelism)
    return os.cpu_count() or 1


def _withdraw_plan(table: Table, run: Run, instant: str, lock: TableLock) -> None:
    """This run made the plan and could not carry it out (e.g. its Spark JVM died): roll it back at once, so
    a failed start never leaves a plan that refuses every later trigger. Recorded on the run (`result`),
    so the table page does not offer it any more; a rollback that fails too is left to a recover run."""
    try:
        undone = table.rollback(instant, lock=lock).to_dict()
    except Exception as exc:  # the original failure is what the run reports
        Run.objects.filter(pk=run.pk).update(result={"withdrawn_plan": None, "withdraw_error": f"{type(exc).__name__}: {exc}"})
        return
    Run.objects.filter(pk=run.pk).update(result={"withdrawn_plan": instant, "rollback": undone})


def clean(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    result = table.clean(lock=lock, on_progress=progress)
    return Outcome(result=result.to_dict())


def rollback(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    if not run.instant:
        raise ValueError("a rollback run needs the instant to roll back")
    result = table.rollback(run.instant, lock=lock, on_progress=progress)
    return Outcome(instant=run.instant, result=result.to_dict())


def recover(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    """The engine's recover, then the plans of failed runs are rolled back: the engine keeps an interrupted
    compaction's plan to be run again (as Java does), but a plan whose run failed (its worker lost) was
    never seen through by anyone, and leaving it would refuse every new trigger of the table."""
    result = table.recover(lock=lock).to_dict()
    abandoned = _abandoned_plans(table, run)
    result["abandoned_plans"] = [table.rollback(instant, lock=lock).to_dict() for instant in abandoned]
    result["rolled_back_plans"] = abandoned   # the instants the table page must stop offering
    result["changed"] = bool(result["changed"] or abandoned)
    return Outcome(result=result)


def _abandoned_plans(table: Table, run: Run) -> list[str]:
    pending = {c.instant for c in table.compactions() if c.state != "completed"}
    failed = Run.objects.filter(table=run.table, state=Run.State.FAILED, instant__in=pending)
    return sorted(set(failed.values_list("instant", flat=True)))


def validate(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    """Hudi CLI's `compaction validate` (read-only; under the lease so no unschedule moves files meanwhile)."""
    result = table.validate_compaction(_instant(run))
    return Outcome(instant=run.instant, result=result.to_dict())


def unschedule(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    partition, _, file_id = run.file_group.rpartition("/") if run.file_group else ("", "", "")
    result = table.unschedule_compaction(_instant(run), file_id=file_id or None,
                                         partition=partition if "/" in run.file_group else None,
                                         dry_run=run.dry_run, lock=lock)
    return Outcome(instant=run.instant, result=result.to_dict())


def repair(table: Table, run: Run, lock: TableLock, progress: Progress) -> Outcome:
    result = table.repair_compaction(_instant(run), dry_run=run.dry_run, lock=lock)
    return Outcome(instant=run.instant, result=result.to_dict())


def _instant(run: Run) -> str:
    if not run.instant:
        raise ValueError(f"a {run.kind} run needs the instant of the pending compaction")
    return run.instant


# The kinds that change the timeline and therefore run under the table's lease.
BY_KIND: dict[str, Callable[[Table, Run, TableLock, Progress], Outcome]] = {
    Run.Kind.SCHEDULE: schedule,
    Run.Kind.EXECUTE: execute,
    Run.Kind.SCHEDULE_EXECUTE: schedule_execute,
    Run.Kind.CLEAN: clean,
    Run.Kind.ROLLBACK: rollback,
    Run.Kind.RECOVER: recover,
    Run.Kind.VALIDATE: validate,
    Run.Kind.UNSCHEDULE: unschedule,
    Run.Kind.REPAIR: repair,
}
