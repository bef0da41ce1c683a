"""The write pipeline on PySpark: upsert / insert / delete a DataFrame as one deltacommit.

Driver: decide where every (partition, bucket) writes (existing file group + next log version, or a new
file group), open the deltacommit (requested -> inflight), run one Spark job, commit the write stats.
Executors: `mapInArrow` over the input repartitioned by (partition, bucket); each task writes the log
files of its file groups with columnar block encoding and returns one write stat per log file.

Every deltacommit writes *new* log versions instead of appending to the previous log file: a crash can
then never damage a committed log, a carried-over (symlinked) log is never written through, and the
event-time compaction can pick log files at the granularity of writes. Logs roll over to the next
version at `hoodie.logfile.max.size`.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from engine import eventtime, keys, logformat
from engine.avro_codec import arrow_to_avro_schema
from engine.errors import TidemarkError
from engine.fsview import FileSystemView
from engine.merge import DataItem, merge_log_items
from engine.naming import bucket_of_file_id, new_file_id, new_instant_time, write_token
from engine.properties import EVENT_TIME_ORDERING, TableConfig, load_table_config, validate_settings
from engine.schema import META_FIELDS, evolve_schema, schema_with_meta, table_avro_schema
from engine.table import write_partition_metadata
from engine.timeline import (Timeline, commit_metadata_json, complete, create_requested, delete_instant_files,
                             transition_to_inflight, write_stat)

OPERATIONS = {"upsert": "UPSERT", "insert": "INSERT", "delete": "DELETE"}
KEY_COL, PART_COL, BUCKET_COL = "__tm_key", "__tm_part", "__tm_bucket"
STAT_SCHEMA = "stat string"


class WriteError(TidemarkError):
    """A write could not be committed; nothing it wrote is visible."""


@dataclass(frozen=True)
class Target:
    """Where one (partition, bucket) writes in this deltacommit."""

    file_id: str
    base_instant: str
    next_version: int
    base_file: str | None = None
    prev_commit: str = "null"


@dataclass(frozen=True)
class WriteJob:
    """Everything an executor needs; pickled once per task."""

    base_path: str
    instant: str
    operation: str
    avro_schema: dict                       # full record schema incl. meta fields
    data_columns: tuple[str, ...]
    ordering_field: str | None
    event_time_field: str | None
    merge_mode: str
    block_format: str
    max_log_size: int
    max_block_size: int
    targets: Mapping[tuple[str, int], Target] = field(default_factory=dict)


@dataclass
class WriteResult:
    instant: str
    stats: list[dict]

    @property
    def records_written(self) -> int:
        return sum(s["numWrites"] + s["numDeletes"] for s in self.stats)

    @property
    def log_files(self) -> list[str]:
        return [s["path"] for s in self.stats]


def write_dataframe(base_path: str, df: DataFrame, operation: str = "upsert",
                    settings: Mapping[str, str] | None = None) -> WriteResult:
    """Write `df` into the table as one deltacommit and return the committed instant."""
    if operation not in OPERATIONS:
        raise WriteError(f"unknown operation {operation!r}; use upsert, insert or delete")
    cfg = load_table_config(base_path)
    settings = validate_settings(dict(settings or {}))
    if "hoodie.bucket.index.num.buckets" in settings:
        raise WriteError("hoodie.bucket.index.num.buckets is fixed when the table is created; pass it to `create`")
    _check_columns(cfg, df, operation)
    timeline = Timeline.load(base_path)
    schema_json = _table_schema(cfg, timeline, df, operation)
    instant = new_instant_time(after=_latest_timestamp(timeline))
    create_requested(base_path, instant, "deltacommit")
    transition_to_inflight(base_path, instant, "deltacommit", b"")
    job = _make_job(cfg, timeline, instant, operation, schema_json, df, settings)
    keyed = _with_routing(cfg, df)
    n_tasks = max(1, df.sparkSession.sparkContext.defaultParallelism)
    try:
        rows = (keyed.repartition(n_tasks, PART_COL, BUCKET_COL)
                .mapInArrow(lambda it: _write_task(job, it), STAT_SCHEMA).collect())
    except Exception as exc:
        # Whatever the tasks wrote is named by an instant that never completes, so readers skip it;
        # dropping the instant keeps the timeline free for the next writer and for compaction.
        delete_instant_files(base_path, instant, "deltacommit")
        raise WriteError(f"write {instant} failed and was rolled back: {exc}") from exc
    finally:
        _sweep_temp(base_path, instant)
    stats = [json.loads(r.stat) for r in rows]
    by_partition: dict[str, list[dict]] = {}
    for s in stats:
        by_partition.setdefault(s["partitionPath"], []).append(s)
    body = commit_metadata_json(by_partition, schema=schema_json, operation_type=OPERATIONS[operation])
    complete(base_path, instant, "deltacommit", body)
    return WriteResult(instant, stats)


def _latest_timestamp(timeline: Timeline) -> str | None:
    return max((i.timestamp for i in timeline.instants), default=None)


def _check_columns(cfg: TableConfig, df: DataFrame, operation: str) -> None:
    needed = list(cfg.record_key_fields) + list(cfg.partition_fields)
    if operation != "delete":
        needed += [f for f in (cfg.ordering_field, cfg.event_time_field) if f]
    missing = [c for c in dict.fromkeys(needed) if c not in df.columns]
    if missing:
        raise WriteError(f"input lacks column(s) {', '.join(missing)} required by table {cfg.name}")
    if not cfg.uses_bucket_index:
        raise WriteError(f"table {cfg.name} has no Tidemark bucket index (tidemark.index.type); writing into "
                         "tables created by other writers is not supported yet — read and compact them instead")


def _table_schema(cfg: TableConfig, timeline: Timeline, df: DataFrame, operation: str) -> str:
    """The table's Avro schema (no meta fields) after this write; deletes keep the current one."""
    current = timeline.latest_schema()
    if operation == "delete":
        if current is None:
            raise WriteError(f"cannot delete from table {cfg.name}: it has no data yet")
        return current
    incoming = table_avro_schema(cfg.name, keys.arrow_schema_of(df))
    return json.dumps(evolve_schema(json.loads(current) if current else None, incoming))


def _make_job(cfg: TableConfig, timeline: Timeline, instant: str, operation: str, schema_json: str,
              df: DataFrame, settings: Mapping[str, str]) -> WriteJob:
    schema = json.loads(schema_json)
    return WriteJob(
        base_path=cfg.base_path, instant=instant, operation=operation,
        avro_schema=schema_with_meta(schema),
        data_columns=tuple(f["name"] for f in schema["fields"]),
        ordering_field=cfg.ordering_field, event_time_field=cfg.event_time_field, merge_mode=cfg.merge_mode,
        block_format=str(cfg.setting("hoodie.logfile.data.block.format", settings)),
        max_log_size=int(cfg.setting("hoodie.logfile.max.size", settings)),
        max_block_size=int(cfg.setting("hoodie.logfile.data.block.max.size", settings)),
        targets=plan_targets(cfg, timeline),
    )


def plan_targets(cfg: TableConfig, timeline: Timeline) -> dict[tuple[str, int], Target]:
    """(partition, bucket) -> the file group and log version this write appends to.

    A file group inside a pending compaction C writes into slice C, after the log names the plan
    reserved for its carried-over logs (RFC: "Append new log file"), so nothing is shadowed.
    """
    view = FileSystemView(cfg.base_path, timeline)
    reserved = pending_log_reservations(timeline)
    targets: dict[tuple[str, int], Target] = {}
    for group in view.file_groups():
        bucket = bucket_of_file_id(group.file_id)
        if bucket is None:
            continue
        latest = view.latest_slice_of(group.partition_path, group.file_id)
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
        targets[(group.partition_path, bucket)] = Target(
            group.file_id, base_instant, max(versions, default=0) + 1, base_name, latest.base_instant)
    return targets


def pending_log_reservations(timeline: Timeline) -> dict[tuple[str, str], tuple[str, int]]:
    """(partition, fileId) -> (pending compaction instant, highest log version its plan reserves)."""
    out: dict[tuple[str, str], tuple[str, int]] = {}
    from engine.naming import parse_log_file_name

    for inst in timeline.pending_compactions():
        plan = timeline.read_compaction_plan(inst.timestamp)
        for op in plan.get("operations") or []:
            links = op.get("symlinkOperations") or []
            versions = [parse_log_file_name(os.path.basename(s["symlink"])).version for s in links if s.get("symlink")]
            # Exact-mode plans (tidemark.exact) also reserve version 1 for the compaction's spill log.
            floor = 1 if (plan.get("extraMetadata") or {}).get("tidemark.exact") == "true" else 0
            out[(op.get("partitionPath") or "", op["fileId"])] = (inst.timestamp, max(versions, default=floor))
    return out


def _with_routing(cfg: TableConfig, df: DataFrame) -> DataFrame:
    n = cfg.num_buckets
    key = keys.record_key_column(cfg)
    return (df.withColumn(KEY_COL, key)
            .withColumn(PART_COL, keys.partition_path_column(cfg))
            .withColumn(BUCKET_COL, F.pmod(F.xxhash64(F.col(KEY_COL)), F.lit(n)).cast("int")))


# ------------------------------------------------------------------------------------------ executors

def _write_task(job: WriteJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    token = write_token(ctx.partitionId(), ctx.stageId(), ctx.attemptNumber()) if ctx else "0-0-0"
    received = list(batches)
    stats: list[str] = []
    table = pa.Table.from_batches(received) if received else None
    if table is not None and table.num_rows:
        for (partition, bucket), rows in _groups(table):
            write_partition_metadata(job.base_path, partition, job.instant)
            target = job.targets.get((partition, bucket)) or Target(new_file_id(bucket), job.instant, 1)
            stats += [json.dumps(s) for s in _write_group(job, partition, target, rows, token)]
    yield pa.RecordBatch.from_arrays([pa.array(stats, pa.string())], names=["stat"])


def _groups(table: pa.Table) -> Iterator[tuple[tuple[str, int], pa.Table]]:
    """Split a task's rows by (partition, bucket), keeping input order inside each group.

    Groups are found on one int64 code per row (partition dictionary index × buckets + bucket) with a
    stable numpy sort — far cheaper than a multi-key sort on strings.
    """
    parts = pc.dictionary_encode(table.column(PART_COL)).combine_chunks()
    buckets = table.column(BUCKET_COL).to_numpy().astype(np.int64)
    codes = parts.indices.to_numpy().astype(np.int64) * (int(buckets.max()) + 1) + buckets
    uniques = np.unique(codes)
    if len(uniques) == 1:
        yield (str(parts.dictionary[int(parts.indices[0].as_py())]), int(buckets[0])), table
        return
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    table = table.take(pa.array(order))
    starts = np.searchsorted(sorted_codes, uniques)
    ends = list(starts[1:]) + [len(order)]
    for a, b in zip(starts, ends):
        row = int(order[a])
        key = (str(parts.dictionary[int(parts.indices[row].as_py())]), int(buckets[row]))
        yield key, table.slice(int(a), int(b - a))


def _write_group(job: WriteJob, partition: str, target: Target, rows: pa.Table, token: str) -> list[dict]:
    if job.operation == "delete":
        blocks = [_delete_block(job, partition, rows)]
        counts = {"deletes": rows.num_rows}
    else:
        records = _with_meta(job, partition, target, rows, token)
        if job.operation == "upsert":
            records = _dedupe(job, records)
        blocks = _data_blocks(job, records)
        counts = {"writes": records.num_rows}
    return _write_logs(job, partition, target, blocks, token, counts)


def _with_meta(job: WriteJob, partition: str, target: Target, rows: pa.Table, token: str) -> pa.Table:
    n = rows.num_rows
    task = token.split("-")[0]
    seqno = pc.binary_join_element_wise(pa.scalar(f"{job.instant}_{task}"),
                                        pc.cast(pa.array(np.arange(n)), pa.string()), "_")
    meta = {
        "_hoodie_commit_time": pa.repeat(pa.scalar(job.instant), n),
        "_hoodie_commit_seqno": seqno,
        "_hoodie_record_key": rows.column(KEY_COL).cast(pa.string()),
        "_hoodie_partition_path": pa.repeat(pa.scalar(partition), n),
        "_hoodie_file_name": pa.repeat(pa.scalar(target.file_id), n),
    }
    arrow_schema = keys.avro_record_arrow_schema(job.avro_schema)
    cols = []
    for f in arrow_schema:
        if f.name in meta:
            cols.append(meta[f.name])
        elif f.name in rows.column_names:
            cols.append(rows.column(f.name).cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(cols, schema=arrow_schema)


def _dedupe(job: WriteJob, records: pa.Table) -> pa.Table:
    """Pre-combine an upsert batch: one record per key, chosen by the table's merge mode."""
    if pc.count_distinct(records.column("_hoodie_record_key")).as_py() == records.num_rows:
        return records  # the common case: nothing to combine
    winners = merge_log_items([DataItem(records)], job.merge_mode, job.ordering_field, records.schema)
    return winners.rows if winners.size != records.num_rows else records


@dataclass
class _Block:
    data: bytes
    records: int
    min_event_time: int | None
    max_event_time: int | None


def _data_blocks(job: WriteJob, records: pa.Table) -> list[_Block]:
    """Split records into blocks of at most `hoodie.logfile.data.block.max.size` (estimated)."""
    per_row = max(1, records.nbytes // max(1, records.num_rows))
    rows_per_block = max(1, min(job.max_block_size, job.max_log_size) // per_row)
    out = []
    for start in range(0, records.num_rows, rows_per_block):
        chunk = records.slice(start, rows_per_block)
        lo, hi = eventtime.bounds(chunk.column(job.event_time_field)) if job.event_time_field else (None, None)
        data = logformat.encode_data_block(chunk, job.avro_schema, job.instant, job.block_format, lo, hi)
        out.append(_Block(data, chunk.num_rows, lo, hi))
    return out


def _delete_block(job: WriteJob, partition: str, rows: pa.Table) -> _Block:
    ordering = None
    if job.merge_mode == EVENT_TIME_ORDERING and job.ordering_field and job.ordering_field in rows.column_names:
        col = rows.column(job.ordering_field)
        if col.null_count == 0:
            # Readers compare a delete's ordering value with the data's raw Avro long, so a timestamp
            # keeps the unit the data blocks are written in (Spark hands us microseconds).
            raw = col.cast(pa.int64()) if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type) else col
            ordering = raw.to_pylist()
    lo, hi = (eventtime.bounds(rows.column(job.event_time_field))
              if job.event_time_field and job.event_time_field in rows.column_names else (None, None))
    data = logformat.encode_delete_block(rows.column(KEY_COL).to_pylist(), [partition] * rows.num_rows,
                                         job.instant, ordering)
    return _Block(data, rows.num_rows, lo, hi)


def _write_logs(job: WriteJob, partition: str, target: Target, blocks: list[_Block], token: str,
                counts: dict[str, int]) -> list[dict]:
    """Write blocks into new log versions (rolling over at max size); one write stat per log file."""
    from engine.naming import LogFileName

    temp_dir = os.path.join(job.base_path, ".hoodie", ".temp", job.instant)
    os.makedirs(temp_dir, exist_ok=True)
    files: list[list[_Block]] = [[]]
    size = 0
    for block in blocks:
        if files[-1] and size + len(block.data) > job.max_log_size:
            files.append([])
            size = 0
        files[-1].append(block)
        size += len(block.data)
    stats = []
    for i, file_blocks in enumerate(files):
        name = LogFileName(target.file_id, target.base_instant, target.next_version + i, token).name
        tmp = os.path.join(temp_dir, name)
        logformat.append_blocks(tmp, [b.data for b in file_blocks])
        final_rel = f"{partition}/{name}" if partition else name
        os.replace(tmp, os.path.join(job.base_path, final_rel))
        stats.append(_stat(job, partition, target, final_rel, name, file_blocks, counts))
    return stats


def _stat(job: WriteJob, partition: str, target: Target, rel: str, name: str, blocks: list[_Block],
          counts: dict[str, int]) -> dict:
    size = sum(len(b.data) for b in blocks)
    n = sum(b.records for b in blocks)
    mins = [b.min_event_time for b in blocks if b.min_event_time is not None]
    maxs = [b.max_event_time for b in blocks if b.max_event_time is not None]
    deletes = n if "deletes" in counts else 0
    return write_stat(
        file_id=target.file_id, path=rel, partition_path=partition, prev_commit=target.prev_commit,
        num_writes=n - deletes, num_deletes=deletes, num_update_writes=0 if target.prev_commit == "null" else n - deletes,
        num_inserts=n - deletes if target.prev_commit == "null" else 0,
        total_write_bytes=size, file_size_in_bytes=size, total_log_blocks=len(blocks),
        min_event_time=min(mins) if mins else None, max_event_time=max(maxs) if maxs else None,
        log_version=int(name.rsplit(".log.", 1)[1].split("_")[0]), base_file=target.base_file or "",
        log_files=[name])


def _sweep_temp(base_path: str, instant: str) -> None:
    """Remove what failed task attempts left in the instant's temp folder (never visible to readers)."""
    shutil.rmtree(os.path.join(base_path, ".hoodie", ".temp", instant), ignore_errors=True)


# ------------------------------------------------------------------------------------------ inputs

def read_input(spark: SparkSession, path: str) -> DataFrame:
    """A .parquet, .csv or .jsonl file (or folder of parquet) as a DataFrame."""
    if not os.path.exists(path):
        raise WriteError(f"input file {path} does not exist")
    lower = path.lower()
    if lower.endswith(".parquet") or os.path.isdir(path):
        return spark.read.parquet(path)
    if lower.endswith(".csv"):
        import pyarrow.csv as pacsv

        return spark.createDataFrame(pacsv.read_csv(path))
    if lower.endswith(".jsonl") or lower.endswith(".json"):
        import pyarrow.json as pajson

        return spark.createDataFrame(pajson.read_json(path))
    raise WriteError(f"unsupported input {path}: expected .parquet, .csv or .jsonl")
