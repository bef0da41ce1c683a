"""Compaction plans the control plane made that are still pending (scheduled, not executed, not rolled
back), from the runs that recorded them. The engine only rolls back pending plans, so these are also the
instants an operator can roll back or execute."""
from __future__ import annotations

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
    return None if finished else planned
