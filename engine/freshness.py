"""Freshness of the read-optimized (RO) view: the event-time guarantee of the last event-time compaction (RFC §4).

After an event-time compaction C with threshold T completes, every record with event time ≤ T is in a base
file, so the RO view (base files only) is complete up to T — in fact up to the published RO completion time
(≥ T: just below the smallest event time still in a log). The guarantee holds until a later deltacommit
writes a record with event time ≤ that completion time into a log: the record is visible to snapshot
queries only. We check the published completion time, not just T, because that is what the RO view claims.
This module reports the guarantee and checks it against the logs on disk, without Spark:
- header scans of the latest slices' logs find blocks of deltacommits after C whose header min event time
  is ≤ the completion time; only those blocks are decoded, to count exactly how many records are ≤ it;
- blocks without event-time headers (other writers) cannot be judged cheaply: they are counted as unknown
  and the message says so, so "holds" is never claimed silently over data we did not check.
Publishing the RO times is the compaction's job (commit extraMetadata, hoodie.properties); we only read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import eventtime, logformat
from engine.compaction_history import (RO_COMPLETION, RO_FRESHNESS, THRESHOLD, compaction_records,
                                       last_completed_event_time_compaction)
from engine.fsview import FileSystemView
from engine.logformat import BlockType
from engine.properties import TableConfig, load_table_config
from engine.timeline import DELTACOMMIT, Timeline

# hoodie.properties keys the compaction publishes (fallback when the commit left the active timeline).
PROP_COMPLETION = "tidemark.ro.completion.time"
PROP_FRESHNESS = "tidemark.ro.freshness.time"
PROP_THRESHOLD = "tidemark.ro.threshold"
PROP_INSTANT = "tidemark.ro.compaction.instant"

HOLDS, BROKEN, NONE = "holds", "broken", "none"
_DATA_TYPES = (BlockType.AVRO_DATA, BlockType.PARQUET_DATA)


@dataclass(frozen=True)
class RoState:
    """What the last event-time compaction promised."""

    instant: str | None
    threshold_ms: int
    completion_ms: int
    freshness_ms: int | None
    source: str  # "commit" (its extraMetadata) or "properties" (hoodie.properties)


@dataclass
class LateData:
    """Records with event time ≤ the RO completion time written after the compaction (latest slices' logs)."""

    records: int = 0
    min_ms: int | None = None
    instants: set[str] = field(default_factory=set)
    unknown_blocks: int = 0
    unknown_instants: set[str] = field(default_factory=set)

    def add(self, instant: str, event_ms: np.ndarray, bound_ms: int) -> None:
        late = event_ms[event_ms <= bound_ms]
        if late.size:
            self.records += int(late.size)
            lo = int(late.min())
            self.min_ms = lo if self.min_ms is None else min(self.min_ms, lo)
            self.instants.add(instant)

    def unknown(self, instant: str) -> None:
        self.unknown_blocks += 1
        self.unknown_instants.add(instant)


# ------------------------------------------------------------------------------------------ the promise

def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def ro_state(timeline: Timeline, cfg: TableConfig) -> RoState | None:
    """The last completed event-time compaction's promise; hoodie.properties if its commit is not on the timeline."""
    records = compaction_records(timeline)
    record = last_completed_event_time_compaction(records)
    if record is None:
        return _state_from_properties(cfg)
    threshold = _int(record.setting(THRESHOLD))
    assert threshold is not None  # last_completed_event_time_compaction only returns thresholded ones
    completion = _int(record.commit_extra.get(RO_COMPLETION))
    freshness = _int(record.commit_extra.get(RO_FRESHNESS))
    later = [r for r in records if r.commit is not None and r.timestamp > record.timestamp]
    if later:
        # A later compaction of another strategy republished the RO times: what it measured is the current
        # truth above T (it may have compacted more), but it cannot take back T itself — data ≤ T still in a
        # log is late data, reported as such below.
        completion = _int(later[-1].commit_extra.get(RO_COMPLETION))
        freshness = _max(freshness, _int(later[-1].commit_extra.get(RO_FRESHNESS)))
    # Without a published completion time, T itself is the promise (everything ≤ T was compacted).
    completion_ms = threshold if completion is None else max(threshold, completion)
    return RoState(record.timestamp, threshold, completion_ms, freshness, "commit")


def _state_from_properties(cfg: TableConfig) -> RoState | None:
    threshold = _int(cfg.props.get(PROP_THRESHOLD))
    if threshold is None:
        return None
    completion = _int(cfg.props.get(PROP_COMPLETION))
    completion_ms = threshold if completion is None else max(threshold, completion)
    return RoState(cfg.props.get(PROP_INSTANT) or None, threshold, completion_ms, _int(cfg.props.get(PROP_FRESHNESS)),
                   "properties")


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


# ------------------------------------------------------------------------------------------ late data

def _writes_after(timeline: Timeline, instant: str | None) -> frozenset[str]:
    """Completed deltacommits after the compaction (all of them if the compaction instant is unknown)."""
    return frozenset(i.timestamp for i in timeline.completed()
                     if i.action == DELTACOMMIT and (instant is None or i.timestamp > instant))


def _suspect_blocks(scan: logformat.LogFileScan, late_writes: frozenset[str], bound_ms: int,
                    late: LateData) -> dict[int, str]:
    """offset -> instant of late data blocks whose header min event time is ≤ bound; unknown ones are tallied."""
    rolled_back = {b.target_instant_time for b in scan.blocks if b.block_type is BlockType.COMMAND}
    suspects: dict[int, str] = {}
    for block in scan.blocks:
        inst = block.instant_time
        if block.block_type not in _DATA_TYPES or inst not in late_writes or inst in rolled_back:
            continue
        if block.min_event_time is None:
            late.unknown(inst)
        elif block.min_event_time <= bound_ms:
            suspects[block.offset] = inst
    return suspects


def _count_suspects(path: str, suspects: dict[int, str], column: str, bound_ms: int, late: LateData) -> None:
    """Decode the log (event-time column only) and count the suspect blocks' records with event time ≤ bound."""
    contents = logformat.read_log_file(path, columns=[column])
    seen: set[int] = set()
    for block in contents.blocks:
        offset = block.info.offset
        if offset not in suspects or not isinstance(block, logformat.DataBlock):
            continue
        seen.add(offset)
        if column not in block.records.column_names:
            late.unknown(suspects[offset])
            continue
        millis = eventtime.millis_array(block.records.column(column))
        late.add(suspects[offset], millis[~np.isnan(millis)].astype(np.int64), bound_ms)
    for offset in suspects.keys() - seen:  # content failed to decode: we cannot say what it holds
        late.unknown(suspects[offset])


def find_late_data(base_path: str, timeline: Timeline, cfg: TableConfig, state: RoState) -> LateData:
    """Late records in the latest slices' logs (a carried-over log keeps its pre-compaction instants: never late)."""
    late = LateData()
    late_writes = _writes_after(timeline, state.instant)
    if not late_writes:
        return late
    column = cfg.event_time_field or cfg.ordering_field
    bound = state.completion_ms
    for sl in FileSystemView(base_path, timeline).latest_slices():
        for lf in sl.log_files:
            suspects = _suspect_blocks(logformat.scan_log_file(lf.path), late_writes, bound, late)
            if not suspects:
                continue
            if column is None:
                for inst in suspects.values():
                    late.unknown(inst)
            else:
                _count_suspects(lf.path, suspects, column, bound, late)
    return late


# ------------------------------------------------------------------------------------------ the report

def _message(state: RoState | None, late: LateData, guarantee: str) -> str:
    if state is None:
        return "no event-time compaction has completed: the RO view carries no event-time guarantee"
    after = f"compaction {state.instant}" if state.instant else "the last compaction"
    if guarantee == BROKEN:
        text = (f"guarantee broken: {late.records} record{'s' if late.records != 1 else ''} with event time ≤ "
                f"{eventtime.iso(state.completion_ms)} (earliest {eventtime.iso(late.min_ms)}) arrived after {after} "
                f"in deltacommit{'s' if len(late.instants) != 1 else ''} {', '.join(sorted(late.instants))}; "
                "they are visible to snapshot queries only until the next compaction")
    else:
        text = f"RO view holds all data with event time ≤ {eventtime.iso(state.completion_ms)}"
    if late.unknown_blocks:
        text += (f"; unverified: {late.unknown_blocks} log block{'s' if late.unknown_blocks != 1 else ''} written "
                 f"after {after} ({', '.join(sorted(late.unknown_instants))}) carry no event-time header, so "
                 "their event times are unknown")
    return text


def freshness_report(base_path: str) -> dict[str, Any]:
    """RO completion/freshness times, the compaction they come from, and late data breaking the guarantee."""
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    state = ro_state(timeline, cfg)
    late = find_late_data(base_path, timeline, cfg, state) if state is not None else LateData()
    guarantee = NONE if state is None else (BROKEN if late.records else HOLDS)
    return {
        "table": cfg.name,
        "ro_completion_time": eventtime.iso(state.completion_ms) if state else None,
        "ro_freshness_time": eventtime.iso(state.freshness_ms) if state else None,
        "threshold": eventtime.iso(state.threshold_ms) if state else None,
        "compaction_instant": state.instant if state else None,
        "source": state.source if state else None,
        "late_records": late.records,
        "late_min_event_time": eventtime.iso(late.min_ms),
        "late_instants": sorted(late.instants),
        "late_unknown_blocks": late.unknown_blocks,
        "guarantee": guarantee,
        "message": _message(state, late, guarantee),
    }
