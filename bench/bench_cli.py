"""The CLI end to end as a user meets it: each command a fresh `tidemark` process, in-process vs `--spark`.

    python -m bench.bench_cli [--batch 125000] [--batches 8] [--repeat 3] [--scale 1.0]

Input: `--batches` Parquet files of `--batch` new records each (anchors' schema). Table H gets every batch with
`tidemark write` (the default: in-process for an input of this size) — 1 M rows at full scale; every write
after the first is timed (the first warms the OS cache). Table S gets `--repeat` + 1 batches
with `tidemark write --spark` (the behaviour before engine.placement: every write started a Spark JVM).
Then `tidemark read H --output` in-process (default) and with `--spark`, against hudi 0.5.0 reading the same
table into a Parquet file in a fresh process (import, read, write). Then `tidemark compaction run` of the whole of
H (planned `--strategy unbounded` on a fresh copy each time, untimed) with `--local` (what the default picks for
it) and with `--spark`. Every time is a whole process's wall time.
The JVM class-data archive is built beforehand, so Spark starts at its best.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time

from bench.common import emit, log, records, scratch_dir, stage_parquet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_WRITE_S = 2.0
HUDI_READ = ("import sys, pyarrow as pa, pyarrow.parquet as pq; from hudi import HudiReadOptions, HudiTableBuilder; "
             "t = pa.Table.from_batches(HudiTableBuilder.from_base_uri(sys.argv[1]).build().read(HudiReadOptions()));"
             " pq.write_table(t, sys.argv[2]); print(t.num_rows)")


CPU: list[float] = []   # user + system seconds of each process run() waited for (a JVM it started included)


def run(argv: list[str]) -> float:
    """Wall seconds of one fresh process (its CPU seconds appended to CPU); fails loudly on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def tidemark(*args: str) -> float:
    return run([sys.executable, "-m", "engine", *args])


def create(path: str) -> None:
    tidemark("create", path, "--name", "bench_cli", "--record-key", "id", "--partition-field", "region",
             "--ordering-field", "seq", "--event-time-field", "event_time", "--hive-style",
             "--config", "hoodie.bucket.index.num.buckets=4")


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def writes(path: str, inputs: list[str], timed_from: int, flags: list[str]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of the writes from `timed_from` on."""
    times, cpu = [], []
    for i, source in enumerate(inputs):
        seconds = tidemark("write", path, "--input", source, *flags)
        log(f"bench_cli: write {i} {' '.join(flags) or '(default)'} {seconds:.2f}s ({CPU[-1]:.2f} CPU-s)")
        if i >= timed_from:
            times.append(seconds)
            cpu.append(CPU[-1])
    return times, cpu


def reads(path: str, out: str, repeats: int, flags: list[str]) -> tuple[list[float], list[float]]:
    times = [tidemark("read", path, "--output", out, *flags) for _ in range(repeats)]
    return times, CPU[-repeats:]


def hudi_reads(path: str, out: str, repeats: int) -> tuple[list[float], list[float]]:
    times = [run([sys.executable, "-c", HUDI_READ, path, out]) for _ in range(repeats)]
    return times, CPU[-repeats:]


def compactions(path: str, work: str, repeats: int, flags: list[str]) -> tuple[list[float], list[float]]:
    """`compaction run` on fresh copies of `path`, each planned first (`--strategy unbounded`, untimed); `flags`
    --local (what the default picks for a plan this size) or --spark."""
    times, cpu = [], []
    for i in range(repeats):
        copy = os.path.join(work, f"compact-{flags[0].lstrip('-')}-{i}")
        shutil.copytree(path, copy, symlinks=True)
        tidemark("compaction", "schedule", copy, "--strategy", "unbounded")
        os.sync()   # the copy's dirty pages go to disk now, not during the timed run
        times.append(tidemark("compaction", "run", copy, *flags))
        cpu.append(CPU[-1])
        log(f"bench_cli: compaction run {' '.join(flags)} {times[-1]:.2f}s ({cpu[-1]:.2f} CPU-s)")
        shutil.rmtree(copy, ignore_errors=True)
    return times, cpu


def _r(values: list[float]) -> list[float]:
    return [round(v, 3) for v in values]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=125_000)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --batch")
    args = ap.parse_args()
    n = max(1, int(args.batch * args.scale))
    load_before = round(os.getloadavg()[0], 2)
    work = scratch_dir("tm-bench-cli-")
    try:
        inputs = [stage_parquet(records(n, first_key=i * n, seq=1, seed=i), work, f"batch{i}.parquet")
                  for i in range(max(args.batches, args.repeat + 1))]
        run([sys.executable, "-c", "from engine.spark import get_spark; get_spark()"])   # the CDS archive
        here, spark_table = os.path.join(work, "here"), os.path.join(work, "spark")
        create(here)
        create(spark_table)
        in_process, in_process_cpu = writes(here, inputs[:args.batches], 1, [])
        on_spark, on_spark_cpu = writes(spark_table, inputs[:args.repeat + 1], 1, ["--spark"])
        total = n * args.batches
        out = os.path.join(work, "out.parquet")
        tidemark("read", here, "--output", out)   # warm the cache
        read_here = reads(here, out, args.repeat, [])
        read_spark = reads(here, out, args.repeat, ["--spark"])
        hudi = hudi_reads(here, os.path.join(work, "hudi.parquet"), args.repeat)
        compact_here = compactions(here, work, args.repeat, ["--local"])
        compact_spark = compactions(here, work, args.repeat, ["--spark"])
        w_here, w_spark = median(in_process), median(on_spark)
        r_here, r_spark, r_hudi = median(read_here[0]), median(read_spark[0]), median(hudi[0])
        emit("bench_cli", {
            "batch_records": n, "table_records": total, "repeat": args.repeat, "load_avg_1m_before": load_before,
            "write_in_process_s": round(w_here, 3), "write_spark_s": round(w_spark, 3),
            "write_speedup": round(w_spark / w_here, 2),
            "write_cpu_s": {"in_process": round(median(in_process_cpu), 3), "spark": round(median(on_spark_cpu), 3)},
            "write_runs_s": {"in_process": _r(in_process), "spark": _r(on_spark)},
            "read_in_process_s": round(r_here, 3), "read_spark_s": round(r_spark, 3), "read_hudi_s": round(r_hudi, 3),
            "read_cpu_s": {"in_process": round(median(read_here[1]), 3), "spark": round(median(read_spark[1]), 3),
                           "hudi": round(median(hudi[1]), 3)},
            "read_runs_s": {"in_process": _r(read_here[0]), "spark": _r(read_spark[0]), "hudi": _r(hudi[0])},
            "ratio_read_in_process_vs_hudi": round(r_here / r_hudi, 3),
            "ratio_read_spark_vs_hudi": round(r_spark / r_hudi, 3),
            "compaction_run_in_process_s": round(median(compact_here[0]), 3),
            "compaction_run_spark_s": round(median(compact_spark[0]), 3),
            "compaction_run_cpu_s": {"in_process": round(median(compact_here[1]), 3),
                                     "spark": round(median(compact_spark[1]), 3)},
            "compaction_run_runs_s": {"in_process": _r(compact_here[0]), "spark": _r(compact_spark[0])},
            "target_write_s": TARGET_WRITE_S, "meets_write_target": w_here <= TARGET_WRITE_S,
            "meets_read_target": r_here <= r_hudi,
        })
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
