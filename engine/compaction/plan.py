"""Scheduling a (partial) compaction: pick logs per slice, write `<C>.compaction.requested`.

The plan is a standard HoodieCompactionPlan (facts §3.3) listing, per slice, only the logs to merge in
`deltaFilePaths`, plus the RFC's `symlinkOperations`: the names under which the remaining logs are
carried into the new slice C (`.<fid>_<C>.log.<k>_<tok>`, k = 1.. in log order; k starts at 2 in
exact mode, where version 1 holds the records kept out of the base).
"""
from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from engine import avro_models, integrity
from engine.compaction.log_event_times import LogEventTime, resolve_log_event_times
from engine.compaction.strategy import (CompactionStrategy, LogCandidate, PlannedOperation, SliceCandidate,
                                        strategy_for)
from engine.compaction.trigger import check_event_time_trigger
from engine.errors import ConfigError, TidemarkError
from engine.fsview import FileSlice, FileSystemView
from engine.locking import table_lock
from engine.naming import LogFileName, instant_to_millis, new_instant_time
from engine.properties import TableConfig, load_table_config, validate_settings
from engine.timeline import COMPACTION, Timeline, create_requested

CARRY_OVER_MODES = ("symlink", "copy")
# Exact mode reserves log version 1 of slice C for the records kept out of the base.
EXACT_SPILL_VERSION = 1

X_THRESHOLD = "tidemark.threshold"
X_STRATEGY = "tidemark.strategy"
X_CARRY_OVER = "tidemark.carryOver"
X_EXACT = "tidemark.exact"
X_SOURCES = "tidemark.eventTimeSources"


@dataclass
class ScheduledPlan:
    instant: str | None            # None when nothing was scheduled (no instant exists on the timeline)
    threshold_ms: int | None
    operations: list[dict] = field(default_factory=list)
    plan: dict = field(default_factory=dict)
    written: bool = False          # False: nothing to compact, no plan file was written
    message: str = ""


def schedule_compaction(base_path: str, *, strategy: str | None = "event_time", threshold_ms: int | None = None,
                        data_latency_ms: int | None = None, carry_over: str | None = "symlink",
                        exact: bool | None = False, settings: Mapping[str, str] | None = None) -> ScheduledPlan:
    """Plan compaction C of `base_path` and write `C.compaction.requested` (unless there is nothing to do).

    `strategy`, `carry_over` and `exact` given as None come from the table settings
    (hoodie.compaction.strategy / .carry.over.mode / .exact.event.time).
    """
    for name, value in (("threshold_ms", threshold_ms), ("data_latency_ms", data_latency_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{name} must be an integer number of milliseconds, got {value!r}")
    cfg = load_table_config(base_path)
    settings = validate_settings(dict(settings or {}))
    if exact is None:
        exact = bool(cfg.setting("hoodie.compaction.exact.event.time", settings))
    strategy = strategy or str(cfg.setting("hoodie.compaction.strategy", settings))
    carry_over = carry_over or str(cfg.setting("hoodie.compaction.carry.over.mode", settings))
    if carry_over not in CARRY_OVER_MODES:
        raise ConfigError(f"unknown carry-over mode {carry_over!r}; use symlink or copy")
    with table_lock(base_path, f"schedule a compaction of {cfg.name}"):
        return _schedule_locked(cfg, strategy, threshold_ms, data_latency_ms, carry_over, exact, settings)


def _schedule_locked(cfg, strategy: str, threshold_ms: int | None, data_latency_ms: int | None,
                     carry_over: str, exact: bool, settings: Mapping[str, str]) -> ScheduledPlan:
    """Trigger check through written plan, under the table lock so no write can slip in between."""
    base_path = cfg.base_path
    timeline = Timeline.load(base_path)
    instant = new_instant_time(after=max((i.timestamp for i in timeline.instants), default=None))
    # Serial scheduling for every strategy: the RO guarantees below assume one compaction at a time.
    check_event_time_trigger(timeline, instant)
    threshold = _threshold(cfg, strategy, instant, threshold_ms, data_latency_ms, settings)
    if exact and threshold is None:
        raise ConfigError("exact mode needs an event-time threshold (threshold_ms or a data latency)")
    strat = _make_strategy(cfg, strategy, threshold, settings)
    view = FileSystemView(base_path, timeline)
    view.check_links()
    slices = [s for s in view.latest_slices() if s.log_files]
    times = resolve_log_event_times(view, timeline, slices, cfg=cfg)
    ops = strat.plan([_candidate(s, times) for s in slices])
    result = ScheduledPlan(instant, threshold)
    if not ops:
        result.instant = None
        result.message = f"nothing to compact with strategy {strategy} (threshold {threshold}); no plan written"
        return result
    integrity.refuse_to_compact(lf.path for op in ops for lf in op.to_compact)
    if carry_over == "symlink" and any(op.to_remain for op in ops):
        _check_symlinks(base_path)
    first_version = EXACT_SPILL_VERSION + 1 if exact else 1
    result.operations = [_operation(view, op, instant, first_version) for op in ops]
    result.plan = _plan_record(result.operations, strat, threshold, carry_over, exact, times)
    create_requested(base_path, instant, COMPACTION, avro_models.write_compaction_plan(result.plan))
    result.written = True
    result.message = f"scheduled compaction {instant}: {len(ops)} file group(s)"
    return result


def _threshold(cfg: TableConfig, strategy: str, instant: str, threshold_ms: int | None,
               data_latency_ms: int | None, settings: Mapping[str, str]) -> int | None:
    """Explicit threshold, else instant − data latency (argument, else table setting when configured)."""
    if threshold_ms is not None:
        return int(threshold_ms)
    latency = data_latency_ms
    if latency is None and (settings.get("hoodie.compaction.event.time.data.latency")
                            or cfg.props.get("hoodie.compaction.event.time.data.latency")):
        latency = int(cfg.setting("hoodie.compaction.event.time.data.latency", settings))
    if latency is None:
        if strategy == "event_time":
            raise ConfigError("the event_time strategy needs a threshold: pass threshold_ms or data_latency_ms, "
                              "or set hoodie.compaction.event.time.data.latency on the table")
        return None
    if latency < 0:
        raise ConfigError(f"data latency must not be negative, got {latency} ms")
    return instant_to_millis(instant) - int(latency)


def _make_strategy(cfg: TableConfig, name: str, threshold: int | None,
                   settings: Mapping[str, str]) -> CompactionStrategy:
    if name == "event_time":
        return strategy_for(name, threshold_ms=threshold)
    if name == "size":
        threshold_bytes = int(cfg.setting("hoodie.compaction.logfile.size.threshold", settings))
        return strategy_for(name, threshold_bytes=threshold_bytes,
                            target_io_mb=int(cfg.setting("hoodie.compaction.target.io", settings)))
    return strategy_for(name)


def _candidate(sl: FileSlice, times: Mapping[str, LogEventTime]) -> SliceCandidate:
    logs = tuple(LogCandidate(lf.name, lf.path, lf.version, lf.write_token, lf.size, times[lf.path].min_ms,
                              times[lf.path].max_ms, times[lf.path].source) for lf in sl.log_files)
    base = sl.base_file
    return SliceCandidate(sl.partition_path, sl.file_id, sl.base_instant, base.name if base else None,
                          base.path if base else None, base.size if base else 0, logs)


def carry_target(view: FileSystemView, partition: str, log: LogCandidate) -> str:
    """Name (relative to the partition dir) of the real file behind a log: a carried link points at it."""
    if not os.path.islink(log.path):
        return log.name
    # Resolve both sides: a table opened through a symlinked path must still get links inside itself.
    pdir = os.path.realpath(view.partition_dir(partition))
    target = os.path.relpath(os.path.realpath(log.path), pdir)
    if target.startswith(".."):
        raise TidemarkError(f"{log.path} resolves outside its partition ({target}); carried-over logs must "
                            "stay inside the table")
    return target


def _operation(view: FileSystemView, op: PlannedOperation, instant: str, first_version: int) -> dict:
    sl = op.slice
    links = [(LogFileName(sl.file_id, instant, first_version + i, lf.write_token).name,
              carry_target(view, sl.partition_path, lf)) for i, lf in enumerate(op.to_remain)]
    return avro_models.compaction_operation(
        base_instant=sl.base_instant, file_id=sl.file_id, partition_path=sl.partition_path,
        delta_file_names=[lf.name for lf in op.to_compact], data_file_name=sl.base_file_name,
        metrics=op.metrics, symlink_operations=links)


def _plan_record(operations: list[dict], strat: CompactionStrategy, threshold: int | None, carry_over: str,
                 exact: bool, times: Mapping[str, LogEventTime]) -> dict:
    sources = Counter(t.source for t in times.values())
    extra = {
        X_THRESHOLD: "" if threshold is None else str(threshold),
        X_STRATEGY: strat.name,
        X_CARRY_OVER: carry_over,
        X_EXACT: "true" if exact else "false",
        X_SOURCES: json.dumps({s: sources.get(s, 0) for s in ("header", "write_stats", "decoded", "none")}),
    }
    return {
        "operations": operations,
        "extraMetadata": extra,
        "strategy": {"compactorClassName": f"tidemark.{strat.name}", "strategyParams": strat.params(),
                     "version": 1},
        "preserveHoodieMetadata": True,
        "missingSchedulePartitions": None,
    }


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
