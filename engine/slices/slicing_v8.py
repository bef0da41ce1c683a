"""Table version 8: which file slice each log file belongs to (completion-time file slicing).

A v8 log is named by the requested time of the deltacommit that wrote it, not by its slice. Java 1.x
(HoodieFileGroup with the CompletionTimeQueryView) and hudi-rs (`FileGroup::add_log_file`) put it in the slice
with the greatest base instant ≤ that deltacommit's completion time: a write that completed after compaction C
was requested lands in slice C even though it started earlier, and one that completed before C was requested was
either compacted by C or (HUDI-9388) is treated as compacted. Here:
- a completed log joins the greatest committed base instant ≤ its completion time; with none (a group whose first
  write went to logs, or whose older bases were cleaned) it starts a log-only slice under its own instant, which
  later logs join like a base;
- a log named by a *pending* compaction C (Tidemark's carry-overs and carry-forward log while C runs) stays in
  slice C, so the view's pending-compaction rule applies as in version 6;
- a log of a pending or unknown instant (a write in flight, a failed write) joins the group's latest slice, as
  Java places uncommitted logs; its blocks are filtered out by instant when read.
Completion time decides only *which* slice a log joins. Inside a slice the logs are read in name order
(instant, version, write token: Java's log-file comparator; `engine.slices.fsview`), which hudi 0.5.0 follows too
(measured): a log carried over by compaction C is named by C and comes before a write requested after C, although
C completes later. Its records are older than that write's, so on an ordering-value tie the write must win.
"""
from __future__ import annotations

import bisect

from engine.slices.groups import FileSlice, LogFile
from engine.timeline.instants import Timeline


def place_logs(timeline: Timeline, pending_compactions: set[str], partition: str, logs: list[LogFile],
               slices: dict[tuple[str, str], FileSlice]) -> None:
    """Add each of a partition's `logs` to its slice in `slices` ((fileId, base instant) -> slice), creating
    log-only slices where no base slice fits."""
    keys: dict[str, list[str]] = {}
    for fid, base in slices:
        keys.setdefault(fid, []).append(base)
    for bases in keys.values():
        bases.sort()
    ordered = sorted(logs, key=lambda lf: (_completion_or_max(timeline, lf.base_instant), lf.sort_key))
    for lf in ordered:
        bases = keys.setdefault(lf.file_id, [])
        key = _slice_key(timeline, pending_compactions, lf.base_instant, bases)
        if key not in bases:
            bisect.insort(bases, key)
        slice_ = slices.setdefault((lf.file_id, key), FileSlice(partition, lf.file_id, key))
        slice_.log_files.append(lf)


def _completion_or_max(timeline: Timeline, instant: str) -> str:
    return timeline.completion_time(instant) or "~"   # pending/unknown last: they join the latest slice


def _slice_key(timeline: Timeline, pending_compactions: set[str], instant: str, bases: list[str]) -> str:
    if instant in pending_compactions:
        return instant
    done = timeline.completion_time(instant)
    if done is None:
        return bases[-1] if bases else instant
    i = bisect.bisect_right(bases, done)
    return bases[i - 1] if i else instant
