"""RO completion and freshness times published after an event-time compaction.

- completion: every record with event time ≤ completion is in the read-optimized view. It is just below the
  smallest min event time of the logs still outside the base, and never below the threshold T (the strategy
  guaranteed T; a late log written during the compaction cannot retract the published promise, it only
  stops the promise from growing). With no log left anywhere it is max(T, freshness).
- freshness: the largest event time the RO view has seen, monotone across compactions.
"""
from __future__ import annotations

from typing import Iterable


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
