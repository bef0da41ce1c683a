"""Executing a compaction plan on Spark: new base files, carried-over logs, `<C>.commit`.

Driver: pick the pending plan, move it to inflight, ship one small picklable `OpTask` per operation to
the executors, then commit the write stats and publish the RO completion/freshness times.
Executors: stream the old base batch by batch against the merged winners of the chosen logs, write the
new base `<fid>_<token>_<C>.parquet` (`.lance` in a Lance table: engine.io.base_format) incrementally (temp
file under `.hoodie/.temp/<C>/`, then rename), and carry the remaining logs into slice C (symlink or byte
copy). Every step is idempotent, so a crashed run is finished by simply running it again.
A log to fold that holds a corrupt block of a committed instant stops the run with CorruptLogBlockError before
anything is written for it: checked from headers on the driver, and by each executor's decode (the only place
flipped bytes deep inside a block show); nothing is committed or published, and the run rolls its own plan back
so a plan that cannot run never blocks scheduling and cleaning (unless writes already went into its slice: then
the plan stays, and the error says why). The error names each damaged file and offset.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import filecmp
import itertools
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import logformat, placement
from engine.compaction import in_process
from engine.compaction.base_stream import stream_base
from engine.compaction.carry_forward import (
    SliceSplit,
    SplitSpec,
    base_ordering_reader,
    base_twice_reader,
    carried_rows,
    split_slice,
)
from engine.compaction.freshness_math import compute_ro_times
from engine.compaction.log_event_times import (
    LogEventTime,
    event_time_column,
    resolve_log_event_times,
    unchanged_since_written,
)
from engine.compaction.plan import previous_ro_times
from engine.config import eventtime
from engine.config.properties import (
    EVENT_TIME_ORDERING,
    PROPERTIES_FILE,
    RO_COMPLETION_KEY,
    RO_FRESHNESS_KEY,
    RO_INSTANT_KEY,
    RO_THRESHOLD_KEY,
    TableConfig,
    load_table_config,
    save_table_config,
)
from engine.config.schema import schema_with_meta, table_read_schema
from engine.errors import LOCK_UNAVAILABLE, Cancelled, CorruptLogBlockError, Refused, TidemarkError
from engine.io import base_format, storage
from engine.io.arrow_pool import use_streaming_pool
from engine.io.faults import fault_point
from engine.io.locking import LOCK_FILE
from engine.io.naming import CARRY_FORWARD_VERSION, LogFileName, parse_base_file_name, parse_log_file_name
from engine.io.threads import requests_pool, settle
from engine.lock import (
    FileLock,
    TableLock,
    compaction_run_lock,
    ensure_held,
    holding,
    host_lock_held,
    table_lock_of,
)
from engine.logformat import integrity
from engine.progress import Progress, Stopped, counted
from engine.read.merge import BaseMerge, DataItem, DeleteItem, LogItem, LogWinners, conform_to_schema
from engine.read.slice_reader import read_slice_logs
from engine.results import CompactionResult, from_ms
from engine.services.rollback import rollback_locked
from engine.slices.fsview import FileSystemView, ask_listing_ahead
from engine.slices.groups import FileSlice, LogFile
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import (
    COMPACTION,
    Instant,
    State,
    Timeline,
    commit_metadata_json,
    complete,
    completed_file,
    transition_to_inflight,
)
from engine.timeline.instants import ask_ahead as ask_timeline_ahead
from engine.timeline.metadata import CarriedEntry, CompactionPlanRecord, WriteStat, compaction_commit_extra
from engine.worker_gc import task_finished

if TYPE_CHECKING:
    from pyspark import Accumulator, SparkContext
    from pyspark.sql import SparkSession

FILE_NAME_COL = "_hoodie_file_name"


class CompactionError(TidemarkError):
    """A compaction could not run or commit; the plan stays pending (re-run or roll it back)."""


@dataclass(frozen=True)
class OpTask:
    """One compaction operation, as shipped to an executor (small, picklable)."""

    base_path: str
    instant: str
    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None                # absolute path of the old base
    log_paths: tuple[str, ...]           # the chosen prefix, in log order
    links: tuple[tuple[str, str], ...]   # (new name in slice C, target name), in log order
    carry_mode: str
    exact: bool
    threshold_ms: int | None
    schema: pa.Schema                    # read schema, meta fields first
    log_avro_schema: str                 # schema_with_meta JSON for the exact-mode spill log
    # The spill log's data blocks are in the table's block format (hoodie.logfile.data.block.format), as its
    # writes' are: readers that take Parquet blocks and not some Avro ones (hudi 0.5.0: nested timestamps) can
    # still read the table after an exact compaction.
    block_format: str
    merge_mode: str
    ordering_field: str | None
    event_field: str | None
    committed: frozenset[str]
    row_group_rows: int
    compression: str
    base_ext: str = base_format.PARQUET   # the table's base file format (hoodie.table.base.file.format)
    delete_bounds: tuple[tuple[str, int | None, int | None], ...] = ()   # (instant, min, max) of its deletes
    extents: CommittedExtents | None = None   # of log_paths, built if one is damaged
    log_sizes: tuple[int, ...] = ()      # of log_paths, from the driver's listing (no HEAD per log on a store)
    # Completed instants when the run started: the carried logs' blocks are all older (the trigger refused
    # plans over pending writes), so only logs written into slice C since make a task reload the timeline.
    completed: frozenset[str] = frozenset()
    base_size: int = 0                   # bytes of the old base, from the listing (task balancing)
    carried_needed: bool = True          # the plan's word on its carried logs (CompactionOperation)
    carried_read: int = 0                # bytes of the carried logs the task will read whole (_logs_read_whole)
    partition_files: int = 0             # files in the partition, by the driver's listing (0: unknown)
    # On an object store, the group's files in its partition (name, size) by the run's listing, taken before the
    # plan went inflight: what a first attempt would find with a LIST of its own (below `_listing_ahead`).
    listed: tuple[tuple[str, int], ...] | None = None

    @property
    def weight(self) -> int:
        """Bytes this operation reads: what its run time follows, to start the longest first (and, summed, what
        decides whether a run fits in this process)."""
        return self.base_size + sum(self.log_sizes) + self.carried_read


# ------------------------------------------------------------------------------------------- driver

def run_compaction(base_path: str, instant: str | None = None, spark: SparkSession | None = None,
                   lock: TableLock | None = None,
                   on_progress: Progress | None = None,
                   should_stop: Callable[[], bool] | None = None,
                   local: bool | None = None) -> CompactionResult:
    """Execute the single pending compaction (or `instant`) and commit it.

    One run at a time per table (the compaction lock): two runs of one plan would delete each other's
    base files. Writers are not blocked: they go to slice C meanwhile. The file groups run on `spark` when
    given, else where `engine.placement.compaction_in_process` says (`local`: the caller's choice).
    """
    with compaction_run_lock(base_path, "run a compaction"), \
            (holding(lock, "run a compaction") if lock is not None else contextlib.nullcontext()):
        return _run_locked(base_path, instant, spark, on_progress, should_stop, lock, local)


def _run_locked(base_path: str, instant: str | None, spark: SparkSession | None, on_progress: Progress | None,
                should_stop: Callable[[], bool] | None = None, lock: TableLock | None = None,
                local: bool | None = None) -> CompactionResult:
    # Under the compaction lock: the timeline's listing, the run's listing of the table and (a plan named) the
    # checks of its move to inflight in flight together.
    ask_timeline_ahead(base_path, (instant, COMPACTION, (State.REQUESTED, State.COMPLETED)) if instant else None)
    ask_listing_ahead(base_path)
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    pending = _pick(timeline, instant)
    c = pending.timestamp
    plan = timeline.compaction_plan(c)
    tasks = _tasks(cfg, timeline, c, plan)
    try:
        _check_logs(timeline, tasks)
    except CorruptLogBlockError as exc:
        raise _give_up(base_path, c, lock, f"compaction {c} not run: {exc}", pending.state.value) from None
    # Decided before the plan goes inflight: a bad size limit setting refuses the run with nothing changed.
    here = spark is None and placement.compaction_in_process(sum(t.weight for t in tasks), local,
                                                                 placement.spark_running())
    if pending.state is State.REQUESTED:
        transition_to_inflight(base_path, c, COMPACTION)
    fault_point("execute", "inflight")
    if spark is None and not here:
        from engine.spark import get_spark

        spark = get_spark()
    try:
        if spark is None:
            outs = in_process.run_here(tasks, balanced_order(tasks), execute_operation, on_progress, should_stop,
                                       "file groups", REMOTE_GROUPS_PER_CPU if storage.is_remote(base_path) else 1)
        else:
            outs = _execute_all(spark.sparkContext, tasks, on_progress, should_stop)
    except Stopped as stopped:
        _roll_back_cancelled(base_path, c, lock)
        raise Cancelled(c, f"compaction {c} cancelled after {stopped.done} of {len(tasks)} file groups; its plan "
                           "was rolled back and nothing was committed") from None
    except Exception as exc:  # noqa: BLE001 - any executor failure leaves the plan inflight, re-runnable
        # A run whose lock was taken over fails its tasks on the other run's files: say that, not "failed".
        ensure_held(f"committing compaction {c} (its file groups ran into another run's files: {exc})"
                    if isinstance(exc, CompactionTakenOver) else f"committing compaction {c}")
        found = integrity.found_in(exc)
        if found is not None:
            raise _give_up(base_path, c, lock, f"compaction {c} failed, nothing was committed: {found}",
                           "inflight") from None
        raise CompactionError(f"compaction {c} failed ({exc}); it is still inflight: run it again, or roll it "
                              f"back (tidemark rollback --instant {c}, or Table.rollback)") from exc
    fault_point("execute", "tasks")
    if cfg.merge_mode != EVENT_TIME_ORDERING:
        ask_timeline_ahead(base_path, (c, COMPACTION, (State.INFLIGHT,)))
        return _commit(cfg, Timeline.load(base_path), c, plan, tasks, outs)
    still = (f"it is still inflight: run it again, or roll it back (tidemark rollback --instant {c}, or "
             "Table.rollback)")
    try:
        # Writers of this host hold the table's file lock for their whole write: held from the check below
        # through the publish, no write lands in slice C unseen.
        with _writers_kept_out(base_path, lock, c):
            ask_timeline_ahead(base_path, (c, COMPACTION, (State.INFLIGHT,)))
            ask_listing_ahead(base_path)
            if plan.promises_threshold:   # the read of hoodie.properties its update starts with, in flight too
                storage.ask_ahead(reads=[storage.join(cfg.hoodie_dir(), PROPERTIES_FILE)])
            timeline = Timeline.load(base_path)
            view = FileSystemView(base_path, timeline)   # the commit's one listing of the table, taken now
            try:
                again = _redo_after_late_writes(view, timeline, tasks, outs)
            except Exception as exc:  # noqa: BLE001 - as a failed task: nothing committed, the plan re-runnable
                raise CompactionError(f"compaction {c}: running again the file groups written into while it ran "
                                      f"failed ({exc}); {still}") from exc
            if again:
                view = FileSystemView(base_path, timeline)   # groups ran again: their new files
            return _commit(cfg, timeline, c, plan, tasks, outs, view)
    except Refused as refused:
        if refused.reason != LOCK_UNAVAILABLE:
            raise
        raise Refused(LOCK_UNAVAILABLE, f"compaction {c} ran but was not committed: {refused.message}; {still}",
                      refused.blocking_instant) from None


def _writers_kept_out(base_path: str, lock: TableLock | None, c: str) -> contextlib.AbstractContextManager[Any]:
    """The table's file lock, which every writer on this host takes for its whole write (a caller's database
    lease keeps out only the control plane's writers); nothing more when the caller's lock is that very lock."""
    if isinstance(lock, FileLock) and lock.lock_file == LOCK_FILE or host_lock_held(base_path):
        return contextlib.nullcontext()   # a caller's table FileLock is this table's, held (another spelling too)
    return holding(FileLock(base_path), f"commit compaction {c}")


def _redo_after_late_writes(view: FileSystemView, timeline: Timeline, tasks: list[OpTask],
                            outs: list[dict[str, Any]]) -> bool:
    """Writers are not blocked while C runs: their logs go to slice C, after the base a task wrote. Under
    event-time ordering such a log can change what that base must hold — a record of lower ordering than a
    delete the task applied would otherwise come back to life once C completes, and after a delete in slice C
    a record meets the old base row, not the one the task folded in — so a group whose slice-C logs now hold
    committed blocks its task did not read (a log it never listed, or a write that completed after it read
    the timeline) runs again here, on the driver, under the table lock: when it replays (a folded delete, or
    one the plan recorded in a carried log, or a folded partial update) or when any of those logs holds a delete
    or a partial update (carry_forward: withheld against what follows). One listing per partition
    (on a store the view's one listing of the table, which the commit goes on with) and the headers of the
    groups' slice-C logs; nothing is read where no write came. Whether a group ran again."""
    completed = frozenset(i.timestamp for i in timeline.completed())
    listed: dict[str, list[storage.Entry]] = {}
    again = False
    for i, task in enumerate(tasks):
        pdir = view.partition_dir(task.partition_path)
        names = _written_logs(task, [e.name for e in _partition_entries(view, task.partition_path, listed)])
        if not names:
            continue
        read_as_committed = task.completed | frozenset(outs[i]["committed"])
        seen = set(outs[i]["written"])
        scans = logformat.scan_log_files((storage.join(pdir, n), None) for n in names)
        blocks = [(n, b) for n in names for b in scans[storage.join(pdir, n)].blocks if b.instant_time in completed]
        unread = any(n not in seen or b.instant_time not in read_as_committed for n, b in blocks)
        matters = any(b.block_type == logformat.BlockType.DELETE or b.is_partial for _, b in blocks)
        if unread and (outs[i]["replays"] or matters):
            outs[i] = execute_operation(dataclasses.replace(task, listed=None, completed=frozenset()))
            again = True
    return again


# File groups in flight per CPU when an in-process run compacts an object-store table: a group waits a round trip
# for its first log and another for its base file's upload, which another group's decode and merge fill (the
# plan is small: `engine.placement` sends big ones to Spark).
REMOTE_GROUPS_PER_CPU = 2


def _check_logs(timeline: Timeline, tasks: list[OpTask]) -> None:
    """Damage to committed blocks that appeared after planning and shows from headers: stop before anything
    changes (the plan is not even moved to inflight). An object-store log its listing shows byte for byte as
    its write committed it (`unchanged_since_written`) has none to show and is not read here."""
    sized = [(t.partition_path, p, s) for t in tasks for p, s in zip(t.log_paths, t.log_sizes)]
    unchanged = unchanged_since_written(timeline, sized)
    with logformat.scan_memo():
        # every task's logs scanned together (in parallel on a store), then judged task by task
        logformat.scan_log_files((p, s) for t in tasks for p, s in itertools.zip_longest(t.log_paths, t.log_sizes)
                                 if p not in unchanged)
        for task in tasks:
            sizes = dict(zip(task.log_paths, task.log_sizes))   # from the listing: no HEAD per log on a store
            paths = [p for p in task.log_paths if p not in unchanged]
            bad = integrity.scan_corruption(paths, task.committed, task.extents, sizes).committed
            if bad:
                raise integrity.corrupt_error(bad, "refusing to fold", "")


def _give_up(base_path: str, c: str, lock: TableLock | None, what: str, state: str) -> CorruptLogBlockError:
    """A plan that folds a damaged log can never run: roll it back (the run holds the compaction lock; the
    table lock is the caller's, already held, or the table's file lock, taken here) so scheduling and cleaning
    go on, and the damaged log stays untouched for repair. Refused (writes went into slice C, which a rollback
    would orphan), the plan stays and the error says so."""
    what = what.rstrip(". ")
    try:
        with _table_lock_again(base_path, lock, f"roll back compaction {c}"):
            rollback_locked(base_path, c)
    except Refused as exc:
        return CorruptLogBlockError(
            f"{what}. Compaction {c} stays {state}: it cannot be rolled back ({exc}). Repair or remove the "
            "blocks, then run it again.")
    return CorruptLogBlockError(
        f"{what}. Compaction {c} was rolled back, so the table can be scheduled and cleaned again; the damaged "
        "log is untouched: repair or remove the blocks, then schedule again.")


def _roll_back_cancelled(base_path: str, c: str, lock: TableLock | None) -> None:
    """Undo a cancelled run's plan (base files written so far included) under the table lock; the
    compaction lock is ours already, so no other run of the plan can be writing."""
    with _table_lock_again(base_path, lock, f"roll back cancelled compaction {c}"):
        rollback_locked(base_path, c)


def _table_lock_again(base_path: str, lock: TableLock | None, purpose: str) -> contextlib.AbstractContextManager[Any]:
    """The table lock for a step of a run that holds the caller's lock: a lease again (re-entrant) with this host's
    file lock (CallerAndHostLock), nothing more for a caller's FileLock (held, and not re-entrant), the table's
    file lock when the caller gave none."""
    if isinstance(lock, FileLock):
        return contextlib.nullcontext()
    return holding(table_lock_of(base_path, lock), purpose)


def _execute_all(sc: SparkContext, tasks: list[OpTask], on_progress: Progress | None,
                 should_stop: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """The file groups as Spark tasks (`spark_bundles`: small ones share a task, on threads of its Python worker);
    each finished group counts towards the progress. Outputs come back in the plan's order."""
    if not tasks:
        return []
    bundles = spark_bundles(tasks, sc.defaultParallelism)
    slots = {i: slot for slot, i in enumerate(balanced_order(tasks))}
    threads = shared_task_threads(tasks[0].base_path)

    def run(acc: Accumulator[int]) -> list[list[dict[str, Any]]]:
        def bundle(groups: list[tuple[int, OpTask]]) -> list[dict[str, Any]]:
            use_streaming_pool()   # a Spark worker's pool (an in-process run keeps its caller's)
            try:
                outs = in_process.on_threads(groups, lambda g: _execute_in_slot(*g), threads)
            finally:
                task_finished()
            # Spark reports a task's accumulator updates when it ends (and drops a failed task's): the task's groups
            # count then, added once (Accumulator.add is not safe from several threads)
            acc.add(len(outs))
            return outs

        outs: list[list[dict[str, Any]]] = sc.parallelize([[(slots[i], tasks[i]) for i in b] for b in bundles],
                                                          len(bundles)).map(bundle).collect()
        return outs

    per_bundle = counted(sc, run, on_progress, len(tasks), "file groups", should_stop)
    in_plan_order: list[dict[str, Any]] = [{}] * len(tasks)
    for b, outs in zip(bundles, per_bundle):
        for i, out in zip(b, outs):
            in_plan_order[i] = out
    return in_plan_order


# A Spark task costs some 40-60 ms besides its work (scheduling, the Python worker's round trips with the JVM): more
# than a small file group's whole compaction. Small groups therefore share tasks, as few as hold them at
# SHARED_TASK_BYTES each but one per core at least, `shared_task_threads` of a task's groups at a time (one's waits
# overlap another's decode and merge). Bigger groups keep a task each: the task's cost is small beside theirs, and
# two in one worker would double its memory.
SHARED_TASK_BYTES = 32 * 1024 * 1024
THREADS_PER_SHARED_TASK = 2
# On an object store a group waits some four round trips (its logs' GETs, then the base's upload with the carried
# logs' copies): with two groups in flight per core the core idled through them (measured with 20 ms per request:
# the executors' phase 0.89 s with two, 0.74 s with four, no better with eight).
REMOTE_THREADS_PER_SHARED_TASK = 4


def shared_task_threads(base_path: str) -> int:
    """How many of a shared Spark task's file groups run at a time."""
    return REMOTE_THREADS_PER_SHARED_TASK if storage.is_remote(base_path) else THREADS_PER_SHARED_TASK


def spark_bundles(tasks: list[OpTask], cores: int) -> list[list[int]]:
    """Indexes of `tasks` as the Spark tasks that run them, heaviest first (`balanced_order`): Spark starts a
    stage's tasks in partition order, so with more tasks than cores the small ones fill in at the end instead of one
    big group running alone while the other cores idle (longest-processing-time-first). Groups reading at most
    SHARED_TASK_BYTES are dealt, heaviest first, to the least loaded of the shared tasks."""
    order = balanced_order(tasks)
    alone = [[i] for i in order if tasks[i].weight > SHARED_TASK_BYTES]
    small = [i for i in order if tasks[i].weight <= SHARED_TASK_BYTES]
    if not small:
        return alone
    needed = -(-sum(tasks[i].weight for i in small) // SHARED_TASK_BYTES)
    shared: list[list[int]] = [[] for _ in range(min(len(small), max(cores, needed)))]
    loads = [0] * len(shared)
    for i in small:
        k = loads.index(min(loads))
        shared[k].append(i)
        loads[k] += tasks[i].weight
    return alone + shared


def balanced_order(tasks: list[OpTask]) -> list[int]:
    """Indexes of `tasks`, heaviest first (ties keep the plan's order)."""
    return sorted(range(len(tasks)), key=lambda i: -tasks[i].weight)


def _pick(timeline: Timeline, instant: str | None) -> Instant:
    pending = timeline.pending_compactions()
    if instant is not None:
        match = [i for i in pending if i.timestamp == instant]
        if not match:
            done = timeline.is_completed(instant)
            raise CompactionError(f"compaction {instant} is {'already completed' if done else 'not pending'}")
        return match[0]
    if not pending:
        raise CompactionError(f"{timeline.base_path}: no pending compaction to run")
    if len(pending) > 1:
        names = ", ".join(i.timestamp for i in pending)
        raise CompactionError(f"several compactions are pending ({names}); name the one to run")
    return pending[0]


def _tasks(cfg: TableConfig, timeline: Timeline, c: str, plan: CompactionPlanRecord) -> list[OpTask]:
    schema = table_read_schema(cfg, timeline.latest_schema())
    view = FileSystemView(cfg.base_path, timeline)
    # Plan-time committed instants: all writes before C (the trigger refused pending ones).
    committed = view.committed_instants.before(c)
    avro = json.dumps(schema_with_meta(json.loads(timeline.latest_schema() or cfg.props["hoodie.table.create.schema"])))
    bounds = _delete_event_bounds(timeline) if plan.is_exact else {}
    extents = CommittedExtents(cfg.base_path, timeline)
    completed = frozenset(timeline.completed_timestamps())
    sizes = {lf.path: lf.size for g in view.all_file_groups() for s in g.slices for lf in s.log_files}
    base_sizes = {s.base_file.path: s.base_file.size for g in view.all_file_groups() for s in g.slices if s.base_file}
    out = []
    for op in plan.operations:
        part = op.partition_path
        pdir = view.partition_dir(part)
        base = storage.join(pdir, op.data_file) if op.data_file else None
        log_paths = tuple(storage.join(pdir, n) for n in op.delta_files)
        out.append(OpTask(
            base_path=cfg.base_path, instant=c, partition_path=part, file_id=op.file_id,
            base_instant=op.base_instant, base_file=base,
            log_paths=log_paths, log_sizes=tuple(sizes[p] for p in log_paths) if all(p in sizes for p in log_paths)
            else (),
            links=tuple((s.symlink, s.target) for s in op.carried),
            carry_mode=plan.settings.carry_over or "symlink", exact=plan.is_exact,
            threshold_ms=plan.settings.threshold_ms, schema=schema, log_avro_schema=avro,
            block_format=cfg.str_setting("hoodie.logfile.data.block.format"),
            merge_mode=cfg.merge_mode, ordering_field=cfg.ordering_field, event_field=event_time_column(cfg),
            committed=committed, row_group_rows=cfg.int_setting("hoodie.parquet.max.row.group.rows"),
            compression=cfg.str_setting("hoodie.parquet.compression.codec"),
            base_ext=base_format.table_extension(cfg.props),
            delete_bounds=tuple(bounds.get((part, op.file_id), ())),
            extents=extents, completed=completed, base_size=base_sizes.get(base, 0) if base else 0,
            carried_needed=op.carried_needed, partition_files=len(view.remote_entries(part) or ()),
            listed=_group_files(view.remote_entries(part), op.file_id),
            carried_read=sum(sizes.get(storage.join(pdir, s.target), 0) for s in op.carried)
            if cfg.merge_mode == EVENT_TIME_ORDERING and op.carried_needed else 0))
    return out


def _group_files(entries: list[storage.Entry] | None, file_id: str) -> tuple[tuple[str, int], ...] | None:
    """The files of group `file_id` among a partition's listed entries: its base files (`<fid>_...`) and logs
    (`.<fid>_...`), every name a task asks its listing about. None when the partition was not listed (local)."""
    if entries is None:
        return None
    return tuple((e.name, e.size) for e in entries
                 if not e.is_dir and (e.name.startswith(f"{file_id}_") or e.name.startswith(f".{file_id}_")))


def _delete_event_bounds(timeline: Timeline) -> dict[tuple[str, str], list[tuple[str, int | None, int | None]]]:
    """(partition, file id) -> (instant, min, max event time) of each deltacommit that deleted in the group:
    exact mode tells a delete's event time from its write when the delete itself does not carry it."""
    out: dict[tuple[str, str], list[tuple[str, int | None, int | None]]] = {}
    for inst in timeline.completed():
        if inst.action != "deltacommit":
            continue
        for stat in timeline.commit_metadata(inst).write_stats:
            if stat.num_deletes and stat.file_id:
                out.setdefault(stat.key, []).append((inst.timestamp, stat.min_event_time, stat.max_event_time))
    return out


def _commit(cfg: TableConfig, timeline: Timeline, c: str, plan: CompactionPlanRecord, tasks: list[OpTask],
            outs: list[dict[str, Any]], view: FileSystemView | None = None) -> CompactionResult:
    threshold = plan.settings.threshold_ms
    by_partition: dict[str, list[dict[str, Any]]] = {}
    stats: list[dict[str, Any]] = []
    carry_over: list[dict[str, Any]] = []
    spill_logs: list[str] = []
    for out in outs:
        by_partition.setdefault(out["stat"]["partitionPath"], []).append(out["stat"])
        stats.append(out["stat"])
        carry_over.extend(out["carry"])
        if out.get("spill"):
            spill_logs.append(out["spill"])
    compacted_max = max((o["stat"]["maxEventTime"] for o in outs if o["stat"]["maxEventTime"] is not None),
                        default=None)
    previous = previous_ro_times(cfg)
    # A carry-forward log is judged by what its executor carried, not by its blocks: the deletes it
    # replays are already in the base, only its late records (and withheld winners) are not.
    remaining = _remaining_log_mins(cfg, timeline, c, tasks, plan, view) + [o["carry_min"] for o in outs
                                                                 if o.get("spill") and o.get("carry_min") is not None]
    # Only the event-time strategy promises T: a size or unbounded plan with a threshold (e.g. from the
    # table's data latency) may leave older data in logs of slices it did not pick.
    promised = threshold if plan.promises_threshold else None
    completion, freshness = compute_ro_times(plan.completion_floor, remaining, compacted_max, previous)
    settings = plan.settings
    if promised is not None and plan.settings.unscheduled:
        # File groups were unscheduled from the plan: their logs at or before T stay outside the base, so the
        # promise is what the logs left allow (readers take max(threshold, completion) as the guarantee).
        promised = min(promised, completion) if completion is not None else None
        settings = dataclasses.replace(settings, threshold_ms=promised)
    meta_extra = compaction_commit_extra(settings, [CarriedEntry.from_json(e) for e in carry_over],
                                         completion, freshness)
    schema = timeline.latest_schema() or cfg.props.get("hoodie.table.create.schema", "")
    ensure_held(f"committing compaction {c}")
    complete(cfg.base_path, c, COMPACTION, commit_metadata_json(by_partition, schema=schema, operation_type="COMPACT",
                                                                compacted=True, extra=meta_extra))
    fault_point("execute", "completed")
    # C's temp folder is garbage once C completed: on a store its LIST and DELETEs go while the RO times publish
    # (hoodie.properties' backup protocol: four requests one after another), not after them.
    with _removing_ahead(storage.join(cfg.base_path, ".hoodie", ".temp", c)):
        if promised is not None:  # only an event-time compaction sets the table's published guarantee
            _publish(cfg.base_path, c, promised, completion, freshness)
        fault_point("execute", "published")
    return CompactionResult(instant=c, threshold=from_ms(threshold), base_files=[s["path"] for s in stats],
                            records_written=sum(s["numWrites"] for s in stats), logs_carried_over=len(carry_over),
                            spill_logs=spill_logs, ro_completion_time=from_ms(completion),
                            ro_freshness_time=from_ms(freshness))


def _remaining_log_mins(cfg: TableConfig, timeline: Timeline, c: str, tasks: list[OpTask],
                        plan: CompactionPlanRecord, view: FileSystemView | None = None) -> list[int | None]:
    """Min event times of the logs left in the latest slices once C completes. Carried logs are not read when
    the plan recorded their times (from their headers, when planning: a copy has the same blocks)."""
    view = view or FileSystemView(cfg.base_path, timeline)
    compacted = {(t.partition_path, t.file_id) for t in tasks}
    slices = [s for s in view.latest_slices() if (s.partition_path, s.file_id) not in compacted and s.log_files]
    aliases = {}
    listings: dict[str, list[storage.Entry]] = {}   # one listing per partition, not one per file group
    planned = {(op.partition_path, link): lo_hi for op in plan.operations
               for link, lo_hi in op.carried_event_times.items()}
    given = {}
    for t in tasks:
        sl = _slice_c_logs(view, t.partition_path, t.file_id, c, listings)
        slices.append(sl)
        aliases.update({(t.partition_path, link): target for link, target in t.links})
        for lf in sl.log_files:
            if (t.partition_path, lf.name) in planned:
                lo, hi = planned[(t.partition_path, lf.name)]
                given[lf.path] = LogEventTime(lo, hi, "plan")
    with logformat.scan_memo():
        times = resolve_log_event_times(view, timeline, slices, cfg=cfg, extra_committed={c}, aliases=aliases,
                                        given=given)
    return [t.min_ms for t in times.values()]


def _slice_c_logs(view: FileSystemView, partition: str, file_id: str, c: str,
                  listings: dict[str, list[storage.Entry]]) -> FileSlice:
    """Slice C of one file group after the commit, without its carry-forward log: carried and new logs."""
    logs = []
    for entry in _partition_entries(view, partition, listings):
        parsed = parse_log_file_name(entry.name)
        if parsed and parsed.file_id == file_id and parsed.base_instant == c and parsed.version != CARRY_FORWARD_VERSION:
            size = entry.size if not entry.is_link else storage.size(entry.path)   # a link weighs its target
            logs.append(LogFile(entry.name, entry.path, file_id, c, parsed.version, parsed.write_token, size))
    logs.sort(key=lambda lf: lf.sort_key)
    return FileSlice(partition, file_id, c, None, logs)


def _partition_entries(view: FileSystemView, partition: str,
                       listings: dict[str, list[storage.Entry]]) -> list[storage.Entry]:
    """The files of `partition` now, listed once per partition into `listings`: on a store from the view's one
    listing of the table (made when first asked, no LIST of its own), locally a directory read."""
    pdir = view.partition_dir(partition)
    if pdir not in listings:
        if storage.is_remote(pdir):
            view.partitions()
            listings[pdir] = view.remote_entries(partition) or []
        else:
            listings[pdir] = storage.list_entries(pdir)
    return listings[pdir]


@contextlib.contextmanager
def _removing_ahead(folder: str) -> Iterator[None]:
    """`storage.remove_tree(folder)` in flight during the block on an object store (in this operation's context),
    made in place locally. Leaving the block normally waits for it — queued behind other work or not — and raises
    what it raised; leaving on an error drops it if it has not started (as the removal after a crash never ran)."""
    if not storage.is_remote(folder):
        yield
        storage.remove_tree(folder)
        return
    removal = requests_pool().submit(contextvars.copy_context().run, storage.remove_tree, folder)
    try:
        yield
    except BaseException:
        settle([removal])
        raise
    removal.result()


def _publish(base_path: str, c: str, threshold: int | None, completion: int | None, freshness: int | None) -> None:
    """RO freshness for readers and tools, in hoodie.properties (unknown keys are ignored by Java/hudi-rs)."""
    cfg = load_table_config(base_path)
    cfg.props[RO_COMPLETION_KEY] = _str(completion)
    cfg.props[RO_FRESHNESS_KEY] = _str(freshness)
    cfg.props[RO_THRESHOLD_KEY] = _str(threshold)
    cfg.props[RO_INSTANT_KEY] = c
    save_table_config(cfg)


def _str(v: int | None) -> str:
    return "" if v is None else str(v)


# ----------------------------------------------------------------------------------------- executors

def execute_operation(task: OpTask) -> dict[str, Any]:
    """Merge one slice's base with its chosen logs into a new base, then carry over the remaining logs."""
    token = _task_token()
    pdir = storage.join(task.base_path, task.partition_path) if task.partition_path else task.base_path
    temp_dir = storage.join(task.base_path, ".hoodie", ".temp", task.instant)
    storage.make_dirs(temp_dir)
    with storage.prefetched(_logs_read_whole(task, pdir)), _listing_ahead(task, pdir) as listed:
        # the task's one listing of its partition (one LIST on a store) is in flight with the log GETs, and
        # waited for only once the folded logs are decoded: its round trip overlaps theirs and the decode
        logs = read_slice_logs(task.log_paths, task.committed, extents=task.extents)
        if logs.corrupt:  # folding would supersede the log and lose the block's records for good
            raise integrity.corrupt_error(logs.corrupt, f"refusing to fold the logs of file group {task.file_id}",
                                          "Folding them would lose these records for good; nothing was written.")
        listing = listed()
        following, committed_since = _following_items(task, pdir, listing, logs.items)
    name = f"{task.file_id}_{token}_{task.instant}{task.base_ext}"
    with _remote_copies(task, pdir, listing):   # in flight while this task merges and uploads
        split = split_slice(logs.items, following, _split_spec(task),
                            base_ordering_reader(task.base_file, task.ordering_field), base_twice_reader(task.base_file))
        counts, size = _write_base_file(task, split, pdir, temp_dir, name, listing)
        spill = _write_carry_forward(task, split, pdir, temp_dir, token, listing)
        fault_point("carry_over", "base_written")
    carry = _carry_over(task, pdir, temp_dir, listing)
    fault_point("carry_over", "linked")
    stat = _stat(task, name, size, logs.items, counts)
    return {"stat": stat, "carry": carry, "spill": spill, "carry_min": split.carry_min_event_ms,
            "written": _written_logs(task, listing), "committed": sorted(committed_since),
            "replays": _replays(task, logs.items)}


def _logs_read_whole(task: OpTask, pdir: str) -> list[str]:
    """The logs this task reads whole, in the order it reads them: its folded logs, then the carried ones when
    they are likely to be needed (`_following_items`)."""
    carried = [storage.join(pdir, target) for _, target in task.links] \
        if task.merge_mode == EVENT_TIME_ORDERING and task.carried_needed else []
    return [*task.log_paths, *carried]


def _first_attempt() -> bool:
    """Whether this is the first try of the task in the run: always in this process (a failed task fails the run,
    never runs again), on Spark attempt 0 (the run's stage reads no shuffle, so Spark never resubmits it: a
    retry is a later attempt of the same task set); a caller of its own (neither) may be running it again, so
    it is not."""
    if in_process.write_token() is not None:
        return True
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx is not None and ctx.attemptNumber() == 0


# The file group's place in the run's start order (`balanced_order`), in a Spark task: several groups may share one.
_SLOT: contextvars.ContextVar[int | None] = contextvars.ContextVar("tidemark_group_slot", default=None)


def _execute_in_slot(slot: int, task: OpTask) -> dict[str, Any]:
    """`execute_operation` of the group that has place `slot` in the run's start order, in a Spark task."""
    reset = _SLOT.set(slot)
    try:
        return execute_operation(task)
    finally:
        _SLOT.reset(reset)


def _task_token() -> str:
    """The write token of the group's files: `<slot>-<stage>-<attempt>` on Spark, slot being the group's place in
    the start order (Hudi's `<partition>-<stage>-<attempt>`, with a task's groups told apart as an in-process run
    tells them: `<slot>-0-0`); unique per group and attempt of the run."""
    own = in_process.write_token()
    if own is not None:
        return own
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return "0-0-0"
    slot = _SLOT.get()
    return f"{ctx.partitionId() if slot is None else slot}-{ctx.stageId()}-{ctx.attemptNumber()}"


def _split_spec(task: OpTask) -> SplitSpec:
    bounds = {inst: (lo, hi) for inst, lo, hi in task.delete_bounds}
    return SplitSpec(task.merge_mode, task.ordering_field, task.event_field, task.schema,
                     task.threshold_ms if task.exact else None, bounds)


# Keys one S3 LIST returns: a partition holding more files than this takes several pages per task.
LIST_PAGE = 1000


def _list_partition(task: OpTask, pdir: str) -> dict[str, int]:
    """name -> size of the files of the task's group in its partition, listed once per task and shared by every
    step that asks (stale attempts, logs written into slice C, copies already made); local sizes are not needed
    (-1). Only this task writes the names it later looks for (the plan's), so the listing cannot go stale for them.

    Every name a step asks about is the group's own: its base files (`<fid>_...`) and logs (`.<fid>_...`). On a
    store, a partition of more than a listing page is listed by those two prefixes instead (two LISTs of a few
    keys each, not pages of every group's files in every task); a smaller one in one LIST."""
    if not storage.is_remote(pdir):
        return dict.fromkeys(storage.list_names(pdir), -1)
    if task.partition_files > LIST_PAGE:
        return {e.name: e.size for e in storage.list_starting_with(pdir, (f"{task.file_id}_", f".{task.file_id}_"))}
    return {e.name: e.size for e in storage.list_entries(pdir) if not e.is_dir}


@contextlib.contextmanager
def _listing_ahead(task: OpTask, pdir: str) -> Iterator[Callable[[], dict[str, int]]]:
    """`_list_partition`, started now on an object store (in the request pool) and answered when asked; locally
    it is made when asked (a directory read). Leaving the block waits for a listing still in flight.

    A first attempt on an object store asks the run's listing instead (`OpTask.listed`: no LIST at all). It was
    taken before the plan went inflight, under the compaction lock, so it holds every leftover of an earlier run
    of the plan, and nothing but this task writes the group's names of C since; what it may lack — logs writers
    put into slice C in between — a task's own LIST could miss as well, written a moment after it. A retried
    attempt lists: an earlier attempt of this run may have left files the run's listing never saw."""
    if not storage.is_remote(pdir):
        yield lambda: _list_partition(task, pdir)
        return
    if task.listed is not None and _first_attempt():
        listed = dict(task.listed)
        yield lambda: listed
        return
    ahead = requests_pool().submit(_list_partition, task, pdir)
    try:
        yield ahead.result
    finally:
        settle([ahead])


def _following_items(task: OpTask, pdir: str, listing: dict[str, int],
                     folded: Sequence[LogItem]) -> tuple[list[LogItem], frozenset[str]]:
    """Items of the logs that follow the carry-forward log in slice C: the carried logs, then logs written
    into slice C while the plan was pending. Only event-time ordering needs them (commit time: logs win), and
    only when a delete is involved: a following record changes what the base must hold only after a delete
    among the folded records or among its own logs (carry_forward._carry_decisions). So when the plan
    recorded that no log of the operation holds a delete and none was written into slice C, they are not read
    at all — on a store, the carried logs' GETs are saved. (A folded delete the plan did not know of still
    makes them read.) Partial updates make them matter under commit time too (carry_forward.split_slice).
    Also the instants read as committed beyond those of the run's start (the commit's check)."""
    carried = [storage.join(pdir, target) for _, target in task.links]
    written = [storage.join(pdir, n) for n in _written_logs(task, listing)]
    if not _following_matters(task, folded, written):
        return [], frozenset()
    # Logs written into slice C may hold instants completed after the run started: only then read the timeline.
    committed = (frozenset(i.timestamp for i in Timeline.load(task.base_path).completed())
                 if written or not task.completed else task.completed)
    return read_slice_logs(carried + written, committed).items, committed - task.completed


def _following_matters(task: OpTask, folded: Sequence[LogItem], written: Sequence[str]) -> bool:
    """Whether the logs following the carry-forward log can change what this task writes."""
    if task.merge_mode == EVENT_TIME_ORDERING:
        return bool(written) or _replays(task, folded)
    # Commit time: logs win, so what follows never changes the base, unless partial updates are involved (a partial
    # record after a folded delete takes the old base row's other columns). The plan carries no log of a group
    # holding partial blocks (strategy.CompactionStrategy.plan), so only writes into slice C can follow.
    return bool(written) and (any(isinstance(i, DataItem) and i.partial for i in folded) or _hold_partial(written))


def _hold_partial(paths: Sequence[str]) -> bool:
    """A partial-update block among the logs' blocks, from their headers."""
    scans = logformat.scan_log_files((p, None) for p in paths)
    return any(b.is_partial for scan in scans.values() for b in scan.blocks)


def _replays(task: OpTask, folded: Sequence[LogItem]) -> bool:
    """Whether records following the folded ones can change what this task's base holds (and what its
    carry-forward log replays): under event-time ordering, after a delete among the folded records or one the
    plan recorded in a carried log (carry_forward._carry_decisions), or after a folded partial-update record."""
    return task.merge_mode == EVENT_TIME_ORDERING and (
        task.carried_needed or any(isinstance(i, DeleteItem) or isinstance(i, DataItem) and i.partial for i in folded))


def _written_logs(task: OpTask, names: Iterable[str]) -> list[str]:
    """The logs among `names` (the group's partition) written into slice C, not the plan's carried names, in the
    order readers merge them."""
    planned = {link for link, _ in task.links}
    found = []
    for n in names:
        parsed = parse_log_file_name(n)
        if parsed is not None and n not in planned and _written_into_slice_c(task, parsed):
            found.append((parsed.base_instant, parsed.version, parsed.write_token, n))
    return [n for *_, n in sorted(found)]


def _written_into_slice_c(task: OpTask, log: LogFileName) -> bool:
    """A log of the task's group written into slice C while the plan was pending. Version 6 names it by C (the
    carry-forward log and the carried links, also named by C, are not writes); version 8 names it by its own
    write, one requested after C (writes requested before C had committed when it was planned: the trigger
    refuses to plan while one is pending). In name order they follow the carried logs, as readers merge them."""
    if log.file_id != task.file_id:
        return False
    if log.base_instant == task.instant:
        return log.version != CARRY_FORWARD_VERSION
    return log.base_instant > task.instant and log.base_instant not in task.committed


@dataclass
class _Counts:
    rows: int = 0
    base_rows: int = 0
    base_kept: int = 0
    from_logs: int = 0
    min_et: int | None = None
    max_et: int | None = None


def _merged(task: OpTask, winners: LogWinners, counts: _Counts) -> Iterator[pa.Table]:
    """merge_with_winners, unrolled so the stats can count superseded base rows."""
    merge = BaseMerge(winners, task.merge_mode, task.ordering_field, task.schema)
    for batch in stream_base(task.base_file, task.schema, winners.size):
        res = merge.resolve(batch)
        counts.base_rows += batch.num_rows
        counts.base_kept += res.kept.num_rows
        # Drop our references before the next row group is read, so only one is ever alive.
        del batch
        for part in (res.kept, res.overlaid):
            if part is not None and part.num_rows:
                yield part
        counts.from_logs += 0 if res.overlaid is None else res.overlaid.num_rows
        del res
    rest = merge.rest()
    counts.from_logs += rest.num_rows
    if rest.num_rows:
        yield conform_to_schema(rest, task.schema)


def _write_base_file(task: OpTask, split: SliceSplit, pdir: str, temp_dir: str, name: str,
                     listing: dict[str, int]) -> tuple[_Counts, int]:
    """The new base file of slice C, made visible whole and only where no file is: local, written under
    `.hoodie/.temp` and linked into the partition; object stores, one PutObject (a multipart upload when large)
    with `If-None-Match: *`, that appears only complete. A run that was taken over (another run committed C since
    this one listed the partition) is refused there rather than overwrite a committed base file."""
    _remove_stale(task, pdir, listing, lambda n: _is_base_of(n, task.file_id, task.instant))
    dest = storage.join(pdir, name)
    try:
        if storage.is_remote(dest):
            with storage.open_output(dest, exclusive=True) as sink:
                counts = _write_base(task, split.base_winners, sink, name)
                size = sink.tell()   # what was uploaded: no HEAD afterwards
            return counts, size
        tmp = os.path.join(temp_dir, name)
        counts = _write_base(task, split.base_winners, tmp, name)
        _link_new(tmp, dest)
    except storage.PublishConflict:
        raise _taken_over(task, dest) from None
    return counts, os.path.getsize(dest)


def _link_new(tmp: str, dest: str) -> None:
    """Local: move `tmp` into place only where no file is (a hard link refuses an existing name)."""
    try:
        storage.link_no_clobber(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class CompactionTakenOver(TidemarkError):
    """A file this run would write is already there: another run of the same plan wrote it (and may have
    committed it) after this one started — this run is a zombie and writes nothing more."""


def _taken_over(task: OpTask, dest: str) -> CompactionTakenOver:
    return CompactionTakenOver(f"{dest} was written by another run of compaction {task.instant} while this one "
                               "ran (this run's lock was taken over); this run changed no file")


def _write_base(task: OpTask, winners: LogWinners, tmp: str | pa.NativeFile, name: str) -> _Counts:
    """Stream the merged rows into `tmp` batch by batch (Parquet row groups ≤ `row_group_rows`), never the slice;
    the format is `name`'s (engine.io.base_format)."""
    counts = _Counts()
    keys: list[str | None] = [None, None]   # min and max record key written
    opts = base_format.WriteOptions(task.compression, task.row_group_rows, like=task.base_file)
    with base_format.open_writer(tmp, name, task.schema, opts) as writer:
        for t in _merged(task, winners, counts):
            t = _with_file_name(t, name)
            _track(t, task, counts, keys)
            writer.write(t)
            del t  # not alive while the generator reads the next row group
        if keys[0] is not None and keys[1] is not None:
            writer.add_footer({"hoodie_min_record_key": keys[0], "hoodie_max_record_key": keys[1]})
    return counts


def _with_file_name(t: pa.Table, name: str) -> pa.Table:
    i = t.schema.get_field_index(FILE_NAME_COL)
    return t.set_column(i, t.schema.field(i), pa.repeat(pa.scalar(name), t.num_rows)) if i >= 0 else t


def _track(t: pa.Table, task: OpTask, counts: _Counts, keys: list[str | None]) -> None:
    counts.rows += t.num_rows
    if task.event_field and task.event_field in t.column_names:
        lo, hi = eventtime.known_bounds(t.column(task.event_field))
        counts.min_et = lo if counts.min_et is None else (counts.min_et if lo is None else min(counts.min_et, lo))
        counts.max_et = hi if counts.max_et is None else (counts.max_et if hi is None else max(counts.max_et, hi))
    mm = pc.min_max(t.column("_hoodie_record_key"))
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo is not None:
        keys[0] = lo if keys[0] is None else min(keys[0], lo)
        keys[1] = hi if keys[1] is None else max(keys[1], hi)


def _write_carry_forward(task: OpTask, split: SliceSplit, pdir: str, temp_dir: str, token: str,
                         listing: dict[str, int]) -> str | None:
    """The carry-forward items as log version 1 of slice C, one block per item in replay order; the blocks'
    instant is C, so readers take them once C completes."""
    _remove_stale(task, pdir, listing,
                  lambda n: _is_log_of(n, task.file_id, task.instant, CARRY_FORWARD_VERSION))
    if not split.carry:
        return None
    blocks = [_carry_block(task, item) for item in split.carry]
    name = LogFileName(task.file_id, task.instant, CARRY_FORWARD_VERSION, token).name
    dest = storage.join(pdir, name)
    try:
        if storage.is_remote(dest):   # one conditional PUT: whole or absent, and never over another run's
            storage.create_exclusive(dest, b"".join(b for pair in blocks for b in pair))
        else:
            tmp = os.path.join(temp_dir, name)
            if os.path.exists(tmp):
                os.unlink(tmp)
            logformat.append_blocks(tmp, [b for pair in blocks for b in pair])
            _link_new(tmp, dest)
    except storage.PublishConflict:
        raise _taken_over(task, dest) from None
    return f"{task.partition_path}/{name}" if task.partition_path else name


def _carry_block(task: OpTask, item: LogItem) -> list[bytes]:
    if isinstance(item, DataItem):
        rows = carried_rows(item, task.schema)
        lo, hi = (eventtime.known_bounds(rows.column(task.event_field)) if task.event_field in rows.column_names
                  else (None, None))
        avro = json.loads(task.log_avro_schema)
        if item.partial:   # a partial item's block declares only its columns, as Java's partial blocks do
            avro = {**avro, "fields": [f for f in avro["fields"] if f["name"] in rows.column_names]}
        # Java writes partial-update blocks as Avro blocks; a full item takes the table's block format.
        block_format = "avro" if item.partial else task.block_format
        return [logformat.encode_data_block(rows, avro, task.instant, block_format, lo, hi, partial=item.partial)]
    # Processing-time deletes and deletes with an ordering value need blocks of their own (one union branch
    # per block).
    hard = np.asarray(item.always_wins.to_numpy(zero_copy_only=False), bool)
    out = []
    for mask in (hard, ~hard):
        if mask.any():
            keep = pa.array(mask)
            keys = item.keys.filter(keep).to_pylist()
            ordering = None if mask is hard else _ordering_values(item.ordering.filter(keep))
            # Each delete keeps its event time: the next exact compaction may cut at another T.
            times = None if item.event_ms is None else item.event_ms.filter(keep)
            out.append(logformat.encode_delete_block(keys, [task.partition_path] * len(keys), task.instant, ordering,
                                                     avro_schema=json.loads(task.log_avro_schema), event_times=times))
    return out


def _ordering_values(values: pa.Array) -> list[int | float | str | None]:
    """Ordering values as the delete encoder takes them (int, float or str), keeping the raw Avro value."""
    t = values.type
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_integer(t):
        target = pa.int64()
    elif pa.types.is_date(t):
        values, target = values.cast(pa.int32()), pa.int64()
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        target = pa.float64()
    else:
        target = pa.string()
    out: list[int | float | str | None] = values.cast(target).to_pylist()
    return out


@contextlib.contextmanager
def _remote_copies(task: OpTask, pdir: str, listing: dict[str, int]) -> Iterator[None]:
    """On an object store, the carried logs' server-side copies run while the block does (the task's merge and
    base upload): they depend on nothing the merge makes, each appears whole, and all are named by the still
    pending C, so no reader sees them before the commit. They start only after the folded logs were read and
    found sound (a refused fold writes nothing); leaving the block waits for every copy (and raises its error).
    Elsewhere the block just runs: `_carry_over` links or copies afterwards."""
    if task.carry_mode == "symlink" or not storage.is_remote(pdir) or not task.links:
        yield
        return
    pool = requests_pool()
    # sizes from the task's listing, read now (the block's stale-file cleanup edits the listing)
    copies = [pool.submit(_ensure_remote_copy, storage.join(pdir, target), storage.join(pdir, link),
                          listing.get(target), listing.get(link)) for link, target in task.links]
    try:
        yield
    except BaseException:
        settle(copies)   # the task failed: copies not yet started are dropped, running ones finish
        raise
    try:
        for done, (link, _) in zip(copies, task.links, strict=True):
            try:
                done.result()
            except storage.PublishConflict:
                raise _taken_over(task, storage.join(pdir, link)) from None
    finally:
        settle(copies)   # one copy failed: the others are not left running past the task's end


def _carry_over(task: OpTask, pdir: str, temp_dir: str, listing: dict[str, int]) -> list[dict[str, Any]]:
    """Re-home the remaining logs in slice C, in order; an existing identical link or copy is kept (on an object
    store the copies were made by `_remote_copies`)."""
    out = []
    for link, target in task.links:
        dest = storage.join(pdir, link)
        if task.carry_mode == "symlink":
            _ensure_symlink(dest, target)
        elif storage.is_remote(dest):
            pass   # copied while the task merged (_remote_copies)
        else:
            _ensure_copy(os.path.join(pdir, target), dest, os.path.join(temp_dir, link))
        out.append({"partitionPath": task.partition_path, "fileId": task.file_id, "symlink": link,
                    "target": target, "mode": task.carry_mode})
    return out


def _ensure_symlink(dest: str, target: str) -> None:
    if os.path.islink(dest):
        if os.readlink(dest) == target:
            return
        raise TidemarkError(f"{dest}: exists and links to {os.readlink(dest)!r}, not {target!r}")
    if os.path.exists(dest):
        raise TidemarkError(f"{dest}: exists and is not the planned symlink to {target!r}")
    os.symlink(target, dest)  # relative: the link keeps working if the table directory moves


def _ensure_copy(src: str, dest: str, tmp: str) -> None:
    if os.path.lexists(dest):
        if not os.path.islink(dest) and filecmp.cmp(src, dest, shallow=False):
            return
        raise TidemarkError(f"{dest}: exists and differs from {src}, the log it should copy")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)  # readers never see a half-copied log


def _ensure_remote_copy(src: str, dest: str, src_size: int | None, dest_size: int | None) -> None:
    """A server-side copy (S3 CopyObject: no byte passes through this process; the object appears whole).
    An object already at `dest` is an earlier attempt's copy of the same planned log (the name is the plan's,
    so nothing else writes it) when its size matches; anything else is refused as locally. Both sizes come
    from the task's listing (None: not listed), so a copy costs the CopyObject alone — no HEAD, no LIST."""
    if dest_size is not None:
        if src_size is None:
            src_size = storage.size(src)
        if dest_size == src_size:
            return
        raise TidemarkError(f"{dest}: exists and differs from {src}, the log it should copy")
    storage.copy_new(src, dest, src_size)   # never over a copy another run of the plan made (and committed)


def _remove_stale(task: OpTask, pdir: str, listing: dict[str, int], predicate: Callable[[str], bool]) -> None:
    """Delete leftovers of a crashed earlier attempt (named with the still-pending C, so never visible). Only
    while C is pending: a file named by a completed C is committed data, which a run taken over while it was
    paused (a zombie) must never delete. The check costs a request only when there is something to delete."""
    stale = [n for n in listing if predicate(n)]
    if not stale:
        return
    if completed_file(task.base_path, task.instant, COMPACTION) is not None:
        raise _taken_over(task, storage.join(pdir, stale[0]))
    for n in stale:
        storage.remove(storage.join(pdir, n))
        del listing[n]


def _is_base_of(name: str, file_id: str, instant: str) -> bool:
    parsed = parse_base_file_name(name)
    return parsed is not None and parsed.file_id == file_id and parsed.instant == instant


def _is_log_of(name: str, file_id: str, instant: str, version: int) -> bool:
    parsed = parse_log_file_name(name)
    return (parsed is not None and parsed.file_id == file_id and parsed.base_instant == instant
            and parsed.version == version)


def _stat(task: OpTask, name: str, size: int, items: list[LogItem], counts: _Counts) -> dict[str, Any]:
    log_records = sum(i.records.num_rows if isinstance(i, DataItem) else len(i.keys) for i in items)
    log_size = sum(task.log_sizes) if task.log_sizes else sum(storage.size(p) for p in task.log_paths)
    rel = f"{task.partition_path}/{name}" if task.partition_path else name
    superseded = counts.base_rows - counts.base_kept
    return WriteStat(
        file_id=task.file_id, path=rel, partition_path=task.partition_path,
        prev_commit=task.base_instant or "null", num_writes=counts.rows, num_update_writes=superseded,
        num_inserts=counts.from_logs, total_write_bytes=size, file_size=size,
        total_log_records=log_records, total_log_files_compacted=len(task.log_paths),
        total_log_size_compacted=log_size, total_updated_records_compacted=superseded,
        min_event_time=counts.min_et, max_event_time=counts.max_et,
        prev_base_file=storage.name_of(task.base_file) if task.base_file else None, base_file=name).to_json()
