"""Scheduling a (partial) compaction: pick logs per slice, write `<C>.compaction.requested`.

The plan is a standard HoodieCompactionPlan (docs/HUDI-FORMAT.md §3.3) listing, per slice, only the logs to merge in
`deltaFilePaths`, plus the RFC's `symlinkOperations`: the names under which the remaining logs are
carried into the new slice C (`.<fid>_<C>.log.<k>_<tok>`, k = 2.. in log order). Version 1 is the
carry-forward log the execution may write (engine.compaction.carry_forward): deletes and winners the new
base cannot express, and in exact mode the records kept out of the base.
"""
from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine import logformat
from engine.compaction.freshness_math import projected_completion
from engine.compaction.log_event_times import SOURCES, LogEventTime, resolve_log_event_times, unchanged_since_written
from engine.compaction.strategy import CompactionStrategy, LogCandidate, PlannedOperation, SliceCandidate, strategy_for
from engine.compaction.trigger import check_event_time_trigger
from engine.config import eventtime
from engine.config.choices import CarryOver
from engine.config.properties import (
    MAX_DURATION_MS,
    RO_COMPLETION_KEY,
    RO_FRESHNESS_KEY,
    TableConfig,
    load_table_config,
    refuse_logs_without_meta_fields,
    validate_settings,
)
from engine.config.resolve import (
    ARGUMENT,
    SIZE_THRESHOLD_KEY,
    STREAM,
    STREAM_LATENESS_KEY,
    TARGET_IO_KEY,
    THRESHOLD,
    CompactionSettings,
    compaction_settings,
)
from engine.errors import ConfigError, TidemarkError
from engine.io import storage
from engine.io.faults import fault_point
from engine.io.naming import CARRY_FORWARD_VERSION, LogFileName, instant_to_millis, new_instant_time
from engine.lock import TableLock, ensure_held, holding, table_lock_of
from engine.logformat import integrity
from engine.services import rollback
from engine.slices.fsview import FileSystemView, ask_listing_ahead
from engine.slices.groups import FileSlice
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import COMPACTION, State, Timeline, create_requested
from engine.timeline.instants import ask_ahead as ask_timeline_ahead
from engine.timeline.metadata import CompactionOperation, CompactionPlanRecord, PlanSettings, SymlinkOperation


@dataclass
class ScheduledPlan:
    instant: str | None            # None when nothing was scheduled (no instant exists on the timeline)
    threshold_ms: int | None
    record: CompactionPlanRecord | None = None
    written: bool = False          # False: nothing to compact (or a preview), no plan file was written
    message: str = ""
    settings: CompactionSettings | None = None
    threshold_source: str | None = None
    projected_completion_ms: int | None = None   # what an event-time plan's commit will publish (preview)
    # partition folder -> {file name: size} from the planning listing (object stores; the plan's report then
    # lists no partition again)
    listings: dict[str, dict[str, int]] | None = None

    @property
    def plan(self) -> dict[str, Any]:
        """The plan as written (Avro HoodieCompactionPlan record); {} when there is none."""
        return self.record.to_avro() if self.record is not None else {}

    @property
    def operations(self) -> list[dict[str, Any]]:
        """The plan's operations in their Avro form."""
        return list(self.plan.get("operations") or [])


def schedule_compaction(base_path: str, *, strategy: str | None = None, threshold_ms: int | None = None,
                        data_latency_ms: int | None = None, carry_over: str | None = None,
                        exact: bool | None = None, settings: Mapping[str, str] | None = None,
                        lock: TableLock | None = None, preview: bool = False) -> ScheduledPlan:
    """Plan compaction C of `base_path` and write `C.compaction.requested` (unless there is nothing to do).

    `strategy`, `carry_over`, `exact` and `data_latency_ms` given as None come from the table settings
    (engine.config.resolve). A `preview` computes the same plan but writes nothing and takes no lock.
    """
    for name, value in (("threshold_ms", threshold_ms), ("data_latency_ms", data_latency_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{name} must be an integer number of milliseconds, got {value!r}")
    if threshold_ms is not None:
        eventtime.check_threshold(threshold_ms)
    if data_latency_ms is not None and not 0 <= data_latency_ms <= MAX_DURATION_MS:
        raise ConfigError(f"data latency {data_latency_ms} ms is out of range: expected 0..{MAX_DURATION_MS} ms")
    cfg = load_table_config(base_path)
    settings = validate_settings(dict(settings or {}), per_operation=True)
    if carry_over is not None and carry_over not in tuple(CarryOver):
        raise ConfigError(f"unknown carry-over mode {carry_over!r}; use {' or '.join(CarryOver)}")
    resolved = compaction_settings(cfg, strategy=strategy, carry_over=carry_over, exact=exact,
                                   data_latency_ms=data_latency_ms, overrides=settings)
    # Refuse an out-of-range threshold before the lock: a refused schedule touches nothing. (A schedule that
    # follows the stream learns its threshold from the timeline, under the lock.)
    if threshold_ms is not None or not resolved.follows_stream:
        _threshold(resolved.strategy.value, new_instant_time(), threshold_ms, resolved.data_latency_ms.value)
    if preview:
        with logformat.scan_memo():
            return _schedule_locked(cfg, resolved, threshold_ms, settings, preview=True)
    with holding(table_lock_of(base_path, lock), f"schedule a compaction of {cfg.name}"), logformat.scan_memo():
        return _schedule_locked(cfg, resolved, threshold_ms, settings, preview=False)


def _schedule_locked(cfg: TableConfig, resolved: CompactionSettings, threshold_ms: int | None, settings: Mapping[str, str],
                     preview: bool) -> ScheduledPlan:
    """Trigger check through written plan, under the table lock so no write can slip in between."""
    base_path = cfg.base_path
    # The timeline's listing (the trigger's) and the table's in flight together: one round trip, where a schedule
    # the trigger refuses pays a LIST it did not need.
    ask_timeline_ahead(base_path)
    ask_listing_ahead(base_path)
    timeline = Timeline.load(base_path)
    # LAZY failed-writes policy: a dead writer never blocks. Under the table lock nothing else changes the
    # timeline, so it is listed again only when rollbacks did.
    if not preview and rollback.rollback_expired_writes(base_path, timeline=timeline):
        timeline = Timeline.load(base_path)
    strategy, carry_over, exact = resolved.strategy.value, resolved.carry_over.value, bool(resolved.exact.value)
    instant = new_instant_time(after=max((i.timestamp for i in timeline.instants), default=None))
    # Serial scheduling for every strategy: the RO guarantees below assume one compaction at a time.
    check_event_time_trigger(timeline, instant)
    # The checks before the plan is written in flight while it is planned (under the table lock when not a preview),
    # and the table's listing again if a rollback of expired writes made the one asked above stale.
    ask_listing_ahead(base_path, keep=True)
    if not preview:
        ask_timeline_ahead(base_path, (instant, COMPACTION, (State.INFLIGHT, State.COMPLETED)), listing=False)
    threshold_source = ARGUMENT if threshold_ms is not None else resolved.data_latency_ms.source
    if threshold_ms is None and resolved.follows_stream:
        threshold_ms = stream_threshold(timeline, int(resolved.stream_lateness_ms.value))
        if threshold_ms is None:
            return ScheduledPlan(None, None, settings=resolved, message=(
                f"nothing to compact: {STREAM_LATENESS_KEY} follows the table's stream, and no streaming commit "
                "on the active timeline records a watermark yet; no plan written"))
        threshold_source = STREAM
    threshold = _threshold(strategy, instant, threshold_ms, resolved.data_latency_ms.value)
    if exact and threshold is None:
        raise ConfigError("exact mode needs an event-time threshold (threshold_ms or a data latency)")
    strat = _make_strategy(cfg, strategy, threshold, settings)
    result = ScheduledPlan(instant, threshold, settings=resolved, threshold_source=threshold_source)
    if not (timeline.latest_schema() or cfg.props.get("hoodie.table.create.schema")):
        # Every write was rolled back: the logs left hold only masked blocks and rollback commands, and a
        # plan over them could never run (no schema to write a base file with).
        result.instant = None
        result.message = "nothing to compact: the table has no completed write; no plan written"
        return result
    view = FileSystemView(base_path, timeline)
    view.check_links()
    slices = [s for s in view.latest_slices() if s.log_files]
    refuse_logs_without_meta_fields(cfg, bool(slices), "a compaction")
    result.listings = view.remote_listings()
    times = resolve_log_event_times(view, timeline, slices, cfg=cfg)
    candidates = [_candidate(s, times) for s in slices]
    ops = strat.plan(candidates)
    _refuse_exact_partial(exact, ops)
    if not ops:
        result.instant = None
        bound = f"threshold {eventtime.iso(threshold)}" if threshold is not None else "no threshold"
        result.message = f"nothing to compact with strategy {strategy} ({bound}); no plan written"
        return result
    # Framing and content-prefix damage to committed blocks stops the plan here; a torn tail of a failed
    # write does not (engine.logformat.integrity). Execution catches what only a decode finds. On an object
    # store a log whose listed ETag is the MD5 its write recorded is byte for byte what that write committed:
    # not read (`unchanged_since_written`); its event times came from the write stats, so planning reads it not
    # at all, and the task that folds it reads it once.
    unchanged = unchanged_since_written(timeline, [(op.slice.partition_path, lf.path, lf.size)
                                                   for op in ops for lf in op.to_compact])
    folded = {lf.path: lf.size for op in ops for lf in op.to_compact   # sized by the listing: no HEAD on a store
              if lf.path not in unchanged}
    integrity.refuse_to_compact(folded, view.committed_instants, CommittedExtents(base_path, timeline), folded)
    if strategy == "event_time":
        result.projected_completion_ms = _projected(cfg, threshold, exact, ops, candidates)
    if carry_over == "symlink" and any(op.to_remain for op in ops) and not preview \
            and storage.supports_links(base_path):
        _check_symlinks(base_path)
    first_version = CARRY_FORWARD_VERSION + 1
    result.record = _plan_record([_operation(view, op, instant, first_version) for op in ops], strat, threshold,
                                 carry_over, exact, times, _settings_used(resolved, threshold, result.threshold_source))
    if preview:
        result.instant = None
        result.message = f"preview: compaction would cover {len(ops)} file group(s); nothing written"
        return result
    fault_point("schedule", "planned")
    ensure_held(f"writing compaction plan {instant}")
    create_requested(base_path, instant, COMPACTION, result.record.to_bytes())
    fault_point("schedule", "requested")
    result.written = True
    result.message = f"scheduled compaction {instant}: {len(ops)} file group(s)"
    return result


def _refuse_exact_partial(exact: bool, ops: list[PlannedOperation]) -> None:
    """Exact mode keeps each record after T out of the base and replays it later, reordered after the records it
    outlives; a partial-update record's effect depends on its place in the log, so it cannot be split so."""
    groups = [op.slice.file_id for op in ops if any(lf.partial for lf in op.slice.logs)]
    if exact and groups:
        raise ConfigError(f"exact mode cannot split partial-update log blocks (file group {groups[0]}"
                          f"{f' and {len(groups) - 1} more' if len(groups) > 1 else ''}); schedule without exact mode")


def _projected(cfg: TableConfig, threshold: int | None, exact: bool, ops: list[PlannedOperation],
               candidates: list[SliceCandidate]) -> int | None:
    planned = {(op.slice.partition_path, op.slice.file_id) for op in ops}
    untouched = [lf for c in candidates if (c.partition_path, c.file_id) not in planned for lf in c.logs]
    return projected_completion(threshold, exact, ops, untouched, previous_ro_times(cfg))


def previous_ro_times(cfg: TableConfig) -> tuple[int | None, int | None]:
    """(completion, freshness) the table publishes now, from hoodie.properties."""
    def as_int(value: str | None) -> int | None:
        return int(value) if value not in (None, "") else None

    return as_int(cfg.props.get(RO_COMPLETION_KEY)), as_int(cfg.props.get(RO_FRESHNESS_KEY))


def _settings_used(resolved: CompactionSettings, threshold: int | None, threshold_source: str | None) -> dict[str, Any]:
    used = {name: {"value": r.value, "source": r.source} for name, r in resolved.used().items()}
    used[THRESHOLD] = {"value": threshold, "source": threshold_source}
    return used


def stream_threshold(timeline: Timeline, lateness_ms: int) -> int | None:
    """The threshold a schedule following the stream plans up to: the stream's watermark minus the lateness
    (None: no streaming commit on the active timeline records a watermark)."""
    from engine.timeline.stream_checkpoint import latest_watermark

    watermark = latest_watermark(timeline)
    if watermark is None:
        return None
    # A watermark within the lateness of 1970 plans nothing older than the epoch, not an error.
    return max(watermark - lateness_ms, 0)


def _threshold(strategy: str, instant: str, threshold_ms: int | None, latency: int | None) -> int | None:
    """Explicit threshold, else instant − data latency (argument, else table setting when configured)."""
    if threshold_ms is not None:
        return int(threshold_ms)
    if latency is None:
        if strategy == "event_time":
            raise ConfigError("the event_time strategy needs a threshold: give one (--threshold, threshold=) or a "
                              "data latency (--data-latency, data_latency=), or set hoodie.compaction.event.time.data.latency on the table")
        return None
    if latency < 0:
        raise ConfigError(f"data latency must not be negative, got {latency} ms")
    return eventtime.check_threshold(instant_to_millis(instant) - int(latency),
                                     f"threshold (compaction instant {instant} minus data latency {latency} ms)")


def _make_strategy(cfg: TableConfig, name: str, threshold: int | None,
                   settings: Mapping[str, str]) -> CompactionStrategy:
    if name == "event_time":
        return strategy_for(name, threshold_ms=threshold)
    if name == "size":
        threshold_bytes = cfg.int_setting(SIZE_THRESHOLD_KEY, settings)
        return strategy_for(name, threshold_bytes=threshold_bytes,
                            target_io_mb=cfg.int_setting(TARGET_IO_KEY, settings))
    return strategy_for(name)


def _candidate(sl: FileSlice, times: Mapping[str, LogEventTime]) -> SliceCandidate:
    logs = tuple(LogCandidate(lf.name, lf.path, lf.version, lf.write_token, lf.size, times[lf.path].min_ms,
                              times[lf.path].max_ms, times[lf.path].source, times[lf.path].deletes,
                              times[lf.path].partial)
                 for lf in sl.log_files)
    base = sl.base_file
    return SliceCandidate(sl.partition_path, sl.file_id, sl.base_instant, base.name if base else None,
                          base.path if base else None, base.size if base else 0, logs)


def carry_target(view: FileSystemView, partition: str, log: LogCandidate) -> str:
    """Name (relative to the partition dir) of the real file behind a log: a carried link points at it."""
    if not storage.is_link(log.path):
        return log.name
    # Resolve both sides: a table opened through a symlinked path must still get links inside itself.
    pdir = os.path.realpath(view.partition_dir(partition))
    target = os.path.relpath(os.path.realpath(log.path), pdir)
    if target.startswith(".."):
        raise TidemarkError(f"{log.path} resolves outside its partition ({target}); carried-over logs must "
                            "stay inside the table")
    return target


def _operation(view: FileSystemView, op: PlannedOperation, instant: str, first_version: int) -> CompactionOperation:
    sl = op.slice
    links = tuple(SymlinkOperation(LogFileName(sl.file_id, instant, first_version + i, lf.write_token).name,
                                   carry_target(view, sl.partition_path, lf)) for i, lf in enumerate(op.to_remain))
    # What planning read of the logs' headers, so the run need not read the carried ones again: their records
    # matter only when a delete is among the operation's logs (file_group_task._following_items), and the commit takes
    # their event times from here.
    carried = CompactionOperation.carried_metrics(any(lf.has_deletes for lf in (*op.to_compact, *op.to_remain)),
                                                  [(lf.min_event_time, lf.max_event_time) for lf in op.to_remain])
    return CompactionOperation(partition_path=sl.partition_path, file_id=sl.file_id, base_instant=sl.base_instant,
                               data_file=sl.base_file_name, delta_files=tuple(lf.name for lf in op.to_compact),
                               carried=links, metrics={**(op.metrics or {}), **(carried if links else {})})


def _plan_record(operations: list[CompactionOperation], strat: CompactionStrategy, threshold: int | None,
                 carry_over: str, exact: bool, times: Mapping[str, LogEventTime],
                 settings_used: dict[str, Any]) -> CompactionPlanRecord:
    sources = Counter(t.source for t in times.values())
    settings = PlanSettings(threshold_ms=threshold, strategy=strat.name, carry_over=carry_over, exact=exact,
                            event_time_sources={s: sources.get(s, 0) for s in SOURCES},
                            settings_used=settings_used)
    return CompactionPlanRecord(operations=tuple(operations), settings=settings,
                                strategy_class=f"tidemark.{strat.name}", strategy_params=strat.params())


def _check_symlinks(base_path: str) -> None:
    """Symlink carry-over needs a file system that can symlink (object stores and HDFS by default cannot)."""
    probe_dir = os.path.join(base_path, ".hoodie", ".temp")
    os.makedirs(probe_dir, exist_ok=True)
    link = os.path.join(probe_dir, f".symlink-probe-{uuid.uuid4().hex}")
    try:
        os.symlink("hoodie.properties", link)
    except (OSError, NotImplementedError) as exc:
        raise TidemarkError(f"{base_path}: the file system cannot create symlinks ({exc}); "
                            "use carry_over='copy' (hoodie.compaction.carry.over.mode=copy)") from None
    finally:
        if os.path.lexists(link):
            os.unlink(link)
