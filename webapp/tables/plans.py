"""The table's compactions as its timeline holds them, read through the engine once per page or API request.

The pending plan is whatever compaction the timeline has requested or inflight — planned by a run of the
control plane, by `tidemark compaction schedule`, or by any other Hudi writer — with the file groups the
engine's plan still names (an unschedule of one file group rewrites the plan, a whole-plan unschedule or a
rollback removes it). The Run rows only say who planned it. The Roll back form offers the pending plan first,
else the newest completed compaction on the timeline; the engine still refuses one a later instant depends on.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from engine import CompactionPlan, TidemarkError
from webapp.tables import access, inputs
from webapp.tables.models import RegisteredTable, Run
from webapp.tables.status import iso

PLANNING = (Run.Kind.SCHEDULE, Run.Kind.SCHEDULE_EXECUTE)
# Timeline actions and states as the engine names them (engine.results.InstantInfo), on both table versions.
COMPACTION, COMMIT, COMPLETED = "compaction", "commit", "completed"


@dataclass(frozen=True)
class PendingPlan:
    """A compaction scheduled on the timeline and not executed yet."""

    instant: str
    state: str                             # "requested", or "inflight" while a run executes it (or died doing so)
    threshold: dt.datetime | None
    operations: list[dict[str, Any]]       # the engine's FileGroupOperation dicts the plan still holds
    run: Run | None                        # the run that planned it; None when it was planned outside the control plane

    @property
    def file_groups(self) -> list[str]:
        """The plan's file groups as unschedule names them: "<partition>/<fileId>", or the file id alone."""
        return [f"{op['partition']}/{op['file_id']}" if op.get("partition") else op["file_id"] for op in self.operations]

    @property
    def planned_count(self) -> int:
        """File groups the plan held when its run scheduled it (the count now where no run recorded it)."""
        recorded = (self.run.plan or {}).get("operations") if self.run is not None else None
        return len(recorded) if recorded is not None else len(self.operations)

    def to_dict(self) -> dict[str, Any]:
        """As GET /api/tables/<name> reports it (`pending_plan`)."""
        return {"instant": self.instant, "state": self.state, "threshold": iso(self.threshold),
                "file_groups": len(self.operations), "operations": self.operations,
                "run_id": self.run.pk if self.run is not None else None}


@dataclass(frozen=True)
class Compactions:
    """What one read of the table's timeline says about its compactions."""

    pending: PendingPlan | None = None
    latest_completed: str = ""             # the newest completed compaction's instant, "" when none
    error: str = ""                        # why the timeline could not be read ("" when it was)
    pending_count: int = 0                 # compactions requested or inflight (Java may leave more than one)

    @property
    def rollback_candidate(self) -> str:
        """The instant the Roll back form offers first ("" when there is none)."""
        return self.pending.instant if self.pending is not None else self.latest_completed


def read(table: RegisteredTable) -> Compactions:
    """The timeline's compactions of `table` (one listing of its timeline, plus the pending plan's file when
    there is one); an unreadable table is reported in `error`, never raised, so its page still renders."""
    try:
        engine_table = access.open_registered(table)
        timeline = engine_table.timeline()
        pending = sorted(i.instant for i in timeline if i.action == COMPACTION and i.state != COMPLETED)
        done = [i.instant for i in timeline if i.action == COMMIT and i.state == COMPLETED]
        plan = engine_table.compaction(pending[0]) if pending else None
    except (TidemarkError, inputs.InvalidInput, OSError) as exc:
        return Compactions(error=str(exc))
    return Compactions(pending=_pending(table, plan) if plan is not None and plan.instant else None,
                       latest_completed=max(done, default=""), pending_count=len(pending))


def _pending(table: RegisteredTable, plan: CompactionPlan) -> PendingPlan:
    """`plan` with the run that scheduled it, if the control plane did."""
    run = (table.runs.select_related("requested_by").filter(kind__in=PLANNING, instant=plan.instant)
           .order_by("-queued_at", "-id").first())
    return PendingPlan(instant=plan.instant or "", state=plan.state, threshold=plan.threshold,
                       operations=[op.to_dict() for op in plan.operations], run=run)
