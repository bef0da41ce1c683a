"""The `tidemark` streaming sink: each micro-batch of a Structured Streaming query as ONE deltacommit, exactly once.

    df.writeStream.format("tidemark").option("checkpointLocation", c)
      .option("hoodie.datasource.write.operation", "upsert").start(table_path)

(`engine.datasource.register(spark)` first; `Table.write_stream` does both.)

How a micro-batch travels (pyspark's DataSourceStreamArrowWriter contract):
- executors (`write`): each task stages its Arrow batches as one Parquet file under the query's checkpoint
  location (`<checkpoint>/tidemark-staging/<batchId>/`), and returns the paths as its commit message. Staging
  lives next to Spark's own checkpoint, never under the table's `.hoodie/.temp/`, which `recover` sweeps.
- the driver (`commit`, in a Python worker on the driver's host): one `pipeline.write_parquet` of the staged
  files, in-process, under the table lock: every operation and input check of `Table.write` applies. Its
  deltacommit carries Hudi's streaming sink checkpoint (engine.timeline.stream_checkpoint) and Tidemark's
  query id, batch id and watermark. Then the batch's staging is deleted.
- `abort`: the staging is deleted; nothing was published.

Exactly once: Spark runs batch N again after a crash anywhere before its commit log records N — also after our
deltacommit of N completed. Under the table lock, before the instant opens, the commit looks up the last batch
this query (query id from `<checkpoint>/metadata`, which survives restarts) and identifier committed: on the
active timeline, else in `<checkpoint>/tidemark-sink/last-commit` (written after each deltacommit; the timeline
may have been archived since). A batch id at or below it is skipped: nothing written, staging removed. A
failing write leaves no completed instant (the pipeline rolls itself back; a killed one leaves an inflight the
next write or `recover` rolls back), so Spark's retry writes it once.

Unlike Java's sink, a batch is skipped only for its own query (same identifier AND query id): a new checkpoint
location starts at batch 0 again and must not be mistaken for a replay of the old query's batches.

Compaction that follows the stream: when the table sets `hoodie.compaction.event.time.stream.lateness`, the commit
of a batch schedules an event-time compaction up to watermark - lateness (if none is pending and that threshold
moved past the RO view's freshness) and runs it in a separate process, so the next batch's data write is never
blocked by it (writers and a compaction run do not block each other). Java's keys turn this off:
`hoodie.datasource.compaction.async.enable=false` or `hoodie.datasource.write.streaming.disable.compaction=true`.
"""
from __future__ import annotations

import itertools
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.config.properties import TableConfig, load_table_config, validate_settings
from engine.errors import ConfigError, TidemarkError
from engine.io import storage
from engine.io.faults import fault_point
from engine.io.storage import absolute_location
from engine.results import WriteResult
from engine.timeline.instants import Timeline
from engine.timeline.metadata import WriteStat
from engine.timeline.stream_checkpoint import (
    BATCH_ID_KEY,
    DEFAULT_IDENTIFIER,
    IDENTIFIER_OPTION,
    QUERY_ID_KEY,
    SINK_CHECKPOINT_KEY,
    WATERMARK_KEY,
    checkpoint_value,
    last_checkpoint,
)

log = logging.getLogger(__name__)

OPERATION_OPTION = "hoodie.datasource.write.operation"
ASYNC_COMPACT_OPTION = "hoodie.datasource.compaction.async.enable"
DISABLE_COMPACTION_OPTION = "hoodie.datasource.write.streaming.disable.compaction"   # Java's sink, 0.14+
STREAM_OPERATIONS = ("upsert", "insert", "delete")
# Options naming what the table already fixes: accepted when they agree with it (Java users pass them always).
def _name(c: TableConfig) -> list[str]:
    return [c.name]


def _ordering(c: TableConfig) -> list[str]:
    return [c.ordering_field] if c.ordering_field else []


def _record_keys(c: TableConfig) -> list[str]:
    return list(c.record_key_fields)


def _partitions(c: TableConfig) -> list[str]:
    return list(c.partition_fields)


def _mor(c: TableConfig) -> list[str]:
    return ["MERGE_ON_READ"]


_TABLE_FIXED: dict[str, Callable[[TableConfig], list[str]]] = {
    "hoodie.table.name": _name,
    "hoodie.datasource.write.table.name": _name,
    "hoodie.datasource.write.recordkey.field": _record_keys,
    "hoodie.datasource.write.partitionpath.field": _partitions,
    "hoodie.datasource.write.precombine.field": _ordering,
    "hoodie.table.ordering.fields": _ordering,
    "hoodie.datasource.write.table.type": _mor,
}
_SINK_OPTIONS = {OPERATION_OPTION, IDENTIFIER_OPTION, ASYNC_COMPACT_OPTION, DISABLE_COMPACTION_OPTION}
STAGING = "tidemark-staging"
SINK_STATE = "tidemark-sink"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"   # Spark's StreamExecution.BATCH_ID_KEY, a local property of tasks


class BatchAlreadyCommitted(TidemarkError):
    """The micro-batch is on the table already (a replay after a crash): nothing is written."""


@dataclass(frozen=True)
class StreamSink:
    """What every micro-batch of one query is written with (pickled to executors and the commit worker)."""

    base_path: str
    checkpoint: str
    operation: str = "upsert"
    identifier: str = DEFAULT_IDENTIFIER
    settings: Mapping[str, str] = field(default_factory=dict)
    compact: bool = True

    @property
    def staging(self) -> str:
        return storage.join(self.checkpoint, STAGING)

    def batch_staging(self, batch_id: int) -> str:
        return storage.join(self.staging, str(batch_id))

    @property
    def last_commit_path(self) -> str:
        return storage.join(self.checkpoint, SINK_STATE, "last-commit")

    def query_id(self) -> str:
        """Spark's query id: `<checkpoint>/metadata` holds {"id": ...}, written when the query first started and
        kept by every restart on this checkpoint location."""
        path = storage.join(self.checkpoint, "metadata")
        try:
            doc = json.loads(storage.read_bytes(path).decode("utf-8").splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError) as exc:
            raise TidemarkError(f"{path}: no streaming query id ({exc})") from exc
        return str(doc["id"])


def sink_from_options(options: Mapping[str, str]) -> StreamSink:
    """The sink the writeStream options ask for; ConfigError for what the table or the sink cannot honour."""
    given = {str(k).lower(): str(v) for k, v in options.items()}
    path, checkpoint = given.get("path"), given.get("checkpointlocation")
    if not path:
        raise ConfigError("writeStream.format('tidemark') needs the table path: .start(path)")
    if not checkpoint:
        raise ConfigError("writeStream.format('tidemark') needs option('checkpointLocation', ...): exactly-once "
                          "writes resume from it")
    cfg = load_table_config(absolute_location(path))
    operation = given.get(OPERATION_OPTION, "upsert").lower()
    if operation not in STREAM_OPERATIONS:
        raise ConfigError(f"{OPERATION_OPTION}={operation!r}: a stream writes with {', '.join(STREAM_OPERATIONS)}")
    _check_fixed(cfg, given)
    settings = validate_settings({k: v for k, v in given.items() if k.startswith("hoodie.")
                                  and k not in _SINK_OPTIONS and k not in _TABLE_FIXED}, per_operation=True)
    compact = _flag(given, ASYNC_COMPACT_OPTION, True) and not _flag(given, DISABLE_COMPACTION_OPTION, False)
    return StreamSink(cfg.base_path, absolute_location(checkpoint), operation,
                      given.get(IDENTIFIER_OPTION) or DEFAULT_IDENTIFIER, settings, compact)


def _flag(given: Mapping[str, str], key: str, default: bool) -> bool:
    raw = given.get(key, str(default)).strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"{key}={raw!r} must be true or false")
    return raw == "true"


def _check_fixed(cfg: TableConfig, given: Mapping[str, str]) -> None:
    for key, of_table in _TABLE_FIXED.items():
        if key in given:
            asked = [f.strip() for f in given[key].split(",") if f.strip()]
            if key == "hoodie.datasource.write.table.type":
                asked = [a.upper() for a in asked]
            if asked != of_table(cfg):
                raise ConfigError(f"{key}={given[key]!r} disagrees with table {cfg.name} "
                                  f"({','.join(of_table(cfg)) or 'none'}), which fixes it at creation")


# ------------------------------------------------------------------------------------------ executors

def stage(sink: StreamSink, batches: Iterator[pa.RecordBatch]) -> list[str]:
    """A task's rows as one Parquet file under its batch's staging folder; [] when it had none."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    batch_id = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx else None
    folder = sink.batch_staging(int(batch_id)) if batch_id is not None else storage.join(sink.staging, "unknown")
    first = next(batches, None)
    if first is None:
        return []
    part = f"{ctx.partitionId() if ctx else 0}-{ctx.attemptNumber() if ctx else 0}-{uuid.uuid4().hex}.parquet"
    target = storage.join(folder, part)
    storage.make_dirs(folder)
    rows = 0
    with storage.open_output(target) as sink_file, pq.ParquetWriter(sink_file, first.schema) as writer:
        for batch in itertools.chain([first], batches):   # one batch in memory at a time
            if batch.num_rows:
                writer.write_batch(batch)
                rows += batch.num_rows
    fault_point("stream", "staged")
    if rows == 0:
        storage.remove(target)
        return []
    return [target]


# ------------------------------------------------------------------------------------------ the driver

@dataclass
class _BatchHook:
    """Admits a batch once per query and names it in the deltacommit (engine.write.pipeline.CommitHook)."""

    sink: StreamSink
    query_id: str
    batch_id: int
    previous_watermark: int | None = None
    watermark: int | None = None   # what the deltacommit records: max of the previous and this batch's

    def admit(self, timeline: Timeline) -> None:
        on_timeline = last_checkpoint(timeline, self.sink.identifier, self.query_id)
        recorded = _recorded_commit(self.sink, self.query_id)
        last = max((c for c in (on_timeline and (on_timeline.batch_id, on_timeline.watermark_ms), recorded) if c),
                   default=None, key=lambda c: c[0])
        if last is not None and self.batch_id <= last[0]:
            raise BatchAlreadyCommitted(f"batch {self.batch_id} of query {self.query_id} is committed already "
                                        f"(last committed batch {last[0]})")
        self.previous_watermark = last[1] if last is not None else None

    def extra_metadata(self, timeline: Timeline, stats: list[dict[str, Any]]) -> dict[str, str]:
        times = [t for t in (WriteStat.from_json(s).max_event_time for s in stats) if t is not None]
        marks = [m for m in (self.previous_watermark, max(times, default=None)) if m is not None]
        extra = {SINK_CHECKPOINT_KEY: checkpoint_value(self.sink.identifier, self.batch_id),
                 QUERY_ID_KEY: self.query_id, BATCH_ID_KEY: str(self.batch_id)}
        if marks:
            self.watermark = max(marks)
            extra[WATERMARK_KEY] = str(self.watermark)
        return extra


def _recorded_commit(sink: StreamSink, query_id: str) -> tuple[int, int | None] | None:
    """(batch id, watermark) of the last commit the sink recorded next to the checkpoint for this query and
    identifier; None when there is none."""
    try:
        doc = json.loads(storage.read_bytes(sink.last_commit_path))
    except (FileNotFoundError, ValueError):
        return None
    if doc.get("queryId") != query_id or doc.get("identifier") != sink.identifier:
        return None
    return int(doc["batchId"]), doc.get("watermark")


def commit_batch(sink: StreamSink, staged: list[str], batch_id: int) -> WriteResult | None:
    """Publish a micro-batch's staged rows as one deltacommit (None: skipped as a replay, or no rows); its
    staging, and any older batch's a crash left, is removed either way. What the commit owes afterwards (table
    services, catalog sync, the compaction that follows the stream) is the caller's: `engine.datasource`."""
    from engine.write import pipeline

    try:
        if not staged:
            return None   # an empty batch writes nothing: there is nothing a replay could duplicate
        hook = _BatchHook(sink, sink.query_id(), batch_id)
        try:
            result = pipeline.write_parquet(sink.base_path, staged, sink.operation, sink.settings, local=True,
                                            hook=hook)
        except BatchAlreadyCommitted as skipped:
            log.warning("tidemark sink: %s; skipped", skipped)
            return None
        fault_point("stream", "committed")
        _record_commit(sink, hook, result)
    finally:
        discard_staging(sink, up_to=batch_id)
    return result


def _record_commit(sink: StreamSink, hook: _BatchHook, result: WriteResult) -> None:
    doc = {"queryId": hook.query_id, "identifier": sink.identifier, "batchId": hook.batch_id,
           "instant": result.instant, "watermark": hook.watermark}
    storage.make_dirs(storage.join(sink.checkpoint, SINK_STATE))
    storage.write_replace(sink.last_commit_path, json.dumps(doc).encode("utf-8"))


def discard_staging(sink: StreamSink, up_to: int | None = None) -> None:
    """Delete the staging of batches up to `up_to` (all when None): once a batch is committed or skipped, neither
    it nor an earlier batch is run again."""
    for name in storage.list_names_if_dir(sink.staging):
        if up_to is None or not name.isdigit() or int(name) <= up_to:
            storage.remove_tree(storage.join(sink.staging, name))


def abort_batch(sink: StreamSink, staged: list[str], batch_id: int) -> None:
    """A failed batch: its staged files go, nothing was published."""
    for path in staged:
        storage.remove(path)
    storage.remove_tree(sink.batch_staging(batch_id))
