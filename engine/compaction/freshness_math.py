"""RO completion and freshness times published after an event-time compaction.

- completion: every record with event time ≤ completion is in the read-optimized view. It is just below the
  smallest min event time of the logs still outside the base, and never below the threshold T (the strategy
  guaranteed T; a late log written during the compaction cannot retract the published promise, it only
  stops the promise from growing). With no log left anywhere it is max(T, freshness).
- freshness: the largest event time the RO view has seen, monotone across compactions.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.compaction.strategy import LogCandidate, PlannedOperation


def _max(*values: int | None) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def compute_ro_times(threshold_ms: int | None, remaining_log_min_event_times: Iterable[int | None],
                     compacted_max_event_time: int | None,
                     previous_ro_times: tuple[int | None, int | None] | None = None) -> tuple[int | None, int | None]:
    """(completion_ms, freshness_ms); None where nothing can be promised (no threshold, unknown logs)."""
    previous_freshness = previous_ro_times[1] if previous_ro_times else None
    freshness = _max(compacted_max_event_time, previous_freshness)
    remaining = list(remaining_log_min_event_times)
    if not remaining:
        return _max(threshold_ms, freshness), freshness
    known = [m for m in remaining if m is not None]
    if len(known) < len(remaining):
        # A remaining log of unknown event time may hold anything: only T itself is guaranteed.
        return threshold_ms, freshness
    return _max(threshold_ms, min(known) - 1), freshness


def projected_completion(threshold_ms: int | None, exact: bool, operations: Iterable[PlannedOperation],
                         untouched_logs: Iterable[LogCandidate],
                         previous_ro_times: tuple[int | None, int | None] | None = None) -> int | None:
    """The completion time a plan will publish, from header / write-stat event times (what the preview shows).

    The same rule as `compute_ro_times`, applied to the logs the plan leaves: those it carries over and those
    of slices it does not touch. Exact mode spills versions whose event times are only known once decoded,
    so its projection is T itself (what it promises). Execution recomputes the real value; it can be lower
    than projected (never below T) when a file group's run carries records forward (a carry-forward log of
    replayed deletes' withheld winners), whose event times are only known once decoded.
    """
    if threshold_ms is None:
        return None
    if exact:
        return threshold_ms
    operations = list(operations)
    remaining = [lf.min_event_time for op in operations for lf in op.to_remain]
    remaining += [lf.min_event_time for lf in untouched_logs]
    compacted_max = _max(*(lf.max_event_time for op in operations for lf in op.to_compact))
    return compute_ro_times(threshold_ms, remaining, compacted_max, previous_ro_times)[0]
