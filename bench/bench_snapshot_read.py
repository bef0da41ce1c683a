"""Snapshot read of a MOR table (base files + upserts in logs): Tidemark via Spark and in-process vs hudi 0.5.0.

    python -m bench.bench_snapshot_read [--base 2000000] [--upserts 1000000] [--scale 1.0] [--repeat 3]
                                        [--block-format avro] [--keep DIR]

Table (the anchors' shape): 4 buckets x 2 partitions = 8 file groups; `--base` records inserted, then
compacted into base files with an unbounded compaction (engine.compaction), then `--upserts` updates of
existing keys written in 4 deltacommits (8 x 4 = 32 log files). If compaction is unavailable the table
stays logs-only and the output says so. Timed (medians): Spark `format("tidemark")` snapshot with a noop
write (session already started, one warm-up run), `Table.read(local=True)` in-process, and hudi 0.5.0's
`HudiTableBuilder...read()` on the same table; ratio = ours / hudi (target ≤ 2).
"""
from __future__ import annotations

import argparse
import os
import shutil

import pyarrow as pa

from bench.common import emit, log, median_time, rate, records, scratch_dir, stage_parquet, table_layout, timed, upsert_keys

TARGET_RATIO = 2.0
UPSERT_WRITES = 4
SETTINGS = {"hoodie.bucket.index.num.buckets": "4"}


def create(path: str, block_format: str) -> None:
    from engine import Table

    Table.create(path, name="bench_read", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="event_time", merge_mode="event_time", hive_style=True,
                 settings={**SETTINGS, "hoodie.logfile.data.block.format": block_format})


def write(spark, path: str, table: pa.Table, work: str, name: str) -> None:
    from engine import Table

    Table.open(path).write(spark.read.parquet(stage_parquet(table, work, f"{name}.parquet")), "upsert")


def compact(spark, path: str) -> dict:
    """Unbounded compaction of everything written so far; {'status': ...} says whether it happened."""
    seconds, result = timed(lambda: _schedule_and_run(path))
    return {"status": "done", "seconds": round(seconds, 3), **result}


def _schedule_and_run(path: str) -> dict:
    from engine import Table

    table = Table.open(path)
    plan = table.schedule_compaction(strategy="unbounded")
    if plan.instant is None:
        return {"message": plan.message}
    done = table.run_compaction(plan.instant)
    return {"instant": plan.instant, "base_files": len(done.base_files), "records": done.records_written}


def build_table(spark, path: str, work: str, n_base: int, n_upserts: int, block_format: str) -> dict:
    create(path, block_format)
    write(spark, path, records(n_base, seq=0), work, "base")
    compaction = compact(spark, path)
    keys = upsert_keys(n_base, n_upserts)
    for i, chunk in enumerate(_split(keys, UPSERT_WRITES)):
        write(spark, path, records(len(chunk), keys=chunk, seq=i + 1, seed=100 + i), work, f"upsert{i}")
    return {"compaction": compaction, **table_layout(path)}


def _split(keys, parts: int) -> list:
    step = -(-len(keys) // parts)
    return [keys[i:i + step] for i in range(0, len(keys), step)]


def spark_snapshot(spark, path: str) -> None:
    spark.read.format("tidemark").option("query", "snapshot").load(path).write.format("noop").mode("overwrite").save()


def hudi_snapshot(path: str) -> int:
    from hudi import HudiReadOptions, HudiTableBuilder

    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions())).num_rows


def in_process(path: str) -> int:
    from engine import Table

    return Table.open(path).read("snapshot", local=True).rows


def measure(spark, path: str, repeats: int) -> dict:
    rows_ours, rows_hudi = in_process(path), hudi_snapshot(path)   # also warms the page cache
    assert rows_ours == rows_hudi, (rows_ours, rows_hudi)
    warm = timed(lambda: spark_snapshot(spark, path))[0]
    out = {"rows": rows_ours, "spark_warmup_s": round(warm, 3),
           "spark": median_time(lambda: spark_snapshot(spark, path), repeats),
           "in_process": median_time(lambda: in_process(path), repeats),
           "hudi": median_time(lambda: hudi_snapshot(path), repeats)}
    hudi_s = out["hudi"]["median_s"]
    out["ratio_spark_vs_hudi"] = round(out["spark"]["median_s"] / hudi_s, 3)
    out["ratio_in_process_vs_hudi"] = round(out["in_process"]["median_s"] / hudi_s, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=int, default=2_000_000)
    ap.add_argument("--upserts", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --base and --upserts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--block-format", choices=("avro", "parquet"), default="avro")
    ap.add_argument("--keep", help="build the table in this directory and keep it")
    args = ap.parse_args()
    n_base, n_up = int(args.base * args.scale), int(args.upserts * args.scale)
    work = args.keep or scratch_dir("tm-bench-read-")
    path = os.path.join(work, "table")
    from engine.datasource import register
    from engine.spark import get_spark

    try:
        spark = register(get_spark(cores=args.cores))   # the bench reads with format("tidemark")
        build_s, layout = timed(lambda: build_table(spark, path, work, n_base, n_up, args.block_format))
        log(f"bench_snapshot_read: table built in {build_s:.1f}s: {layout}")
        result = measure(spark, path, args.repeat)
        input_records = n_base + n_up
        emit("bench_snapshot_read", {
            "base_records": n_base, "upsert_records": n_up, "block_format": args.block_format, "cores": args.cores,
            "table": layout, "build_s": round(build_s, 2), **result,
            "input_records_per_s": {k: round(rate(input_records, result[k]["median_s"]))
                                    for k in ("spark", "in_process", "hudi")},
            "target_ratio": TARGET_RATIO, "meets_target": result["ratio_spark_vs_hudi"] <= TARGET_RATIO,
        })
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
