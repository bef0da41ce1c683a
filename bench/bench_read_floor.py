"""RO and snapshot reads against their floors, side by side in one run on one table.

    python -m bench.bench_read_floor [--base 2000000] [--upserts 1000000] [--scale 1.0] [--repeat 5]
                                     [--cores 2] [--keep DIR]

Table: bench_snapshot_read's (4 buckets x 2 partitions = 8 file groups, `--base` records compacted into base
files, then `--upserts` updates of existing keys in 32 Avro log files), so the RO view is the 8 base files and
the snapshot merges them with 1 M log records. With `--keep DIR` the table is built there once and reused by
later runs (a table already at DIR/table is read, not rebuilt).

Timed, each case once per round (forward order on even rounds, backward on odd), rounds repeated `--repeat`
times (so load changes hit every case alike),
medians reported; the Spark session is started and every case run once beforehand, untimed:
- ro_spark:          ours, `load_table(spark, p, "read_optimized")` + noop write (what Table/CLI reads use)
- ro_spark_datasource: ours, `format("tidemark").option("query", "read_optimized")` + noop write
- spark_parquet:     floor, `spark.read.parquet(*base files)` + noop write
- ro_in_process:     ours, `Table.open(p).read("read_optimized")` (read_arrow)
- pyarrow_dataset:   floor, `pyarrow.dataset.dataset(base files).to_table()`
- snapshot_spark:    ours, `load_table(spark, p, "snapshot")` + noop write (log-free slices native, the rest
                     through the data source given the driver's plan)
- snapshot_spark_datasource: ours, `format("tidemark")` snapshot + noop write (plans again in a Python worker)
- snapshot_in_process: ours, `Table.open(p).read("snapshot")`
- hudi_snapshot:     hudi 0.5.0's snapshot read into Arrow
Ratios: ro_spark / spark_parquet (target <= 1.2), ro_in_process / pyarrow_dataset (<= 1.2),
snapshot_spark / hudi_snapshot (<= 0.5). Each case also reports the median CPU seconds it cost this process
("self": the driver, or the whole in-process read), the Spark JVM and the Python workers (bench.common.cpu_split):
on a shared machine those move far less with the load than wall time. Row counts are checked equal (RO = base rows, snapshot = hudi's).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from bench.bench_snapshot_read import build_table, hudi_snapshot
from bench.common import cpu_split, emit, log, scratch_dir, table_layout, timed

TARGETS = {"ro_spark_vs_spark_parquet": 1.2, "ro_in_process_vs_pyarrow_dataset": 1.2,
           "snapshot_spark_vs_hudi": 0.5}


def base_files(path: str) -> list[str]:
    from engine.read.query import plan_read

    return [ref.base_path for ref in plan_read(path, "read_optimized").slices if ref.base_path]


def noop(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


def cases(spark: Any, path: str, bases: list[str]) -> dict[str, Callable[[], int | None]]:
    from engine import Table
    from engine.datasource import load_table
    from engine.spark import spark_path

    spark_bases = [spark_path(b) for b in bases]

    def ours(query: str) -> int:
        return Table.open(path).read(query, local=True).rows

    return {
        "ro_spark": lambda: noop(load_table(spark, path, "read_optimized")),
        "ro_spark_datasource": lambda: noop(spark.read.format("tidemark").option("query", "read_optimized").load(path)),
        "spark_parquet": lambda: noop(spark.read.parquet(*spark_bases)),
        "ro_in_process": lambda: ours("read_optimized"),
        "pyarrow_dataset": lambda: ds.dataset(bases, format="parquet").to_table().num_rows,
        "snapshot_spark": lambda: noop(load_table(spark, path, "snapshot")),
        "snapshot_spark_datasource": lambda: noop(spark.read.format("tidemark").option("query", "snapshot").load(path)),
        "snapshot_in_process": lambda: ours("snapshot"),
        "hudi_snapshot": lambda: hudi_snapshot(path),
    }


def check_rows(spark: Any, path: str, bases: list[str]) -> dict[str, Any]:
    from engine import Table
    from engine.datasource import load_table

    base_rows = ds.dataset(bases, format="parquet").count_rows()
    rows = {"base_files": base_rows,
            "ro_spark": load_table(spark, path, "read_optimized").count(),
            "ro_in_process": Table.open(path).read("read_optimized", local=True).rows,
            "snapshot_spark": load_table(spark, path, "snapshot").count(),
            "snapshot_spark_datasource": spark.read.format("tidemark").load(path).count(),
            "snapshot_in_process": Table.open(path).read("snapshot", local=True).rows,
            "hudi_snapshot": hudi_snapshot(path)}
    ok = (rows["ro_spark"] == rows["ro_in_process"] == base_rows
          and rows["snapshot_spark"] == rows["snapshot_spark_datasource"] == rows["snapshot_in_process"]
          == rows["hudi_snapshot"])
    assert ok, rows
    return rows


def measure(named: dict[str, Callable[[], int | None]], repeats: int) -> dict[str, dict[str, Any]]:
    for fn in named.values():   # warm-up: page cache, JIT, Python workers
        fn()
    runs: dict[str, list[float]] = {k: [] for k in named}
    cpu: dict[str, list[dict[str, float]]] = {k: [] for k in named}
    for r in range(repeats):
        # Forward on even rounds, backward on odd ones: each case follows a different one in turn, so none is
        # always timed just after a Spark query whose JVM is still collecting garbage on the same 2 cores.
        order = list(named.items()) if r % 2 == 0 else list(reversed(named.items()))
        for k, fn in order:
            before = cpu_split()
            runs[k].append(timed(fn)[0])
            after = cpu_split()
            cpu[k].append({part: after[part] - before[part] for part in after})
        log(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in runs.items()))
    return {k: {"median_s": round(statistics.median(v), 4), "runs_s": [round(x, 4) for x in v],
                "cpu_s": {part: round(statistics.median(c[part] for c in cpu[k]), 3) for part in cpu[k][0]}}
            for k, v in runs.items()}


def ratios(t: dict[str, dict[str, Any]]) -> dict[str, float]:
    def r(a: str, b: str) -> float:
        return round(t[a]["median_s"] / t[b]["median_s"], 3)

    def cpu_ratio(a: str, b: str) -> float:
        """CPU seconds of every process involved (hudi runs in this one)."""
        return round(sum(t[a]["cpu_s"].values()) / sum(t[b]["cpu_s"].values()), 3)

    return {"ro_spark_vs_spark_parquet": r("ro_spark", "spark_parquet"),
            "ro_spark_datasource_vs_spark_parquet": r("ro_spark_datasource", "spark_parquet"),
            "ro_in_process_vs_pyarrow_dataset": r("ro_in_process", "pyarrow_dataset"),
            "snapshot_spark_vs_hudi": r("snapshot_spark", "hudi_snapshot"),
            "snapshot_spark_datasource_vs_hudi": r("snapshot_spark_datasource", "hudi_snapshot"),
            "snapshot_in_process_vs_hudi": r("snapshot_in_process", "hudi_snapshot"),
            "snapshot_spark_vs_hudi_cpu": cpu_ratio("snapshot_spark", "hudi_snapshot"),
            "snapshot_spark_datasource_vs_hudi_cpu": cpu_ratio("snapshot_spark_datasource", "hudi_snapshot")}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--base", type=int, default=2_000_000)
    ap.add_argument("--upserts", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --base and --upserts")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--keep", help="build the table in this directory (or reuse the one there) and keep it")
    args = ap.parse_args()
    n_base, n_up = int(args.base * args.scale), int(args.upserts * args.scale)
    work = args.keep or scratch_dir("tm-bench-floor-")
    path = os.path.join(work, "table")
    from engine.spark import get_spark

    try:
        spark = get_spark(cores=args.cores)
        if os.path.isdir(os.path.join(path, ".hoodie")):
            build_s, layout = 0.0, table_layout(path)
        else:
            build_s, layout = timed(lambda: build_table(spark, path, work, n_base, n_up, "avro"))
        log(f"bench_read_floor: table ready ({build_s:.1f}s): {layout}")
        bases = base_files(path)
        rows = check_rows(spark, path, bases)
        times = measure(cases(spark, path, bases), args.repeat)
        got = ratios(times)
        emit("bench_read_floor", {
            "base_records": n_base, "upsert_records": n_up, "cores": args.cores, "table": layout,
            "build_s": round(build_s, 1), "rows": rows, "repeat": args.repeat, "times": times, "ratios": got,
            "targets": TARGETS, "meets_target": {k: got[k] <= v for k, v in TARGETS.items()},
            "arrow_threads": pa.cpu_count(),
        })
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
