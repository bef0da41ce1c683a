"""Backlog metrics of the log files not yet compacted (RFC §5); the control plane stores them and /metrics exports them.

Everything is computed from the latest file slices with header scans only (no record is decoded for
Tidemark-written logs), so a /metrics scrape stays cheap:
- min event time over all remaining logs: how far back the next event-time compaction can move T;
- slices with logs, remaining log files and bytes: the compaction backlog;
- corrupt log blocks of committed instants: records every read is missing, which no compaction will fold
  until repaired (header scan plus one small read of each block's content prefix; engine.logformat.integrity).
Carried-over logs (symlinks or copies re-homed into the compaction's slice) are still uncompacted data, so
they count as remaining logs; their bytes are the target's (stat follows the link).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from engine import logformat
from engine.compaction.log_event_times import SOURCES, carried_aliases, resolve_log_event_times
from engine.config.properties import load_table_config
from engine.io import storage
from engine.logformat import integrity
from engine.results import BacklogMetrics, from_ms
from engine.slices.fsview import FileSystemView
from engine.slices.groups import FileSlice, LogFile
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import Timeline


def backlog_metrics(base_path: str) -> BacklogMetrics:
    """Backlog metrics of the table's latest file slices (one header scan per log, shared by every figure)."""
    with logformat.scan_memo():
        return _backlog_metrics(base_path)


def _backlog_metrics(base_path: str) -> BacklogMetrics:
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    view = FileSystemView(base_path, timeline)
    slices = view.latest_slices()
    logs = [lf for sl in slices for lf in sl.log_files]
    times = resolve_log_event_times(view, timeline, slices, cfg=cfg)
    min_ms = min((t.min_ms for t in times.values() if t.min_ms is not None), default=None)
    sources = Counter(t.source for t in times.values())
    pending = [i.timestamp for i in timeline.pending_compactions()]
    return BacklogMetrics(
        table=cfg.name,
        min_event_time=from_ms(min_ms),
        file_slices=len(slices),
        file_slices_with_logs=sum(1 for sl in slices if sl.log_files),
        remaining_log_files=len(logs),
        # The view's sizes follow symlinks: a carried-over link weighs what its target weighs.
        remaining_log_bytes=sum(lf.size for lf in logs),
        carried_over_log_files=_carried_over(timeline, slices),
        logs_with_unknown_event_time=sources.get("none", 0),
        log_event_time_sources={s: sources.get(s, 0) for s in SOURCES},
        pending_compactions=len(pending),
        pending_compaction_instants=pending,
        corrupt_log_blocks=len(integrity.scan_corruption(
            [lf.path for lf in logs], view.committed_instants,
            CommittedExtents(base_path, timeline)).committed),
        oldest_log_instant=_oldest_write(logs, view.committed_instants),
    )


def _carried_over(timeline: Timeline, slices: Sequence[FileSlice]) -> int:
    """Logs of the latest slices that a compaction carried over: links locally, copies on an object store (known
    from the completed compactions' carry-over records, as a copy looks like any log)."""
    copies = carried_aliases(timeline)
    return sum(1 for sl in slices for lf in sl.log_files
               if (sl.partition_path, lf.name) in copies or storage.is_link(lf.path))


def _oldest_write(logs: Sequence[LogFile], committed: AbstractSet[str]) -> str | None:
    """The earliest committed write whose data still waits in a log (a carried log keeps its blocks' instants):
    how long the oldest uncompacted data has waited, in wall-clock time, is now minus this instant."""
    instants = [b.instant_time for lf in logs for b in logformat.scan_log_file(lf.path, lf.size).blocks
                if b.block_type is not logformat.BlockType.COMMAND and b.instant_time in committed]
    return min((i for i in instants if i is not None), default=None)
