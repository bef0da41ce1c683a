"""The write pipeline on PySpark: upsert / insert / delete as one deltacommit, insert_overwrite /
insert_overwrite_table as one replacecommit.

Driver: decide where every (partition, bucket) writes (existing file group + next log version, or a new
file group), open the deltacommit (requested -> inflight), run Spark tasks, commit the write stats.
Executors (`engine.write.log_writer`) write each file group's log files with columnar block encoding.

Two ways in, one commit protocol:
- `write_dataframe`: any Spark DataFrame. A small one (`engine.placement`) is written by `engine.write.in_process`:
  a bare scan of Parquet files is read by pyarrow (no Spark rows at all), any other is computed by Spark with
  its routing columns and collected as Arrow (`toArrow`). A big one goes to Python tasks as Arrow batches
  (`mapInArrow`) without a shuffle: each task routes its rows with pyarrow and exchanges them as the Parquet
  path does (below), whose write stage writes every file group in one task. Only key or partition columns
  whose string form only Spark gives still take Spark's routing columns and a (partition, bucket) shuffle.
- `write_parquet`: Parquet files. Spark schedules the tasks but the rows never become Spark rows:
  tasks read row groups with pyarrow, route them (`engine.index.routing`), and exchange them through Arrow
  IPC files under the instant's temp folder; then one task per set of file groups writes the logs.
  This skips Spark's row <-> Arrow conversion, the dominant cost of the DataFrame path.

Every deltacommit writes *new* log versions instead of appending to the previous log file: a crash can
then never damage a committed log, a carried-over (symlinked) log is never written through, and the
event-time compaction can pick log files at the granularity of writes.

Overwrites (Hudi's backfill operations) are written as Java writes them on a MOR table: a `replacecommit`
(`requested`: an all-null HoodieRequestedReplaceMetadata; `inflight`: JSON; completed: JSON commit metadata
with `partitionToReplaceFileIds`), every (partition, bucket) of the input as a new file group with a base
file (`engine.write.base_writer`). insert_overwrite replaces every live file group of the partitions the
input has rows in; insert_overwrite_table replaces every live file group of the table. They are refused
while a compaction or clustering is pending: its plan would still point at groups that are gone.
"""
from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from engine import errors, placement
from engine.config.properties import TableConfig, load_table_config, validate_settings
from engine.config.schema import evolve_schema, schema_with_meta, table_avro_schema
from engine.errors import LOCK_LOST, Refused, TidemarkError, WriteRefused
from engine.index import keys, routing
from engine.index.routing import BUCKET_COL, KEY_COL, PART_COL
from engine.io import storage
from engine.io.arrow_pool import in_process_pool
from engine.io.faults import fault_point
from engine.io.naming import CARRY_FORWARD_VERSION, bucket_of_file_id, instant_to_millis, new_instant_time, parse_log_file_name, write_token
from engine.lock import TableLock, ensure_held, holding, lost_lock, table_lock_of
from engine.progress import Progress, counted, tracked
from engine.results import WriteResult, utc
from engine.services import recovery, rollback
from engine.slices import pending_log_times
from engine.slices.fsview import FileSystemView
from engine.timeline import heartbeat
from engine.timeline.instants import (
    DELTACOMMIT,
    REPLACECOMMIT,
    Timeline,
    commit_metadata_json,
    complete,
    create_requested,
    transition_to_inflight,
)
from engine.timeline.metadata import (
    INSERT_OVERWRITE,
    INSERT_OVERWRITE_TABLE,
    LOG_MD5,
    PENDING_LOG_TIMES,
    STAT_MD5,
    RequestedReplaceMetadata,
    inflight_commit_json,
)
from engine.worker_gc import task_finished
from engine.write import in_process, inputs, log_writer
from engine.write.background import consume_in_background
from engine.write.job import OVERWRITE_OPERATIONS, Target, WriteJob

if TYPE_CHECKING:   # pyspark loads only when a write runs on Spark (a cold import costs ~0.3–1 s)
    from pyspark import Accumulator, SparkContext
    from pyspark.sql import DataFrame, SparkSession

OPERATIONS = {"upsert": "UPSERT", "insert": "INSERT", "delete": "DELETE",
              "insert_overwrite": INSERT_OVERWRITE, "insert_overwrite_table": INSERT_OVERWRITE_TABLE}
STAT_COLUMN = "stat"
CHUNK_ROWS = 262_144   # rows per routing task of the Parquet path, per exchange file of the DataFrame path
_CHUNKS_PER_PARTITION = 1 << 32   # orders a DataFrame's exchange pieces by (input partition, chunk)
# An exchanged piece: (partition path, bucket, exchange file, its batch number, input order of its chunk).
Piece = tuple[str, int, str, int, int]
# Parquet footer keys of files Spark wrote with hybrid-calendar (pre-Gregorian) dates and times.
_LEGACY_CALENDAR_KEYS = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")
T = TypeVar("T")


class WriteError(TidemarkError):
    """A write could not be committed; nothing it wrote is visible."""


class CommitHook(Protocol):
    """What a caller adds to the commit protocol (the streaming sink: engine.write.stream)."""

    def admit(self, timeline: Timeline) -> None:
        """Under the table lock, before the instant opens: raise to write nothing."""

    def extra_metadata(self, timeline: Timeline, stats: list[dict[str, Any]]) -> dict[str, str]:
        """extraMetadata the deltacommit carries besides the schema (and log MD5s)."""


# ------------------------------------------------------------------------------------------ entry points

def write_dataframe(base_path: str, df: DataFrame, operation: str = "upsert",
                    settings: Mapping[str, str] | None = None, *, lock: TableLock | None = None,
                    on_progress: Progress | None = None, local: bool | None = None) -> WriteResult:
    """Write a Spark DataFrame into the table as one deltacommit.

    Spark computes the DataFrame either way; `engine.placement` decides who writes it (`local`: the caller's
    choice): a small one is collected here as Arrow and written by the in-process writer, a big one (or on a
    cluster) is routed, shuffled and written by Spark tasks."""
    cfg, settings = _open(base_path, operation, settings)
    current = inputs.table_schema(cfg)
    inputs.check_columns(cfg, current, df.columns, operation, "input")
    incoming = keys.arrow_schema_of(df)
    inputs.check_types(current, incoming, "input")
    return _write_checked_dataframe(cfg, df, incoming, operation, settings, lock, on_progress, local)


def _write_checked_dataframe(cfg: TableConfig, df: DataFrame, incoming: pa.Schema, operation: str,
                             settings: dict[str, str], lock: TableLock | None,
                             on_progress: Progress | None, local: bool | None) -> WriteResult:
    """The DataFrame path once the table is open and the input checked (each done once per write)."""
    if placement.write_dataframe_in_process(_estimated_bytes(df), local):
        def run_here(job: WriteJob) -> list[dict[str, Any]]:
            with in_process_pool():
                return in_process.write_groups(job, in_process.group_rows(_routed_here(cfg, df, incoming)),
                                               on_progress)

        return _commit_protocol(cfg, operation, incoming, settings, run_here, lock)
    n_tasks = max(1, df.sparkSession.sparkContext.defaultParallelism)
    if storage.is_remote(cfg.base_path):
        from engine.spark import ship_storage_env

        ship_storage_env(df.sparkSession)   # the executors' pyarrow.fs reaches the same store

    rt = routing.Routing.of(cfg)
    if routing.supports(rt, incoming):
        sc = df.sparkSession.sparkContext

        def run_exchanged(job: WriteJob) -> list[dict[str, Any]]:
            # No shuffle and no Spark routing columns: each input partition's rows cross to Python once, are
            # routed there by pyarrow (identical to Spark's routing, and cheaper than Spark computing and
            # shuffling three more columns) and go to the Arrow IPC exchange of the Parquet path, whose write
            # stage then writes every file group in one task. Routing a batch overlaps the JVM converting the
            # next one.
            exchange, chunk_rows = _exchange_dir(job), CHUNK_ROWS   # read here: tasks see the driver's value
            rows = df.mapInArrow(lambda it: _route_batches(rt, it, exchange, chunk_rows), _stat_schema()).collect()
            return _write_exchanged(sc, job, [_piece(json.loads(r.stat)) for r in rows], on_progress)

        return _commit_protocol(cfg, operation, incoming, settings, run_exchanged, lock)

    def run(job: WriteJob) -> list[dict[str, Any]]:
        routed = (_with_routing(cfg, df).repartition(n_tasks, PART_COL, BUCKET_COL)
                  .mapInArrow(lambda it: _dataframe_task(job, it), _stat_schema()))
        rows = tracked(df.sparkSession.sparkContext, routed.collect, on_progress, "tasks")
        return [json.loads(r.stat) for r in rows]

    return _commit_protocol(cfg, operation, incoming, settings, run, lock)


def write_parquet(base_path: str, paths: list[str], operation: str = "upsert",
                  settings: Mapping[str, str] | None = None, spark: SparkSession | None = None, *,
                  lock: TableLock | None = None, on_progress: Progress | None = None,
                  local: bool | None = None, hook: CommitHook | None = None) -> WriteResult:
    """Write Parquet files into the table as one deltacommit without turning rows into Spark rows.

    In-process or on Spark as `engine.placement` decides (`local`: the caller's choice; a given `spark`
    session means Spark unless `local` says otherwise); key or partition columns whose string form only
    Spark gives (`routing.supports`) always take Spark's DataFrame path. `hook` (in-process only) admits the
    write under the table lock and adds to its commit metadata."""
    cfg, settings = _open(base_path, operation, settings)
    incoming = inputs.parquet_schema(tuple(paths))
    current = inputs.table_schema(cfg)
    inputs.check_columns(cfg, current, incoming.names, operation, paths[0])
    inputs.check_types(current, incoming, paths[0])
    inputs.check_parquet_values(cfg, current, tuple(paths), incoming)
    rt = routing.Routing.of(cfg)
    routable = routing.supports(rt, incoming)
    chunks, total_rows = _row_group_chunks(paths)   # one footer read per file decides the path and the tasks
    if _in_process(routable, total_rows, True if hook is not None else _asked(local, spark)):
        def run_here(job: WriteJob) -> list[dict[str, Any]]:
            with in_process_pool():   # jemalloc: see engine.io.arrow_pool
                return in_process.write_groups(job, in_process.route_all(rt, _read_chunks(chunks)), on_progress)

        return _commit_protocol(cfg, operation, incoming, settings, run_here, lock, hook)
    from engine.spark import get_spark

    if not routable:
        df = parquet_dataframe(spark or get_spark(), paths)
        return _write_checked_dataframe(cfg, df, keys.arrow_schema_of(df), operation, settings, lock, on_progress,
                                        _asked(local, spark))
    sc = (spark or get_spark()).sparkContext

    def run(job: WriteJob) -> list[dict[str, Any]]:
        exchange = _exchange_dir(job)
        pieces = sc.parallelize(list(enumerate(chunks)), len(chunks)) \
            .flatMap(lambda c: _route_chunk(rt, c, exchange)).collect()
        return _write_exchanged(sc, job, pieces, on_progress)

    return _commit_protocol(cfg, operation, incoming, settings, run, lock)


@functools.cache
def _stat_schema() -> Any:
    """The tasks' output: one JSON string per write stat or exchanged piece. A StructType, not the DDL string
    "stat string", which PySpark sends to the JVM to parse on every `mapInArrow` (~5-15 ms a write)."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField(STAT_COLUMN, StringType())])


def _exchange_dir(job: WriteJob) -> str:
    exchange = storage.join(job.base_path, ".hoodie", ".temp", job.instant, "exchange")
    storage.make_dirs(exchange)
    return exchange


def _write_exchanged(sc: SparkContext, job: WriteJob, pieces: list[Piece],
                     on_progress: Progress | None) -> list[dict[str, Any]]:
    """The write stage of an exchange: every file group's pieces, in input order, written by one task."""
    groups = _pieces_by_group(pieces)
    n = max(1, min(len(groups), sc.defaultParallelism * 2))

    def write(acc: Accumulator[int] | None) -> list[dict[str, Any]]:
        stats: list[dict[str, Any]] = (sc.parallelize(groups, n)
                                       .mapPartitions(lambda g: _write_pieces(job, _counting(g, acc))).collect())
        return stats

    return counted(sc, write, on_progress, len(groups), "file groups")


def _asked(local: bool | None, spark: SparkSession | None) -> bool | None:
    """The caller's choice: `local` when given; a session passed in means Spark; else undecided."""
    if local is not None:
        return local
    return False if spark is not None else None


def _in_process(routable: bool, rows: int, local: bool | None) -> bool:
    """Whether a write runs here; asking for it (`local=True`) where only Spark routes the keys is an error."""
    if not routable:
        if local:
            raise WriteError("the record key or partition columns are neither strings nor integers, so only "
                             "Spark's DataFrame path routes them; write without --local")
        return False
    return placement.write_in_process(rows, local)


def write_file(base_path: str, path: str, operation: str = "upsert",
               settings: Mapping[str, str] | None = None, spark: SparkSession | None = None, *,
               lock: TableLock | None = None, on_progress: Progress | None = None,
               local: bool | None = None) -> WriteResult:
    """The CLI's input file (.parquet, folder of parquet, .csv, .jsonl) as one deltacommit."""
    source = inputs.locate(path)
    if source.format == inputs.PARQUET:
        return write_parquet(base_path, list(source.files), operation, settings, spark, lock=lock,
                             on_progress=on_progress, local=local)
    cfg, checked = _open(base_path, operation, settings)
    rows = inputs.read_text(source)
    current = inputs.table_schema(cfg)
    inputs.check_columns(cfg, current, rows.column_names, operation, path)
    inputs.check_types(current, rows.schema, path)
    rows = inputs.check_rows(cfg, current, rows, path)
    # The rows as the DataFrame path would hand them to its tasks (Spark's types), so the table's schema
    # and the files are the same whichever way the write runs.
    as_spark = keys.as_spark_would_convert(rows)
    rt = routing.Routing.of(cfg)
    routable = as_spark is not None and routing.supports(rt, as_spark.schema)
    if as_spark is not None and _in_process(routable, rows.num_rows, _asked(local, spark)):
        def run_here(job: WriteJob) -> list[dict[str, Any]]:
            with in_process_pool():
                return in_process.write_groups(job, in_process.route_all(rt, [as_spark]), on_progress)

        return _commit_protocol(cfg, operation, as_spark.schema, checked, run_here, lock)
    from engine.spark import get_spark

    df = (spark or get_spark()).createDataFrame(rows)
    return _write_checked_dataframe(cfg, df, keys.arrow_schema_of(df), operation, checked, lock, on_progress,
                                    _asked(local, spark))


# ------------------------------------------------------------------------------------------ the protocol

def _open(base_path: str, operation: str, settings: Mapping[str, str] | None) -> tuple[TableConfig, dict[str, str]]:
    if operation not in OPERATIONS:
        raise WriteError(f"unknown operation {operation!r}; use {', '.join(OPERATIONS)}")
    cfg = load_table_config(base_path)
    settings = validate_settings(dict(settings or {}), per_operation=True)
    if "hoodie.bucket.index.num.buckets" in settings:
        raise WriteError("hoodie.bucket.index.num.buckets is fixed when the table is created; pass it to `create`")
    if not cfg.uses_bucket_index:
        raise WriteError(f"table {cfg.name} has no Tidemark bucket index (tidemark.index.type); writing into "
                         "tables created by other writers is not supported yet — read and compact them instead")
    return cfg, settings


def _commit_protocol(cfg: TableConfig, operation: str, incoming: pa.Schema, settings: Mapping[str, str],
                     run: Callable[[WriteJob], list[dict[str, Any]]], lock: TableLock | None = None,
                     hook: CommitHook | None = None) -> WriteResult:
    """requested -> inflight -> run the tasks -> completed; a failure deletes the instant."""
    with holding(table_lock_of(cfg.base_path, lock), f"{operation} into {cfg.name}"):
        return _locked_commit(cfg, operation, incoming, settings, run, hook)


def _locked_commit(cfg: TableConfig, operation: str, incoming: pa.Schema, settings: Mapping[str, str],
                   run: Callable[[WriteJob], list[dict[str, Any]]], hook: CommitHook | None = None) -> WriteResult:
    base_path = cfg.base_path
    rollback.rollback_expired_writes(base_path)   # LAZY failed-writes policy: dead writers only
    timeline = Timeline.load(base_path)
    if hook is not None:
        hook.admit(timeline)
    schema_json = _table_schema(cfg, timeline, incoming, operation)
    instant = new_instant_time(after=max((i.timestamp for i in timeline.instants), default=None))
    # The heartbeat beats before the instant exists and stops after it completes (or is rolled back):
    # a pending instant without a fresh heartbeat is a dead writer's.
    with heartbeat.Heartbeat(base_path, instant, cfg.int_setting(heartbeat.INTERVAL_KEY, settings)):
        return _run_instant(cfg, timeline, instant, operation, schema_json, settings, run, hook)


def _run_instant(cfg: TableConfig, timeline: Timeline, instant: str, operation: str, schema_json: str,
                 settings: Mapping[str, str], run: Callable[[WriteJob], list[dict[str, Any]]],
                 hook: CommitHook | None = None) -> WriteResult:
    base_path = cfg.base_path
    overwrite = operation in OVERWRITE_OPERATIONS
    if overwrite:
        _refuse_overwrite(timeline)
    action = REPLACECOMMIT if overwrite else DELTACOMMIT
    # As Java 0.14: an all-null requested replace record and a JSON inflight; a deltacommit's are empty.
    create_requested(base_path, instant, action, RequestedReplaceMetadata().to_bytes() if overwrite else b"")
    fault_point("write", "requested")
    transition_to_inflight(base_path, instant, action, inflight_commit_json(OPERATIONS[operation]) if overwrite
                           else b"")
    fault_point("write", "inflight")
    # One listing for the targets and the summary of the pending logs' event times (none for an overwrite).
    view = None if overwrite else FileSystemView(base_path, timeline)
    job = _make_job(cfg, timeline, instant, operation, schema_json, settings, view)
    try:
        stats = run(job)
        fault_point("write", "tasks")
    except Exception as exc:
        _refuse_if_lock_lost(instant, exc)
        # Whatever the tasks wrote is named by an instant that never completes, so readers skip it; rolling
        # it back keeps the timeline free for the next writer and compaction.
        rollback.rollback_locked(base_path, instant, allow_live=True)
        raise WriteError(f"write {instant} failed and was rolled back: {_root_cause(exc)}") from exc
    finally:
        storage.remove_tree(storage.join(base_path, ".hoodie", ".temp", instant))
    recovery.reconcile_attempts(base_path, stats)
    fault_point("write", "reconciled")
    md5s = {s["path"]: s.pop(STAT_MD5) for s in stats if STAT_MD5 in s}
    by_partition: dict[str, list[dict[str, Any]]] = {}
    for s in stats:
        by_partition.setdefault(s["partitionPath"], []).append(s)
    replaced = replaced_by_overwrite(FileSystemView(base_path, timeline), operation, set(by_partition)) \
        if overwrite else None
    extra = {LOG_MD5: json.dumps(md5s, sort_keys=True)} if md5s else {}
    if view is not None:
        extra.update(_pending_log_times(timeline, view, stats, md5s))
    if hook is not None:
        extra.update(hook.extra_metadata(timeline, stats))
    body = commit_metadata_json(by_partition, schema=schema_json, operation_type=OPERATIONS[operation],
                                partition_to_replace_file_ids=replaced, extra=extra or None)
    ensure_held(f"committing {instant}")
    complete(base_path, instant, action, body)
    fault_point("write", "completed")
    return written(instant, operation, action, stats, replaced)


def written(instant: str, operation: str, action: str, stats: list[dict[str, Any]],
            replaced: dict[str, list[str]] | None) -> WriteResult:
    """The result of a committed write, from its write stats (a base file's stat names no logFiles)."""
    return WriteResult(instant=instant, operation=operation,
                       records_written=sum(s["numWrites"] + s["numDeletes"] for s in stats),
                       log_files=[s["path"] for s in stats if "logFiles" in s],
                       file_groups=len({(s["partitionPath"], s["fileId"]) for s in stats}),
                       committed_at=utc(instant_to_millis(instant)), action=action,
                       base_files=[s["path"] for s in stats if "logFiles" not in s],
                       replaced_file_groups=dict(replaced or {}))


def _refuse_if_lock_lost(instant: str, exc: Exception) -> None:
    """A writer whose lease ran out while its tasks ran must not roll its instant back: the lock's holder may
    have rolled it back already (the rollback would then fail on an unknown instant) or will (a dead heartbeat).
    One line says which lock, who holds it until when, and that this write was not published."""
    why = lost_lock()
    if why is not None:
        raise Refused(LOCK_LOST, f"lock lost: {why}; write {instant} was not published (its tasks failed: "
                      f"{_root_cause(exc)}); the lock's holder rolls it back (if it has not yet), and `recover` "
                      "removes what its tasks wrote") from exc


def _refuse_overwrite(timeline: Timeline) -> None:
    """A pending compaction or clustering plan names file groups an overwrite may replace; Java refuses such
    conflicts too. Let it finish (or roll it back) first."""
    for inst in timeline.pending_compactions():
        raise WriteRefused(errors.PENDING_COMPACTION, f"compaction {inst.timestamp} is pending; run it or roll it "
                           "back before overwriting", inst.timestamp)
    for inst in timeline.pending_clustering():
        raise WriteRefused(errors.PENDING_CLUSTERING, f"clustering {inst.timestamp} is pending; it must finish "
                           "before an overwrite", inst.timestamp)


def replaced_by_overwrite(view: FileSystemView, operation: str, partitions: set[str]) -> dict[str, list[str]]:
    """partitionToReplaceFileIds of an overwrite, from the view as of before it (its own new groups are not
    committed yet, so never in it): every live group of the written partitions (insert_overwrite) or of the
    table (insert_overwrite_table), as Java's getPartitionToReplacedFileIds lists them."""
    out: dict[str, list[str]] = {}
    for group in view.file_groups():
        if operation == "insert_overwrite_table" or group.partition_path in partitions:
            out.setdefault(group.partition_path, []).append(group.file_id)
    return out


def _root_cause(exc: Exception) -> str:
    """Spark wraps executor errors in pages of JVM trace; keep the innermost error's message."""
    from engine.spark import error_line

    return error_line(str(exc)) or repr(exc)


def _table_schema(cfg: TableConfig, timeline: Timeline, incoming: pa.Schema, operation: str) -> str:
    """The table's Avro schema (no meta fields) after this write; deletes keep the current one."""
    current = timeline.latest_schema()
    if operation == "delete":
        if current is None:
            raise WriteError(f"cannot delete from table {cfg.name}: it has no data yet")
        return current
    new = table_avro_schema(cfg.name, incoming)
    return json.dumps(evolve_schema(json.loads(current) if current else None, new))


def _pending_log_times(timeline: Timeline, view: FileSystemView, stats: list[dict[str, Any]],
                       md5s: Mapping[str, str]) -> dict[str, str]:
    """extraMetadata with the event times of the table's pending logs after this write, so a planner reads this
    deltacommit instead of every one that wrote a pending log (engine.slices.pending_log_times). Only on an object
    store, where each of those reads is a request; the previous summary comes from the commit `latest_schema`
    read already (one more read only for the first write after a compaction)."""
    if not storage.is_remote(view.base_path):
        return {}
    summary = pending_log_times.next_summary(pending_log_times.latest(timeline), view.latest_slices(),
                                             pending_log_times.written(stats, md5s))
    encoded = pending_log_times.encode(summary)
    return {PENDING_LOG_TIMES: encoded} if encoded is not None else {}


def _make_job(cfg: TableConfig, timeline: Timeline, instant: str, operation: str, schema_json: str,
              settings: Mapping[str, str], view: FileSystemView | None = None) -> WriteJob:
    schema = json.loads(schema_json)
    return WriteJob(
        base_path=cfg.base_path, instant=instant, operation=operation,
        avro_schema=schema_with_meta(schema),
        data_columns=tuple(f["name"] for f in schema["fields"]),
        ordering_field=cfg.ordering_field, event_time_field=cfg.event_time_field, merge_mode=cfg.merge_mode,
        block_format=cfg.str_setting("hoodie.logfile.data.block.format", settings),
        max_log_size=cfg.int_setting("hoodie.logfile.max.size", settings),
        max_block_size=cfg.int_setting("hoodie.logfile.data.block.max.size", settings),
        logs_named_by_instant=timeline.uses_completion_time,
        # An overwrite never appends: every (partition, bucket) it writes is a new file group.
        targets={} if operation in OVERWRITE_OPERATIONS else plan_targets(cfg, timeline, view),
        compression=cfg.str_setting("hoodie.parquet.compression.codec", settings),
        row_group_rows=cfg.int_setting("hoodie.parquet.max.row.group.rows", settings),
    )


def plan_targets(cfg: TableConfig, timeline: Timeline,
                 view: FileSystemView | None = None) -> dict[tuple[str, int], Target]:
    """(partition, bucket) -> the file group and log version this write appends to.

    A file group inside a pending compaction C writes into slice C, after the log names the plan
    reserved for its carried-over logs (RFC: "Append new log file"), so nothing is shadowed.
    """
    view = view or FileSystemView(cfg.base_path, timeline)
    reserved = pending_log_reservations(timeline)
    targets: dict[tuple[str, int], Target] = {}
    for group in view.file_groups():
        bucket = bucket_of_file_id(group.file_id)
        if bucket is None:
            continue
        latest = view.latest_of(group)
        if latest is None:
            continue
        base_instant = latest.base_instant
        versions = [lf.version for lf in latest.log_files if lf.base_instant == base_instant]
        pending = reserved.get((group.partition_path, group.file_id))
        if pending is not None:
            base_instant = pending[0]
            versions = [lf.version for s in group.slices if s.base_instant == base_instant
                        for lf in s.log_files] + [pending[1]]
        base_name = latest.base_file.name if latest.base_file else None
        if base_name is not None:
            # A slice made by a compaction keeps version 1 for its carry-forward log even when the compaction
            # wrote none, so a later write is never mistaken for it (rollback tells them apart by version).
            versions.append(CARRY_FORWARD_VERSION)
        targets[(group.partition_path, bucket)] = Target(
            group.file_id, base_instant, max(versions, default=0) + 1, base_name, latest.base_instant)
    return targets


def pending_log_reservations(timeline: Timeline) -> dict[tuple[str, str], tuple[str, int]]:
    """(partition, fileId) -> (pending compaction instant, highest log version its plan reserves)."""
    out: dict[tuple[str, str], tuple[str, int]] = {}
    for inst in timeline.pending_compactions():
        plan = timeline.compaction_plan(inst.timestamp)
        for op in plan.operations:
            names = [parse_log_file_name(os.path.basename(s.symlink)) for s in op.carried]
            versions = [n.version for n in names if n is not None]
            versions.append(CARRY_FORWARD_VERSION)
            out[op.key] = (inst.timestamp, max(versions, default=0))
    return out


# ------------------------------------------------------------------------------------------ DataFrame path

def _with_routing(cfg: TableConfig, df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (df.withColumn(KEY_COL, keys.record_key_column(cfg))
            .withColumn(PART_COL, keys.partition_path_column(cfg))
            .withColumn(BUCKET_COL, keys.bucket_column(F.col(KEY_COL), cfg.num_buckets)))


def _routed_here(cfg: TableConfig, df: DataFrame, incoming: pa.Schema) -> Iterator[pa.Table]:
    """The DataFrame's rows in this process, routed, in Spark's Arrow types (`incoming`).

    A bare scan of Parquet files whose values pyarrow reads exactly as Spark does is read by pyarrow, in
    row-group chunks, skipping Spark's row -> Arrow conversion (the dominant cost); anything else is
    computed by Spark and collected (`toArrow`), which skips the shuffle and the tasks. Routing is pyarrow's
    (`engine.index.routing`, identical to Spark's and half the collect's CPU cheaper than Spark computing and
    converting three more string columns), except for key or partition columns only Spark renders."""
    rt = routing.Routing.of(cfg)
    if not routing.supports(rt, incoming):
        rows = _with_routing(cfg, df).toArrow()
        log_writer.check_routed_keys(rows)
        yield rows
        return
    files = _scanned_parquet_files(df, incoming)
    chunks = _read_chunks(_row_group_chunks(list(files))[0], incoming.names) if files else iter([df.toArrow()])
    for chunk in chunks:
        rows = routing.route(rt, chunk.cast(incoming))
        log_writer.check_routed_keys(rows)
        yield rows


def _scanned_parquet_files(df: DataFrame, incoming: pa.Schema) -> tuple[str, ...] | None:
    """The local Parquet files of a DataFrame that is nothing but Spark's scan of them, or of some of their
    columns (no expression, filter, partition columns or reader options), when pyarrow reads them into exactly
    Spark's values; else None.

    Exact means every file's columns cast to Spark's Arrow types without loss: the same types, or timestamps
    in s/ms/µs (Spark holds µs; nanosecond INT96 values would be truncated, so those stay on Spark), and
    no calendar rebasing by Spark (`_rebased_by_spark`)."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]

    try:
        plan = df._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "Project":   # select/drop of columns as they are, nothing computed
            chosen = plan.projectList()
            if any(chosen.apply(i).getClass().getSimpleName() != "AttributeReference" for i in range(chosen.size())):
                return None
            plan = plan.child()
        if plan.getClass().getSimpleName() != "LogicalRelation":
            return None
        relation = plan.relation()
        if relation.getClass().getSimpleName() != "HadoopFsRelation" or relation.fileFormat().toString() != "Parquet" \
                or relation.partitionSchema().length() or relation.bucketSpec().isDefined() \
                or relation.options().size() != int(relation.options().contains("path")):
            return None
        uris = list(df.inputFiles())
    except (AttributeError, Py4JError):   # a Spark Connect DataFrame, or a plan of another shape
        return None
    if not uris or not all(u.startswith("file:") for u in uris):
        return None
    files = tuple(storage.resolve(u) for u in uris)
    rebase_mode = str(df.sparkSession.conf.get("spark.sql.parquet.datetimeRebaseModeInRead", "CORRECTED"))
    for path in files:
        meta = pq.read_metadata(path)
        if _rebased_by_spark(meta.metadata or {}, rebase_mode) or \
                not _casts_exactly(meta.schema.to_arrow_schema(), incoming):
            return None
    return files


def _rebased_by_spark(file_meta: Mapping[bytes, bytes], mode: str) -> bool:
    """Whether Spark reads this file's dates and times through the hybrid Julian calendar (pyarrow never does):
    a file Spark before 3.0 or in legacy mode wrote, or — for files of other writers — a rebase mode other
    than Spark 4's default CORRECTED (DataSourceUtils.datetimeRebaseSpec)."""
    version = file_meta.get(b"org.apache.spark.version")
    if version is None:
        return mode.upper() != "CORRECTED"
    return version < b"3.0.0" or any(k in file_meta for k in _LEGACY_CALENDAR_KEYS)


def _casts_exactly(source: pa.Schema, spark: pa.Schema) -> bool:
    """Whether the file's columns that the DataFrame keeps cast to Spark's types without loss."""
    if not set(spark.names) <= set(source.names):
        return False
    for a, b in zip([source.field(n).type for n in spark.names], spark.types):
        widened = pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.tz == b.tz and a.unit != "ns"
        if a != b and not widened:
            return False
    return True


def _estimated_bytes(df: DataFrame) -> int | None:
    """Spark's size estimate of the DataFrame's optimized plan (no job runs); None where Spark gives none
    (a Spark Connect DataFrame) or its estimate is its "unknown" default, Long.MaxValue."""
    from py4j.protocol import Py4JError

    try:
        size = int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    except (AttributeError, Py4JError, ValueError):
        return None
    return None if size >= 2**63 - 1 else size


def _task_token() -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return write_token(ctx.partitionId(), ctx.stageId(), ctx.attemptNumber()) if ctx else "0-0-0"


def _dataframe_task(job: WriteJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    received = list(batches)
    stats: list[dict[str, Any]] = []
    if received:
        table = pa.Table.from_batches(received)
        if table.num_rows:
            stats = log_writer.write_routed(job, table, _task_token())
    yield pa.RecordBatch.from_arrays([pa.array([json.dumps(s) for s in stats], pa.string())], names=[STAT_COLUMN])
    task_finished()


# ------------------------------------------------------------------------------------------ Parquet path

def _row_group_chunks(paths: list[str]) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    """Split the inputs into tasks of about CHUNK_ROWS rows, on row-group boundaries, in input order; also
    the inputs' total rows."""
    chunks: list[tuple[str, tuple[int, ...]]] = []
    total = 0
    for path in paths:
        meta = pq.ParquetFile(storage.parquet_source(path)).metadata
        total += meta.num_rows
        current: list[int] = []
        rows = 0
        for i in range(meta.num_row_groups):
            current.append(i)
            rows += meta.row_group(i).num_rows
            if rows >= CHUNK_ROWS:
                chunks.append((path, tuple(current)))
                current, rows = [], 0
        if current or meta.num_row_groups == 0:
            chunks.append((path, tuple(current)))
    return chunks, total


def _read_chunks(chunks: list[tuple[str, tuple[int, ...]]], columns: list[str] | None = None) -> Iterator[pa.Table]:
    """The chunks' rows for the in-process writer, in tables of at most `in_process.ROUTE_ROWS` rows.

    Batches of a streaming read rather than whole row groups (one can hold a million rows): each is routed and
    grouped while it is small enough to stay in the cache. Decoded on this thread: pyarrow's column threads
    made a 1 M-row row group slower to read here, not faster (0.09 s without, 0.10–0.32 s with, on 2 cores)."""
    for path, row_groups in chunks:
        if row_groups:
            for batch in pq.ParquetFile(storage.parquet_source(path)).iter_batches(
                    batch_size=in_process.ROUTE_ROWS, row_groups=list(row_groups), columns=columns, use_threads=False):
                yield pa.Table.from_batches([batch])


def _route_chunk(rt: routing.Routing, indexed_chunk: tuple[int, tuple[str, tuple[int, ...]]],
                 exchange: str) -> list[Piece]:
    """Read one chunk, route it, write it as one Arrow IPC file with one record batch per group."""
    index, (path, row_groups) = indexed_chunk
    if not row_groups:
        return []
    table = routing.route(rt, pq.ParquetFile(storage.parquet_source(path)).read_row_groups(list(row_groups),
                                                                                             use_threads=False))
    pieces = _exchange_routed(table, storage.join(exchange, f"chunk-{index:06d}.arrow"), index)
    task_finished()
    return pieces


def _exchange_routed(table: pa.Table, target: str, order: int) -> list[Piece]:
    """Routed rows as one Arrow IPC file with one record batch per (partition, bucket); its pieces."""
    pieces = []
    # Partition path and bucket are the same for a whole batch and the piece names them: not exchanged.
    ordered, spans = log_writer.grouped(table)
    ordered = ordered.combine_chunks()
    with storage.open_output(target) as sink, pa.ipc.new_file(sink, ordered.schema) as writer:
        for batch_no, ((partition, bucket), start, count) in enumerate(spans):
            writer.write_table(ordered.slice(start, count), max_chunksize=count or None)
            pieces.append((partition, bucket, target, batch_no, order))
    return pieces


def _route_batches(rt: routing.Routing, batches: Iterator[pa.RecordBatch], exchange: str,
                   chunk_rows: int) -> Iterator[pa.RecordBatch]:
    """A DataFrame partition's rows routed into exchange files of about `chunk_rows` rows; yields its pieces.

    Each batch is routed as it arrives, so the JVM converts the next one meanwhile; grouping waits for a chunk,
    so a group's piece is one batch of many rows rather than one per Arrow batch. Pieces are ordered by
    (partition, chunk): a group's rows are then written in the DataFrame's order, as the in-process path does."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    part, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)
    pieces: list[Piece] = []
    pending: list[pa.Table] = []
    rows = 0
    chunks = 0

    def flush() -> None:
        nonlocal chunks
        table = pa.concat_tables(pending) if len(pending) > 1 else pending[0]
        log_writer.check_routed_keys(table)
        chunk, chunks = chunks, chunks + 1
        # The attempt in the name: a retried task never writes over files an earlier attempt may still hold.
        target = storage.join(exchange, f"df-{part:06d}-{chunk:06d}-{attempt}.arrow")
        pieces.extend(_exchange_routed(table, target, part * _CHUNKS_PER_PARTITION + chunk))
        pending.clear()

    def route_all(arrived: Iterable[pa.RecordBatch]) -> None:
        nonlocal rows
        for batch in arrived:
            if batch.num_rows:
                pending.append(routing.route(rt, pa.Table.from_batches([batch])))
                rows += batch.num_rows
            if rows >= chunk_rows:
                flush()
                rows = 0
        if pending:
            flush()

    # 8 batches waiting (320 k rows at the session's 40,000 a batch, `engine.spark.ARROW_BATCH_ROWS`) keep the JVM
    # converting ahead of the router without holding more than a chunk's rows besides it.
    consume_in_background(route_all, batches, depth=8)
    yield pa.RecordBatch.from_arrays([pa.array([json.dumps(p) for p in pieces], pa.string())], names=[STAT_COLUMN])
    task_finished()


def _piece(value: list[Any]) -> Piece:
    partition, bucket, path, batch_no, order = value
    return str(partition), int(bucket), str(path), int(batch_no), int(order)


def _pieces_by_group(pieces: list[Piece]) -> list[tuple[str, int, list[tuple[str, int]]]]:
    groups: dict[tuple[str, int], list[tuple[int, str, int]]] = {}
    for partition, bucket, path, batch_no, chunk in pieces:
        groups.setdefault((partition, bucket), []).append((chunk, path, batch_no))
    return [(p, b, [(path, no) for _, path, no in sorted(items)]) for (p, b), items in sorted(groups.items())]


def _counting(groups: Iterable[T], acc: Accumulator[int] | None) -> Iterator[T]:
    """Count each file group once its logs are written (the consumer asked for the next one); nothing when nobody
    counts (`progress.counted`)."""
    for group in groups:
        yield group
        if acc is not None:
            acc.add(1)


def _write_pieces(job: WriteJob, groups: Iterator[tuple[str, int, list[tuple[str, int]]]]) -> Iterator[dict[str, Any]]:
    token = _task_token()
    readers: dict[str, pa.ipc.RecordBatchFileReader] = {}
    sources: list[pa.NativeFile] = []

    def reader(path: str) -> pa.ipc.RecordBatchFileReader:
        if path not in readers:
            source = pa.OSFile(path) if not storage.is_remote(path) else \
                storage.buffer_reader(storage.read_bytes(path))
            sources.append(source)
            readers[path] = pa.ipc.open_file(source)
        return readers[path]

    stats: list[dict[str, Any]] = []
    try:
        # Each group's logs are written, fsynced and linked in the background while the next group encodes; the
        # stats are reported once every log is in place (a failed publish fails the task first).
        with storage.Publisher() as publisher:
            for partition, bucket, refs in groups:
                # Each batch is read (a local file: from its offset, the footer read once) into memory freed once
                # its group is written, so a task holds one group's rows however many groups it writes.
                # Memory-mapped files made views instead, but every page read stayed in the task's resident memory
                # until the end: its whole share of the exchange (715 MB per Python worker at 16 M rows, 439 MB
                # at 4 M).
                rows = pa.Table.from_batches([reader(path).get_batch(no) for path, no in refs])
                stats += log_writer.write_group(job, partition, bucket, rows, token, publisher.publish)
                del rows
    finally:
        for source in sources:
            source.close()
    yield from stats
    task_finished()


# ------------------------------------------------------------------------------------------ inputs

def parquet_dataframe(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Parquet files as a DataFrame: Spark's reader for local files; through pyarrow.fs for object stores,
    which Spark's Hadoop readers cannot reach here (no s3a connector)."""
    if not any(storage.is_remote(p) for p in paths):
        from engine.spark import spark_path

        return spark.read.parquet(*map(spark_path, paths))
    tables = [pq.read_table(storage.parquet_source(p)) for p in paths]
    return spark.createDataFrame(pa.concat_tables(tables, promote_options="default"))
