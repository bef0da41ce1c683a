"""EVENT_TIME_TRIGGER: compactions are scheduled strictly one at a time, with nothing else in flight.

The RFC's guarantee ("after plan C with threshold T, no log in the latest slices has min event time ≤ T")
only holds if plans run serially: a second plan computed while the first is pending would miss the logs
the first one carries over. An in-flight write would land its logs in the old slice after planning and be
lost from the new one. And hudi 0.5.0 ignores v6 logs named after a pending compaction (docs/HUDI-FORMAT.md §4.3), so
a pending clustering or compaction must finish (or be rolled back) first.
"""
from __future__ import annotations

from engine import errors
from engine.errors import CompactionRefused
from engine.timeline.instants import COMMIT, DELTACOMMIT, REPLACECOMMIT, Timeline

_WRITE_ACTIONS = (DELTACOMMIT, COMMIT, REPLACECOMMIT)


def check_event_time_trigger(timeline: Timeline, new_instant: str) -> None:
    """Raise CompactionRefused naming the first instant that blocks scheduling compaction `new_instant`."""
    for inst in timeline.pending_compactions():
        _refuse(errors.PENDING_COMPACTION,
                f"compaction {inst.timestamp} is still {inst.state.value}; run or roll it back before "
                f"scheduling compaction {new_instant}", inst.timestamp)
    for inst in timeline.pending_clustering():
        _refuse(errors.PENDING_CLUSTERING,
                f"clustering (replacecommit) {inst.timestamp} is still {inst.state.value}; it must finish "
                f"before compaction {new_instant} is scheduled", inst.timestamp)
    for inst in timeline.pending():
        if inst.action in _WRITE_ACTIONS:
            _refuse(errors.PENDING_WRITE,
                    f"{inst.action} {inst.timestamp} is still {inst.state.value}: its logs would land in the old "
                    f"slice after planning compaction {new_instant} and be lost from the new one", inst.timestamp)
    for inst in timeline.instants:
        if inst.timestamp >= new_instant:
            _refuse(errors.NEWER_INSTANT,
                    f"{inst.action} {inst.timestamp} ({inst.state.value}) is not earlier than the new compaction "
                    f"instant {new_instant}; compaction instants must be the newest on the timeline",
                    inst.timestamp)


def _refuse(code: str, message: str, instant: str) -> None:
    raise CompactionRefused(code, message, instant)
