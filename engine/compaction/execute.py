"""Executing a compaction plan on Spark: new base files, carried-over logs, `<C>.commit`.

Driver: pick the pending plan, move it to inflight, ship one small picklable `OpTask` per operation to
the executors (engine.compaction.file_group_task compacts each file group), then commit the write stats and
publish the RO completion/freshness times. Every step is idempotent, so a crashed run is finished by simply
running it again.
A log to fold that holds a corrupt block of a committed instant stops the run with CorruptLogBlockError before
anything is written for it: checked from headers on the driver, and by each executor's decode (the only place
flipped bytes deep inside a block show); nothing is committed or published, and the run rolls its own plan back
so a plan that cannot run never blocks scheduling and cleaning (unless writes already went into its slice: then
the plan stays, and the error says why). The error names each damaged file and offset.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine import logformat, placement
from engine.compaction import in_process
from engine.compaction.file_group_task import (
    CompactionTakenOver,
    OpTask,
    _execute_in_slot,
    _written_logs,
    execute_operation,
)
from engine.compaction.freshness_math import compute_ro_times
from engine.compaction.log_event_times import (
    LogEventTime,
    event_time_column,
    resolve_log_event_times,
    unchanged_since_written,
)
from engine.compaction.plan import previous_ro_times
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
    update_reads_first,
)
from engine.config.schema import schema_with_meta, table_read_schema
from engine.errors import LOCK_UNAVAILABLE, Cancelled, CorruptLogBlockError, Refused, TidemarkError
from engine.io import base_format, storage
from engine.io.arrow_pool import use_streaming_pool
from engine.io.faults import fault_point
from engine.io.locking import LOCK_FILE
from engine.io.naming import CARRY_FORWARD_VERSION, LogFileName, parse_log_file_name
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
from engine.results import CompactionResult, SparkTaskFigures, from_ms
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
    transition_to_inflight,
)
from engine.timeline.instants import ask_ahead as ask_timeline_ahead
from engine.timeline.metadata import CarriedEntry, CompactionPlanRecord, compaction_commit_extra
from engine.worker_gc import task_finished

if TYPE_CHECKING:
    from pyspark import Accumulator, SparkContext
    from pyspark.sql import SparkSession


class CompactionError(TidemarkError):
    """A compaction could not run or commit; the plan stays pending (re-run or roll it back)."""


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
    with compaction_run_lock(base_path, "run a compaction", ask=lambda: _ask_first(base_path, instant)), \
            (holding(lock, "run a compaction") if lock is not None else contextlib.nullcontext()):
        return _run_locked(base_path, instant, spark, on_progress, should_stop, lock, local)


def _ask_first(base_path: str, instant: str | None) -> None:
    """The run's first requests in one wave, once the compaction lock's flock is held: hoodie.properties (unless the
    operation read it), the listing of `.hoodie/` and the run's listing of the table (`compaction_run_lock`)."""
    if not storage.on_s3(base_path):
        return
    props = storage.join(base_path, ".hoodie", PROPERTIES_FILE)
    storage.ask_ahead(reads=[] if storage.has_shared_read(props) else [props],
                      children=[storage.join(base_path, ".hoodie")], trees=[(base_path, ".hoodie")])


def _run_locked(base_path: str, instant: str | None, spark: SparkSession | None, on_progress: Progress | None,
                should_stop: Callable[[], bool] | None = None, lock: TableLock | None = None,
                local: bool | None = None) -> CompactionResult:
    # Under the compaction lock: the timeline's listing, the run's listing of the table and (a plan named) the
    # checks of its move to inflight in flight together (kept when asked already with the lock, `_ask_first`).
    ask_timeline_ahead(base_path, (instant, COMPACTION, (State.REQUESTED, State.COMPLETED)) if instant else None,
                       keep=True)
    ask_listing_ahead(base_path, keep=True)
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
    figures: list[SparkTaskFigures] | None = None
    try:
        if spark is None:
            outs = in_process.run_here(tasks, balanced_order(tasks), execute_operation, on_progress, should_stop,
                                       "file groups", REMOTE_GROUPS_PER_CPU if storage.is_remote(base_path) else 1)
        else:
            outs, figures = _execute_all(spark.sparkContext, tasks, on_progress, should_stop)
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
        return _commit(cfg, Timeline.load(base_path), c, plan, tasks, outs, figures=figures)
    still = (f"it is still inflight: run it again, or roll it back (tidemark rollback --instant {c}, or "
             "Table.rollback)")
    try:
        # Writers of this host hold the table's file lock for their whole write: held from the check below
        # through the publish, no write lands in slice C unseen.
        with _writers_kept_out(base_path, lock, c):
            ask_timeline_ahead(base_path, (c, COMPACTION, (State.INFLIGHT,)))
            ask_listing_ahead(base_path)
            if plan.promises_threshold and update_reads_first(base_path):
                # the read of hoodie.properties its update starts with, in flight too (none where the update
                # is a PUT If-Match the operation's read of it)
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
            return _commit(cfg, timeline, c, plan, tasks, outs, view, figures)
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
    listed: dict[str, dict[str, list[tuple[storage.Entry, LogFileName]]]] = {}
    again = False
    for i, task in enumerate(tasks):
        pdir = view.partition_dir(task.partition_path)
        names = _written_logs(task, [e.name for e, _ in _group_logs(view, task.partition_path, listed, task.file_id)])
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
                 should_stop: Callable[[], bool] | None = None
                 ) -> tuple[list[dict[str, Any]], list[SparkTaskFigures]]:
    """The file groups as Spark tasks (`spark_bundles`: small ones share a task, on threads of its Python worker);
    each finished group counts towards the progress. Outputs come back in the plan's order, with what each task
    measured (in partition order)."""
    if not tasks:
        return [], []
    bundles = spark_bundles(tasks, sc.defaultParallelism)
    slots = {i: slot for slot, i in enumerate(balanced_order(tasks))}
    threads = shared_task_threads(tasks[0].base_path)

    def run(acc: Accumulator[int] | None) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
        def bundle(groups: list[tuple[int, OpTask]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
            cpu, wall = time.process_time(), time.perf_counter()
            use_streaming_pool()   # a Spark worker's pool (an in-process run keeps its caller's)
            try:
                outs = in_process.on_threads(groups, lambda g: _execute_in_slot(*g), threads)
            finally:
                task_finished()
            # Spark reports a task's accumulator updates when it ends (and drops a failed task's): the task's groups
            # count then, added once (Accumulator.add is not safe from several threads)
            if acc is not None:
                acc.add(len(outs))
            from pyspark import TaskContext

            ctx = TaskContext.get()
            return outs, {"partition": ctx.partitionId() if ctx else None, "groups": len(outs),
                          "python_cpu_s": time.process_time() - cpu, "python_wall_s": time.perf_counter() - wall}

        outs: list[tuple[list[dict[str, Any]], dict[str, Any]]] = sc.parallelize(
            [[(slots[i], tasks[i]) for i in b] for b in bundles], len(bundles)).map(bundle).collect()
        return outs

    per_bundle = counted(sc, run, on_progress, len(tasks), "file groups", should_stop)
    in_plan_order: list[dict[str, Any]] = [{}] * len(tasks)
    for b, (outs, _) in zip(bundles, per_bundle):
        for i, out in zip(b, outs):
            in_plan_order[i] = out
    return in_plan_order, [SparkTaskFigures(**figures) for _, figures in per_bundle]


# A Spark task costs some 40-60 ms besides its work (scheduling, the Python worker's round trips with the JVM): more
# than a small file group's whole compaction. Small groups therefore share tasks, as few as hold them at
# SHARED_TASK_BYTES each rounded up to a multiple of the cores, `shared_task_threads` of a task's groups at a time
# (one's waits overlap another's decode and merge). Bigger groups keep a task each: the task's cost is small beside theirs, and
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
    SHARED_TASK_BYTES are dealt, heaviest first, to the least loaded of the shared tasks, as many as hold them at
    that size rounded up to a multiple of `cores`: their waves then fill every core (7 tasks' worth on 4 cores as 7
    tasks leaves a core idle through the second wave; as 8 it does not). Groups running alone are not counted in."""
    order = balanced_order(tasks)
    alone = [[i] for i in order if tasks[i].weight > SHARED_TASK_BYTES]
    small = [i for i in order if tasks[i].weight <= SHARED_TASK_BYTES]
    if not small:
        return alone
    needed = -(-sum(tasks[i].weight for i in small) // SHARED_TASK_BYTES)
    cores = max(1, cores)
    shared: list[list[int]] = [[] for _ in range(min(len(small), -(-needed // cores) * cores))]
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
            outs: list[dict[str, Any]], view: FileSystemView | None = None,
            figures: list[SparkTaskFigures] | None = None) -> CompactionResult:
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
    if promised is not None:  # only an event-time compaction sets the table's published guarantee
        _publish(cfg.base_path, c, promised, completion, freshness)
    fault_point("execute", "published")
    _remove_staging(storage.join(cfg.base_path, ".hoodie", ".temp", c))
    return CompactionResult(instant=c, threshold=from_ms(threshold), base_files=[s["path"] for s in stats],
                            records_written=sum(s["numWrites"] for s in stats), logs_carried_over=len(carry_over),
                            spill_logs=spill_logs, ro_completion_time=from_ms(completion),
                            ro_freshness_time=from_ms(freshness), spark_tasks=figures)


def _remaining_log_mins(cfg: TableConfig, timeline: Timeline, c: str, tasks: list[OpTask],
                        plan: CompactionPlanRecord, view: FileSystemView | None = None) -> list[int | None]:
    """Min event times of the logs left in the latest slices once C completes. Carried logs are not read when
    the plan recorded their times (from their headers, when planning: a copy has the same blocks)."""
    view = view or FileSystemView(cfg.base_path, timeline)
    compacted = {(t.partition_path, t.file_id) for t in tasks}
    slices = [s for s in view.latest_slices() if (s.partition_path, s.file_id) not in compacted and s.log_files]
    aliases = {}
    listings: dict[str, dict[str, list[tuple[storage.Entry, LogFileName]]]] = {}   # one per partition, not per group
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
                  listings: dict[str, dict[str, list[tuple[storage.Entry, LogFileName]]]]) -> FileSlice:
    """Slice C of one file group after the commit, without its carry-forward log: carried and new logs."""
    logs = []
    for entry, parsed in _group_logs(view, partition, listings, file_id):
        if parsed.base_instant == c and parsed.version != CARRY_FORWARD_VERSION:
            size = entry.size if not entry.is_link else storage.size(entry.path)   # a link weighs its target
            logs.append(LogFile(entry.name, entry.path, file_id, c, parsed.version, parsed.write_token, size))
    logs.sort(key=lambda lf: lf.sort_key)
    return FileSlice(partition, file_id, c, None, logs)


def _group_logs(view: FileSystemView, partition: str,
                listings: dict[str, dict[str, list[tuple[storage.Entry, LogFileName]]]],
                file_id: str) -> list[tuple[storage.Entry, LogFileName]]:
    """The data logs of group `file_id` in `partition` now, with their parsed names. The partition is listed once
    into `listings` (on a store from the view's one listing of the table, made when first asked, no LIST of its
    own; locally a directory read) and its names parsed once, by file group: every group of a partition asking
    the whole listing made the commit's work grow with groups x files (7,700 names parsed for 32 groups)."""
    pdir = view.partition_dir(partition)
    if pdir not in listings:
        if storage.is_remote(pdir):
            view.partitions()
            entries = view.remote_entries(partition) or []
        else:
            entries = storage.list_entries(pdir)
        by_group: dict[str, list[tuple[storage.Entry, LogFileName]]] = {}
        for entry in entries:
            parsed = parse_log_file_name(entry.name)
            if parsed is not None:
                by_group.setdefault(parsed.file_id, []).append((entry, parsed))
        listings[pdir] = by_group
    return listings[pdir].get(file_id, [])


def _remove_staging(folder: str) -> None:
    """C's staging folder is garbage once C completed. Only the local layout stages files there (written, then
    linked into place); on an object store every file is put where it belongs, so there is nothing to list."""
    if storage.supports_links(folder):
        storage.remove_tree(folder)


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
