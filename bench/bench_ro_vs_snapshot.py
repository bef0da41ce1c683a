"""Read-optimized view of data <= T vs snapshot read, after an event-time compaction with T in the middle.

    python -m bench.bench_ro_vs_snapshot [--scale 1.0] [--records 1000000] [--batches 8] [--repeat 3]
                                         [--cores 2] [--keep DIR]

Table: 4 buckets x 2 partitions = 8 file groups; `--records` records written with write_dataframe in
`--batches` deltacommits ordered by event time (batch i = keys [i*n/b, (i+1)*n/b), event time one second
per key), then an event-time compaction with T = the event time where the second half starts, so the
first half of the batches lands in base files and the second half stays in (carried-over) logs.

Timed (medians of `--repeat`, warm, Spark session started and one warm-up query each, excluded):
- Spark: `format("tidemark").option("query", q).load(p)` + noop write, for q = read_optimized, snapshot,
  and snapshot filtered to event_time <= T (the same rows the RO view holds);
- in-process: Table.open(p).read(q, local=True) for the same three.
Ratio = snapshot / RO (target >= 5x); the row counts of RO and filtered snapshot are checked equal.
"""
from __future__ import annotations

import argparse
import os
import shutil

import pyarrow.compute as pc

from bench.common import T0_MS, emit, log, median_time, records, scratch_dir, stage_parquet, table_layout, timed

TARGET_RATIO = 5.0


def build(spark, path: str, work: str, n: int, batches: int) -> dict:
    from engine import Table

    table = Table.create(path, name="bench_ro", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                         event_time_field="event_time", merge_mode="event_time", hive_style=True,
                         settings={"hoodie.bucket.index.num.buckets": "4"})
    step = n // batches
    for b in range(batches):
        t = records(step, first_key=b * step, seq=b, seed=b)
        table.write(spark.read.parquet(stage_parquet(t, work, f"batch{b}.parquet")), "upsert")
    threshold = T0_MS + (batches // 2) * step * 1000 - 1
    plan = table.schedule_compaction(strategy="event_time", threshold=threshold, carry_over="symlink")
    secs, res = timed(lambda: table.run_compaction(plan.instant))
    return {"threshold_ms": threshold, "compaction_s": round(secs, 2), "base_rows": res.records_written,
            "ro_completion_ms": res.to_dict()["ro_completion_time_ms"], **table_layout(path)}


def spark_read(spark, path: str, query: str, threshold: int | None = None) -> None:
    from pyspark.sql import functions as F

    df = spark.read.format("tidemark").option("query", query).load(path)
    if threshold is not None:
        df = df.filter(F.col("event_time") <= F.timestamp_millis(F.lit(threshold)))
    df.write.format("noop").mode("overwrite").save()


def spark_native_ro(spark, path: str, count: bool = False) -> int | None:
    """RO through engine.datasource.load_table: Spark's native Parquet reader on the latest base files."""
    from engine.datasource import load_table

    df = load_table(spark, path, "read_optimized")
    if count:
        return df.count()
    df.write.format("noop").mode("overwrite").save()
    return None


def spark_count(spark, path: str, query: str, threshold: int | None = None) -> int:
    from pyspark.sql import functions as F

    df = spark.read.format("tidemark").option("query", query).load(path)
    if threshold is not None:
        df = df.filter(F.col("event_time") <= F.timestamp_millis(F.lit(threshold)))
    return df.count()


def arrow_read(path: str, query: str, threshold: int | None = None) -> int:
    from engine import Table

    t = Table.open(path).read(query, local=True).table
    if threshold is not None:
        from engine.config.eventtime import to_millis

        # Spark-written tables store event_time as timestamp-micros: compare in epoch millis.
        t = t.filter(pc.less_equal(to_millis(t.column("event_time")), threshold))
    return t.num_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --records")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--keep", help="build the table in this directory and keep it")
    args = ap.parse_args()
    n = int(args.records * args.scale)
    work = args.keep or scratch_dir("tm-bench-ro-")
    path = os.path.join(work, "table")
    from engine.datasource import register
    from engine.spark import get_spark

    try:
        spark = register(get_spark(cores=args.cores))   # the bench reads with format("tidemark")
        build_s, lay = timed(lambda: build(spark, path, work, n, args.batches))
        log(f"bench_ro_vs_snapshot: built in {build_s:.1f}s: {lay}")
        T = lay["threshold_ms"]
        cases = {"ro": ("read_optimized", None), "snapshot": ("snapshot", None), "snapshot_le_T": ("snapshot", T)}
        rows = {k: arrow_read(path, q, t) for k, (q, t) in cases.items()}           # also warms the cache
        rows_spark = {k: spark_count(spark, path, q, t) for k, (q, t) in cases.items()}
        res: dict = {"rows_in_process": rows, "rows_spark": rows_spark,
                     "ro_equals_snapshot_le_T": rows["ro"] == rows["snapshot_le_T"] == rows_spark["ro"]
                     == rows_spark["snapshot_le_T"]}
        spark_t, arrow_t = {}, {}
        for k, (q, t) in cases.items():
            spark_read(spark, path, q, t)                                           # warm-up
            spark_t[k] = median_time(lambda q=q, t=t: spark_read(spark, path, q, t), args.repeat)
            arrow_t[k] = median_time(lambda q=q, t=t: arrow_read(path, q, t), args.repeat)
            log(f"  {k}: spark {spark_t[k]} in-process {arrow_t[k]}")
        native_rows = spark_native_ro(spark, path, count=True)                       # warm-up + check
        res["ro_native_rows_equal"] = native_rows == rows["ro"]
        native_t = median_time(lambda: spark_native_ro(spark, path), args.repeat)
        spark_t["ro_native"] = native_t
        ratios = {"spark_snapshot_vs_native_ro": round(spark_t["snapshot"]["median_s"] / native_t["median_s"], 2)}
        for name, tt in (("spark", spark_t), ("in_process", arrow_t)):
            ro = tt["ro"]["median_s"]
            ratios[f"{name}_snapshot_vs_ro"] = round(tt["snapshot"]["median_s"] / ro, 2)
            ratios[f"{name}_snapshot_le_T_vs_ro"] = round(tt["snapshot_le_T"]["median_s"] / ro, 2)
        emit("bench_ro_vs_snapshot", {
            "records": n, "batches": args.batches, "cores": args.cores, "table": lay, "build_s": round(build_s, 1),
            **res, "spark": spark_t, "in_process": arrow_t, **ratios, "target_ratio": TARGET_RATIO,
            "meets_target": {k: v >= TARGET_RATIO for k, v in ratios.items()},
        })
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
