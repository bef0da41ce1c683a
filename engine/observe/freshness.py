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
- a late delete breaks the promise like a late record (the RO view still holds the deleted row). Its event
  time is its ordering value when the ordering field is the event-time field, else the event-time bounds
  of its write (write stats): all late when the maximum is ≤ the completion time, none when the minimum
  is above it, unknown otherwise.
Publishing the RO times is the compaction's job (commit extraMetadata, hoodie.properties); we only read.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from engine import logformat
from engine.compaction.carry_forward import _ordering_as_event_ms
from engine.compaction.log_event_times import StatTimes, write_stat_event_times
from engine.config import eventtime
from engine.config.properties import RO_COMPLETION_KEY, RO_FRESHNESS_KEY, RO_INSTANT_KEY, RO_THRESHOLD_KEY, TableConfig, load_table_config
from engine.config.schema import table_read_schema
from engine.errors import ConfigError
from engine.logformat import BlockType
from engine.logformat.blocks import DATA_BLOCK_TYPES
from engine.results import Freshness, from_ms
from engine.slices.fsview import FileSystemView
from engine.timeline import metadata as md
from engine.timeline.compactions import compaction_records, last_completed_event_time_compaction
from engine.timeline.instants import DELTACOMMIT, Timeline

# hoodie.properties keys the compaction publishes (fallback when the commit left the active timeline).
PROP_COMPLETION, PROP_FRESHNESS = RO_COMPLETION_KEY, RO_FRESHNESS_KEY
PROP_THRESHOLD, PROP_INSTANT = RO_THRESHOLD_KEY, RO_INSTANT_KEY

HOLDS, BROKEN, NONE = "holds", "broken", "none"


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
    deletes: int = 0          # of `records`, how many are deletes
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

def _checked(ms: int | None, where: str) -> int | None:
    return None if ms is None else _time(str(ms), where)


def _time(value: str | None, where: str) -> int | None:
    """A published epoch-millis time; one that is not a time in years 0001..9999 is named, never rendered."""
    if value in (None, ""):
        return None
    try:
        ms = int(value)
    except ValueError:
        ms = None
    if ms is None or not eventtime.MIN_MS <= ms <= eventtime.MAX_MS:
        raise ConfigError(f"{where}={value} is not a time (epoch millis in years 0001..9999); it was published "
                          "by a compaction scheduled with an out-of-range threshold — roll that compaction back "
                          "or run a new event-time compaction")
    return ms


def ro_state(timeline: Timeline, cfg: TableConfig) -> RoState | None:
    """The last completed event-time compaction's promise; hoodie.properties if its commit is not on the timeline."""
    records = compaction_records(timeline)
    record = last_completed_event_time_compaction(records)
    if record is None:
        return _state_from_properties(cfg)
    where = f"compaction {record.timestamp}"
    threshold = _checked(record.settings.threshold_ms, f"{where} {md.THRESHOLD}")
    assert threshold is not None and record.commit is not None  # only completed, thresholded ones are returned
    completion = _checked(record.commit.ro_completion_ms, f"{where} {md.RO_COMPLETION}")
    freshness = _checked(record.commit.ro_freshness_ms, f"{where} {md.RO_FRESHNESS}")
    later = [r for r in records if r.commit is not None and r.timestamp > record.timestamp]
    if later:
        # A later compaction of another strategy republished the RO times: what it measured is the current
        # truth above T (it may have compacted more), but it cannot take back T itself — data ≤ T still in a
        # log is late data, reported as such below.
        where = f"compaction {later[-1].timestamp}"
        last = later[-1].commit
        assert last is not None
        completion = _checked(last.ro_completion_ms, f"{where} {md.RO_COMPLETION}")
        freshness = _max(freshness, _checked(last.ro_freshness_ms, f"{where} {md.RO_FRESHNESS}"))
    # Without a published completion time, T itself is the promise (everything ≤ T was compacted).
    completion_ms = threshold if completion is None else max(threshold, completion)
    return RoState(record.timestamp, threshold, completion_ms, freshness, "commit")


def _state_from_properties(cfg: TableConfig) -> RoState | None:
    threshold = _time(cfg.props.get(PROP_THRESHOLD), f"hoodie.properties {PROP_THRESHOLD}")
    if threshold is None:
        return None
    completion = _time(cfg.props.get(PROP_COMPLETION), f"hoodie.properties {PROP_COMPLETION}")
    completion_ms = threshold if completion is None else max(threshold, completion)
    freshness = _time(cfg.props.get(PROP_FRESHNESS), f"hoodie.properties {PROP_FRESHNESS}")
    return RoState(cfg.props.get(PROP_INSTANT) or None, threshold, completion_ms, freshness, "properties")


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


# ------------------------------------------------------------------------------------------ late data

def _logs_written_by(timeline: Timeline, writes: frozenset[str]) -> set[tuple[str, str]] | None:
    """(partition, log name) of every log the completed deltacommits `writes` appended to, from their write stats;
    None when one of them names no file (a writer that records no stats: every log is looked at then)."""
    out: set[tuple[str, str]] = set()
    for inst in timeline.completed():
        if inst.timestamp not in writes:
            continue
        stats = timeline.commit_metadata(inst).write_stats
        if not stats or any(not stat.names for stat in stats):
            return None
        out.update((stat.partition_path, name) for stat in stats for name in stat.names)
    return out


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
        if block.block_type not in DATA_BLOCK_TYPES or inst not in late_writes or inst in rolled_back:
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


def _late_delete_blocks(scan: logformat.LogFileScan, late_writes: frozenset[str]) -> dict[int, str]:
    """offset -> instant of the delete blocks of late writes (not rolled back)."""
    rolled_back = {b.target_instant_time for b in scan.blocks if b.block_type is BlockType.COMMAND}
    return {b.offset: b.instant_time for b in scan.blocks if b.block_type is BlockType.DELETE
            and b.instant_time in late_writes and b.instant_time not in rolled_back}


@dataclass(frozen=True)
class _DeleteTimes:
    """How a late delete's event time is told (see the module doc)."""

    from_ordering: bool
    field_type: object          # the event-time field's Arrow type
    stats: StatTimes            # (partition, log name) -> (min, max, complete) of the writes' stats


def _count_late_deletes(path: str, key: tuple[str, str], blocks: dict[int, str], times: _DeleteTimes,
                        bound_ms: int, late: LateData) -> None:
    """Count the late deletes of `blocks` in the log at `path` (`key`: its partition and name)."""
    lo, hi, complete_ = times.stats.get(key, (None, None, False))
    for block in logformat.read_log_file(path, columns=[]).blocks:
        inst = blocks.get(block.info.offset)
        if inst is None or not isinstance(block, logformat.DeleteBlock):
            continue
        d = block.deletes
        event = np.full(d.num_rows, np.nan)
        if times.from_ordering and not pa.types.is_null(d.column("ordering_value").type):
            event = _ordering_as_event_ms(d.column("ordering_value").combine_chunks(), times.field_type)
            event[np.asarray(d.column("always_wins").to_numpy(), bool)] = np.nan
        own = d.column(logformat.EVENT_TIME_COLUMN).combine_chunks()   # each delete's own, when written with it
        if own.null_count < len(own):
            known = np.asarray(own.is_valid().to_numpy(zero_copy_only=False), bool)
            event[known] = own.filter(own.is_valid()).to_numpy().astype(np.float64)
        unknown = np.isnan(event)
        if unknown.any() and complete_ and hi is not None and hi <= bound_ms:
            event[unknown] = lo   # the whole write is at or before the bound
        elif unknown.any() and not (complete_ and lo is not None and lo > bound_ms):
            late.unknown(inst)    # some of these deletes may be late: we cannot tell which
        before = late.records
        late.add(inst, event[~np.isnan(event)].astype(np.int64), bound_ms)
        late.deletes += late.records - before


def find_late_data(base_path: str, timeline: Timeline, cfg: TableConfig, state: RoState) -> LateData:
    """Late records and deletes in the latest slices' logs (a carried-over log keeps its pre-compaction
    instants: never late)."""
    late = LateData()
    late_writes = _writes_after(timeline, state.instant)
    if not late_writes:
        return late
    column = cfg.event_time_field or cfg.ordering_field
    bound = state.completion_ms
    delete_times: _DeleteTimes | None = None
    named = _logs_written_by(timeline, late_writes)
    logs = [(sl, lf) for sl in FileSystemView(base_path, timeline).latest_slices() for lf in sl.log_files
            if named is None or (sl.partition_path, lf.name) in named]
    # only the logs a late write appended to can hold its blocks; their headers are read together (in parallel on
    # a store), not one round trip after another
    scans = logformat.scan_log_files((lf.path, lf.size) for _, lf in logs)
    for sl, lf in logs:
        scan = scans[lf.path]
        suspects = _suspect_blocks(scan, late_writes, bound, late)
        if suspects and column is None:
            for inst in suspects.values():
                late.unknown(inst)
        elif suspects and column is not None:
            _count_suspects(lf.path, suspects, column, bound, late)
        deletes = _late_delete_blocks(scan, late_writes)
        if deletes:
            delete_times = delete_times or _delete_times(cfg, timeline, column)
            _count_late_deletes(lf.path, (sl.partition_path, lf.name), deletes, delete_times, bound, late)
    return late


def _delete_times(cfg: TableConfig, timeline: Timeline, column: str | None) -> _DeleteTimes:
    schema = table_read_schema(cfg, timeline.latest_schema())
    from_ordering = column is not None and column == cfg.ordering_field and column in schema.names
    return _DeleteTimes(from_ordering, schema.field(column).type if from_ordering else None,
                        write_stat_event_times(timeline))


# ------------------------------------------------------------------------------------------ the report

def _message(state: RoState | None, late: LateData, guarantee: str) -> str:
    if state is None:
        return "no event-time compaction has completed: the RO view carries no event-time guarantee"
    after = f"compaction {state.instant}" if state.instant else "the last compaction"
    if guarantee == BROKEN:
        deletes = f" ({late.deletes} of them deletes)" if late.deletes else ""
        text = (f"guarantee broken: {late.records} record{'s' if late.records != 1 else ''}{deletes} with event time ≤ "
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


def freshness_report(base_path: str) -> Freshness:
    """RO completion/freshness times, the compaction they come from, and late data breaking the guarantee."""
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    state = ro_state(timeline, cfg)
    late = find_late_data(base_path, timeline, cfg, state) if state is not None else LateData()
    guarantee = NONE if state is None else (BROKEN if late.records else HOLDS)
    return Freshness(
        table=cfg.name,
        ro_completion_time=from_ms(state.completion_ms) if state else None,
        ro_freshness_time=from_ms(state.freshness_ms) if state else None,
        threshold=from_ms(state.threshold_ms) if state else None,
        compaction_instant=state.instant if state else None,
        source=state.source if state else None,
        late_records=late.records,
        late_deletes=late.deletes,
        late_min_event_time=from_ms(late.min_ms),
        late_instants=sorted(late.instants),
        late_unknown_blocks=late.unknown_blocks,
        guarantee=guarantee,
        message=_message(state, late, guarantee),
    )
