"""`spark.read.format("tidemark")`: a PySpark Python data source over Tidemark/Hudi tables.

    spark.read.format("tidemark").option("query", "read_optimized").load(path)
    spark.read.format("tidemark").option("hoodie.datasource.query.type", "incremental")
        .option("hoodie.datasource.read.begin.instanttime", i1)
        .option("hoodie.datasource.read.end.instanttime", i2).load(path)
    spark.read.format("tidemark").option("as.of.instant", i).load(path)   # time travel

after `register(spark)`, which `load_table` calls itself.

Options take Java Hudi's names; `query` is Tidemark's own (snapshot, read_optimized, incremental,
time_travel). Java's time travel is a snapshot query with `as.of.instant`, so that option alone selects it.

The driver plans the read (one input partition per file slice); executors merge their slices and
yield Arrow record batches, so no row passes through Python one at a time.

A corrupt block of a committed instant is skipped with a warning naming its file and offset (planning warns
about what header scans and content prefixes find; an executor warns, in its log, about a block it fails to
decode). `option("failOnCorrupt", "true")` fails the query instead (engine.logformat.integrity).
"""
from __future__ import annotations

import base64
import dataclasses
import os
import pickle
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from engine.errors import ConfigError
from engine.io import base_format, storage
from engine.io.storage import absolute_location
from engine.read.query import QuerySpec, ReadPlan
from engine.read.slice_reader import ReadContext, SliceRef
from engine.results import WriteResult
from engine.spark import ship_storage_env, spark_path
from engine.write.stream import StreamSink

QUERY_TYPE = "hoodie.datasource.query.type"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
AS_OF = "as.of.instant"
# Set by load_table only: the driver's own plan, so the source reads exactly those slices (no second planning
# in a Python worker, and the same table state as the native Parquet scan it is unioned with).
PLAN = "tidemarkPlan"


def encode_plan(plan: ReadPlan) -> str:
    return base64.b64encode(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def decode_plan(text: str) -> ReadPlan:
    plan = pickle.loads(base64.b64decode(text))
    if not isinstance(plan, ReadPlan):
        raise ConfigError(f"option {PLAN} does not hold a read plan")
    return plan


def spec_from_options(options: Mapping[str, str]) -> QuerySpec:
    """The query the options ask for (ConfigError when they contradict each other)."""
    ours, java = options.get("query"), options.get(QUERY_TYPE)
    if ours and java and ours != java:
        raise ConfigError(f"options query={ours!r} and {QUERY_TYPE}={java!r} disagree")
    query = ours or java or "snapshot"
    as_of = options.get(AS_OF) or None
    if as_of is not None and query == "snapshot":
        query = "time_travel"
    return QuerySpec(query, begin=options.get(BEGIN) or None, end=options.get(END) or None, as_of=as_of)


def spec_options(spec: QuerySpec) -> dict[str, str]:
    """The data source options of a query (the inverse of `spec_from_options`)."""
    named = {"query": spec.query, BEGIN: spec.begin, END: spec.end, AS_OF: spec.as_of}
    return {k: v for k, v in named.items() if v is not None}


class SlicePartition(InputPartition):
    def __init__(self, index: int, plan_query: str, context: ReadContext, refs: list[SliceRef]) -> None:
        super().__init__(index)
        self.query = plan_query
        self.context = context
        self.refs = refs


def spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=False)


class TidemarkReader(DataSourceReader):
    def __init__(self, plan: ReadPlan, schema: StructType, tasks: int) -> None:
        self.plan = plan
        self.schema = schema
        self.tasks = tasks

    def partitions(self) -> list[InputPartition]:
        from engine.read.query import balance

        groups = balance(self.plan.slices, self.tasks) or [[]]
        return [SlicePartition(i, self.plan.query, self.plan.context, g) for i, g in enumerate(groups)]

    def read(self, partition: SlicePartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]  # ours only
        from pyspark.sql.pandas.types import to_arrow_schema

        from engine.io.arrow_pool import use_streaming_pool
        from engine.read.slice_reader import read_slice
        from engine.worker_gc import task_finished

        use_streaming_pool()   # jemalloc keeping freed pages: each batch reuses the last one's (engine.io.arrow_pool)
        target = to_arrow_schema(self.schema, timezone="UTC")
        for ref in partition.refs:
            for table in read_slice(ref, partition.context, partition.query):
                yield from table.cast(target).to_batches()
        task_finished()


class StagedRows(WriterCommitMessage):
    """A streaming write task's commit message: the Parquet files it staged (engine.write.stream)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths


class TidemarkStreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("tidemark")`: executors stage rows, the driver commits each micro-batch as one
    deltacommit, exactly once (engine.write.stream)."""

    def __init__(self, sink: StreamSink) -> None:
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from engine.write.stream import stage

        return StagedRows(stage(self.sink, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803  # Spark's name
        commit_micro_batch(self.sink, _staged(messages), batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803  # Spark's name
        from engine.write.stream import abort_batch

        abort_batch(self.sink, _staged(messages), batchId)


def commit_micro_batch(sink: StreamSink, staged: list[str], batch_id: int) -> WriteResult | None:
    """One micro-batch, start to end: its deltacommit (exactly once: None when it was a replay or empty), what
    the commit owes (table services, catalog sync), then the compaction that follows the stream, if the table
    asks for one."""
    from engine.compaction.follow_stream import follow_with_compaction
    from engine.post_commit import after_write
    from engine.write.stream import commit_batch

    result = commit_batch(sink, staged, batch_id)
    if result is not None:
        after_write(sink.base_path, result)
    if sink.compact:
        follow_with_compaction(sink.base_path)
    return result


def _staged(messages: list[WriterCommitMessage | None]) -> list[str]:
    return [p for m in messages if isinstance(m, StagedRows) for p in m.paths]


class TidemarkDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "tidemark"

    def _path_and_query(self) -> tuple[str, QuerySpec]:
        path = self.options.get("path")
        if not path:
            raise ConfigError("spark.read.format('tidemark') needs a table path: .load(path)")
        # Resolved where the query is planned — the driver JVM's working directory, as Spark's own readers
        # resolve a relative path (load_table resolves in the caller first) — never in each executor's folder.
        return absolute_location(path), spec_from_options(self.options)

    def schema(self) -> StructType:
        from engine.config.properties import load_table_config
        from engine.config.schema import table_read_schema
        from engine.timeline.instants import Timeline

        given = self.options.get(PLAN)
        if given:
            return spark_schema(decode_plan(given).context.schema)
        path, _ = self._path_and_query()
        return spark_schema(table_read_schema(load_table_config(path), Timeline.load(path).latest_schema()))

    def reader(self, schema: StructType) -> DataSourceReader:
        from engine.read.query import plan_read

        given = self.options.get(PLAN)
        if given:
            return TidemarkReader(decode_plan(given), schema, self._tasks())
        path, query = self._path_and_query()
        plan = plan_read(path, query, fail_on_corrupt=self._flag("failOnCorrupt"),
                         warn=not self._flag("corruptReported"),
                         report_dir=self.options.get("corruptReportDir") or None)
        return TidemarkReader(plan, schema, self._tasks())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802  # Spark's
        from engine.write.stream import sink_from_options

        if overwrite:
            raise ConfigError("writeStream.format('tidemark') appends micro-batches (output mode append); "
                              "complete mode would overwrite the table each batch")
        return TidemarkStreamWriter(sink_from_options(self.options))

    def _flag(self, name: str) -> bool:
        """A true/false option, false when absent. `corruptReported` (set by load_table): the caller's process
        already warned about what planning finds, so this planning, in a Python worker, stays quiet.
        `corruptReportDir` (set by export): executors relay the corrupt blocks they find there, for the caller."""
        raw = str(self.options.get(name, "false")).lower()
        if raw not in ("true", "false"):
            raise ConfigError(f"option {name}={raw!r} must be true or false")
        return raw == "true"

    def _tasks(self) -> int:
        """Read tasks: option("partitions"), else two per core of this machine."""
        raw = self.options.get("partitions") or str(2 * (os.cpu_count() or 1))
        if not raw.isdigit() or int(raw) < 1:
            raise ConfigError(f"option partitions={raw!r} must be a positive integer")
        return int(raw)


# The storage environment each session's registration captured (by session), so a change registers again.
_REGISTERED: dict[int, dict[str, str]] = {}


def register(spark: SparkSession) -> SparkSession:
    """Make `spark.read.format("tidemark")` available in `spark`; returns it. Registered again when the storage
    environment changed since (the source's planner workers take the environment its registration captured)."""
    shipped = ship_storage_env(spark)
    if _REGISTERED.get(id(spark)) != shipped:
        spark.dataSource.register(TidemarkDataSource)
        _REGISTERED[id(spark)] = shipped
    return spark


def load_table(spark: SparkSession, path: str, query: str | QuerySpec = "snapshot", *, fail_on_corrupt: bool = False,
               plan: ReadPlan | None = None, report_dir: str | None = None) -> DataFrame:
    """A query as a DataFrame, the fastest way Spark can run it.

    Read-optimized rows are exactly the base files of the latest committed slices, so that query runs on
    Spark's native Parquet reader (JVM, vectorised, no Python worker). So do the slices of a snapshot that have
    no log files: their rows are their base file's. The slices that need a merge (and every slice of a
    time-travel or incremental query) come from the `tidemark` Python data source, handed this plan so it reads
    the same table state the native scan does; so do Lance base files (Spark here has no Lance reader). Planning
    here (or the caller's `plan`) reports corrupt committed blocks in this process; executors relay what their
    decode finds to `report_dir` when given.
    """
    from engine.read.query import as_spec, plan_read

    path = absolute_location(path)   # this process's working directory, not the planner worker's
    spec = as_spec(query)
    plan = plan or plan_read(path, spec, fail_on_corrupt=fail_on_corrupt)
    schema = spark_schema(plan.context.schema)
    if storage.is_remote(path):
        # Spark's Parquet reader has no object-store connector here: the data source reads the base files
        # through pyarrow.fs on the executors.
        return _source(spark, path, plan, fail_on_corrupt, report_dir)
    native: list[str] = []
    merged: list[SliceRef] = []
    for ref in plan.slices:
        base_only = bool(ref.base_path) and (spec.query == "read_optimized"
                                             or (spec.query == "snapshot" and not ref.log_paths))
        if base_only and ref.base_path and not base_format.is_lance(ref.base_path):
            native.append(ref.base_path)
        elif base_only or spec.query != "read_optimized":
            merged.append(ref)   # a Lance base too: Spark has no Lance reader here, the data source reads it
    parts: list[DataFrame] = []
    if native:
        # Given the table schema, Spark infers nothing (no footer-reading job) and reads a column that an
        # older base file lacks (added by schema evolution) as null.
        parts.append(spark.read.schema(schema).parquet(*map(spark_path, native)))
    if merged:
        parts.append(_source(spark, path, dataclasses.replace(plan, slices=tuple(merged)), fail_on_corrupt,
                             report_dir))
    if not parts:
        return spark.createDataFrame([], schema)
    df = parts[0]
    for more in parts[1:]:
        df = df.union(more)
    return df


def _source(spark: SparkSession, path: str, plan: ReadPlan, fail_on_corrupt: bool,
            report_dir: str | None) -> DataFrame:
    """The plan's slices through the `tidemark` data source: merged on executors, corrupt blocks found there
    failing the read or relayed to `report_dir` (planning already warned about what headers show)."""
    context = dataclasses.replace(plan.context, fail_on_corrupt=fail_on_corrupt, report_dir=report_dir)
    given = dataclasses.replace(plan, context=context)
    return register(spark).read.format("tidemark").option(PLAN, encode_plan(given)).load(path)
