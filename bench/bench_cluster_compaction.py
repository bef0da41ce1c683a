"""Compaction on a 2-worker Spark standalone cluster vs local[2], side by side in one run.

    python -m bench.bench_cluster_compaction [--scale 1.0] [--base 400000] [--upserts 200000] [--repeat 3]

One table (built with local Spark, excluded from timings): `--base` records in 8 file groups (4 buckets x 2
partitions) turned into base files by an unbounded compaction, then `--upserts` updates in 4 deltacommits
(bench_compaction_throughput's builder). Then a standalone cluster from pyspark's own jars starts on this
machine (1 master + 2 workers with 1 core each, tests/support/spark_cluster.py), executors on a Python
*without* Tidemark (the engine arrives as the driver's zip), and the same compaction is timed on:
- `local[2]`: one driver process with SPARK_MASTER=local[2];
- `cluster`: one driver process with SPARK_MASTER=spark://… (2 executors x 1 core = the same 2 cores).
Each in a fresh driver process; session start and a warm-up job that imports the compaction code on every
executor are excluded; medians of `--repeat` runs, each on a fresh copy of the pristine table (schedule
untimed). Ratio = cluster / local[2]: the cost of executors in other JVMs (task serialisation, no shared
Python worker with the driver) at equal cores. Run order alternates so machine load drifts hit both.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.bench_compaction_throughput import build, fresh_copy
from bench.common import emit, log, scratch_dir, timed

ROOT = Path(__file__).resolve().parents[1]
MODES = ("local", "cluster")


def worker(pristine: str, scratch: str, repeat: int) -> None:
    """Subprocess: start Spark on SPARK_MASTER, warm every executor up, time run_compaction `repeat` times."""
    from engine import Table
    from engine.spark import get_spark

    start_s, spark = timed(get_spark)
    sc = spark.sparkContext
    slots = max(2, sc.defaultParallelism)
    warm_s = timed(lambda: sc.parallelize(range(4 * slots), 4 * slots)
                   .map(lambda _: __import__("engine.compaction.file_group_task").__file__).collect())[0]
    runs, written = [], []
    for r in range(repeat):
        path = fresh_copy(pristine, os.path.join(scratch, f"run-{os.getpid()}-{r}"))
        table = Table.open(path)
        plan = table.schedule_compaction(strategy="unbounded")
        seconds, result = timed(lambda t=table, c=plan.instant: t.run_compaction(c))
        runs.append(round(seconds, 3))
        written.append(result.records_written)
        shutil.rmtree(path, ignore_errors=True)
    master = sc.master
    spark.stop()
    print(json.dumps({"master": master, "spark_start_s": round(start_s, 2), "warmup_s": round(warm_s, 2),
                      "runs_s": runs, "records_written": written[0], "load_avg_1m": round(os.getloadavg()[0], 2)}),
          flush=True)


def run_worker(env: dict[str, str], pristine: str, scratch: str, repeat: int) -> dict:
    cmd = [sys.executable, "-m", "bench.bench_cluster_compaction", "--worker", pristine, "--scratch", scratch,
           "--repeat", str(repeat)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker on {env.get('SPARK_MASTER')} failed (exit {proc.returncode}):\n"
                           + "\n".join(proc.stderr.splitlines()[-15:]))
    return json.loads(lines[-1])


def measure(pristine: str, work: str, repeat: int, rounds: int) -> dict:
    from tests.support.spark_cluster import bare_executor_python, standalone_cluster

    python = bare_executor_python(Path(work))
    started = time.perf_counter()
    with standalone_cluster(Path(work) / "cluster", workers=2, cores=1) as cluster:
        cluster_up_s = time.perf_counter() - started
        envs = {"local": dict(os.environ, SPARK_MASTER="local[2]", TIDEMARK_DRIVER_MEMORY="2g"),
                "cluster": cluster.env(python)}
        envs["cluster"]["TIDEMARK_DRIVER_MEMORY"] = "2g"
        out: dict[str, list[dict]] = {m: [] for m in MODES}
        for i in range(rounds):
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                res = run_worker(envs[mode], pristine, work, repeat)
                log(f"  round {i + 1} {mode}: {res}")
                out[mode].append(res)
    runs = {m: sorted(s for r in out[m] for s in r["runs_s"]) for m in MODES}
    median = {m: runs[m][len(runs[m]) // 2] for m in MODES}
    return {"cluster_start_s": round(cluster_up_s, 1), "rounds": out,
            "median_s": median, "ratio_cluster_vs_local2": round(median["cluster"] / median["local"], 3),
            "rows_match": len({r["records_written"] for m in MODES for r in out[m]}) == 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --base and --upserts")
    ap.add_argument("--base", type=int, default=400_000)
    ap.add_argument("--upserts", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="timed compactions per driver process")
    ap.add_argument("--rounds", type=int, default=2, help="driver processes per mode, alternating order")
    ap.add_argument("--keep", help="build in this directory and keep it")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.scratch, args.repeat)
        return
    n_base, n_up = int(args.base * args.scale), int(args.upserts * args.scale)
    work = args.keep or scratch_dir("tm-bench-cluster-")
    try:
        from engine.spark import get_spark

        spark = get_spark(cores=2)
        path = os.path.join(work, "table")
        build_s, layout = timed(lambda: build(spark, path, os.path.join(work, "stage"), n_base, n_up, 8))
        spark.stop()
        shutil.rmtree(os.path.join(work, "stage"), ignore_errors=True)
        log(f"bench_cluster_compaction: table built in {build_s:.1f}s: {layout}")
        result = {"base_records": n_base, "upsert_records": n_up, "table": layout, "build_s": round(build_s, 1),
                  **measure(path, work, args.repeat, args.rounds)}
        emit("bench_cluster_compaction", result)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
