"""Compactions the control plane made, from the runs that recorded them: the plan still pending (scheduled,
not executed, not rolled back), which an operator can execute or roll back, and the newest completed one,
which the engine can also roll back while no later instant depends on it."""
from __future__ import annotations

from typing import Any

from webapp.tables.models import RegisteredTable, Run

PLANNING = (Run.Kind.SCHEDULE, Run.Kind.SCHEDULE_EXECUTE)
FINISHING = (Run.Kind.EXECUTE, Run.Kind.ROLLBACK)


def pending_plan(table: RegisteredTable) -> Run | None:
    """The newest run whose plan is still pending, if any (the serial trigger allows one at a time)."""
    planned = (table.runs.filter(kind__in=PLANNING, state__in=(Run.State.SUCCEEDED, Run.State.FAILED),
                                 plan__isnull=False).exclude(instant="").order_by("-queued_at", "-id").first())
    if planned is None:
        return None
    if planned.kind == Run.Kind.SCHEDULE_EXECUTE and planned.state == Run.State.SUCCEEDED:
        return None
    finished = table.runs.filter(kind__in=FINISHING, instant=planned.instant, state=Run.State.SUCCEEDED).exists()
    return None if finished or _withdrawn(table, planned) or _unscheduled(table, planned) else planned


def unscheduled_groups(table: RegisteredTable, instant: str) -> list[str]:
    """The file groups ("<partition>/<fileId>") unschedule runs took out of pending plan `instant` so far."""
    done = table.runs.filter(kind=Run.Kind.UNSCHEDULE, instant=instant, state=Run.State.SUCCEEDED,
                             dry_run=False).values_list("result", flat=True)
    return sorted({g for r in done for g in (r or {}).get("unscheduled_file_groups") or []})


def planned_groups(table: RegisteredTable, pending: Run) -> list[dict[str, Any]]:
    """The operations of the pending plan still in it (its planning run recorded them all)."""
    gone = set(unscheduled_groups(table, pending.instant))
    return [op for op in (pending.plan or {}).get("operations") or []
            if (f"{op.get('partition')}/{op.get('file_id')}" if op.get("partition") else op.get("file_id")) not in gone]


def _unscheduled(table: RegisteredTable, planned: Run) -> bool:
    """An unschedule run took the whole plan back (or its last file group)."""
    done = table.runs.filter(kind=Run.Kind.UNSCHEDULE, instant=planned.instant, state=Run.State.SUCCEEDED,
                             dry_run=False).values_list("result", flat=True)
    return any((r or {}).get("remaining_file_groups") == 0 for r in done)


def _withdrawn(table: RegisteredTable, planned: Run) -> bool:
    """The plan was rolled back by its own failed run or by a later recover (tasks.operations records both)."""
    if (planned.result or {}).get("withdrawn_plan") == planned.instant:
        return True
    recovers = table.runs.filter(kind=Run.Kind.RECOVER, state=Run.State.SUCCEEDED, queued_at__gte=planned.queued_at)
    return any(planned.instant in ((r or {}).get("rolled_back_plans") or []) for r in recovers.values_list("result", flat=True))


def rollback_candidate(table: RegisteredTable, pending: Run | None) -> str:
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
