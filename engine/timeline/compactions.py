"""The compactions on the active timeline, each as its typed records: the plan and (once completed) the commit.

Two records describe one compaction (docs/HUDI-FORMAT.md §3.1, §3.3), both read through engine.timeline.metadata:
the plan ``<C>.compaction.requested`` (Avro) says what was scheduled, the completed ``<C>.commit`` (JSON) what
happened. Read by the compaction listings (engine.compaction.history), the RO guarantee (engine.observe.freshness)
and the cleaner (engine.services.clean, which keeps carried logs' targets).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.io import storage
from engine.timeline.instants import COMMIT, COMPACTION, Instant, State, Timeline, TimelineError, instant_file_name
from engine.timeline.metadata import CarriedEntry, CommitMetadata, CompactionPlanRecord, PlanSettings


@dataclass(frozen=True)
class CompactionRecord:
    """The timeline records of one compaction instant."""

    instant: Instant
    plan: CompactionPlanRecord | None   # None when the plan file is gone (archived/foreign tables)
    commit: CommitMetadata | None       # None unless completed

    @property
    def timestamp(self) -> str:
        return self.instant.timestamp

    @property
    def state(self) -> str:
        return self.instant.state.value

    @property
    def settings(self) -> PlanSettings:
        """What ran (the commit's settings) before what was asked (the plan's), field by field."""
        planned = self.plan.settings if self.plan is not None else PlanSettings()
        if self.commit is None:
            return planned
        done = self.commit.settings
        return PlanSettings(
            threshold_ms=done.threshold_ms if done.threshold_ms is not None else planned.threshold_ms,
            strategy=done.strategy or planned.strategy, carry_over=planned.carry_over or self._carried_mode(),
            exact=done.exact or planned.exact, event_time_sources=planned.event_time_sources,
            settings_used=planned.settings_used)

    def _carried_mode(self) -> str | None:
        modes = {e.mode for e in (self.commit.carried if self.commit else None) or [] if e.mode}
        return modes.pop() if len(modes) == 1 else ("mixed" if modes else None)

    @property
    def is_event_time(self) -> bool:
        """An event-time compaction with a threshold: the source of the RO view's guarantee."""
        s = self.settings
        return s.strategy == "event_time" and s.threshold_ms is not None


# ------------------------------------------------------------------------------------------ discovery

def _plan_exists(timeline: Timeline, ts: str) -> bool:
    name = instant_file_name(ts, COMPACTION, State.REQUESTED)
    return any(storage.exists(storage.join(folder, name))
               for folder in (timeline.timeline_path, storage.join(timeline.hoodie_path, ".aux")))


def _read_plan(timeline: Timeline, ts: str) -> CompactionPlanRecord | None:
    try:
        return timeline.compaction_plan(ts)
    except TimelineError:
        if _plan_exists(timeline, ts):
            raise  # present but unreadable: say so rather than report a plan-less compaction
        return None


def compaction_records(timeline: Timeline) -> list[CompactionRecord]:
    """Every compaction on the active timeline, oldest first."""
    out: list[CompactionRecord] = []
    for inst in timeline.instants:
        if inst.action == COMPACTION:
            out.append(CompactionRecord(inst, _read_plan(timeline, inst.timestamp), None))
        elif inst.action == COMMIT and inst.is_completed:
            metadata = timeline.commit_metadata(inst)
            # In a MOR table a completed `commit` is a compaction; the plan file or COMPACT operation proves it.
            if _plan_exists(timeline, inst.timestamp) or metadata.is_compaction:
                out.append(CompactionRecord(inst, _read_plan(timeline, inst.timestamp), metadata))
    return out


def last_completed_event_time_compaction(records: list[CompactionRecord]) -> CompactionRecord | None:
    """The latest completed compaction that recorded an event-time threshold (the RO guarantee's source)."""
    done = [rec for rec in records if rec.commit is not None and rec.is_event_time]
    return done[-1] if done else None


def carried_over_entries(record: CompactionRecord) -> list[CarriedEntry] | None:
    """The commit's carried-over logs; None if the commit does not record them (or is not there)."""
    return record.commit.carried if record.commit is not None else None
