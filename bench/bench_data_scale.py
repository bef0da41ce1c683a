"""How cost grows with data: insert, upsert 10 %, event-time compaction, RO and snapshot reads at 1, 4 and 16 M rows.

    python -m bench.bench_data_scale [--sizes 1,4,16] [--scale 1.0] [--cores 2] [--buckets-per-million 4]

Each size gets a fresh local table (partitioned by `region`, bucket index with `--buckets-per-million` buckets per
million rows, so file groups stay the same size as the table grows — what an operator sizing buckets does) and
runs, through the path that size takes by default (`engine.placement`: in-process up to TIDEMARK_LOCAL_MAX_ROWS
input rows / TIDEMARK_LOCAL_MAX_MB of files, on Spark local[CORES] above):
- insert: N rows from Parquet files of 1 M rows each (the bench's generator, `bench.common.records`);
- upsert: 10 % of the keys again (a newer `seq`), as log files (in-process at every size up to 20 M: 2 M
  input rows);
- compaction: an event-time plan at the median event time, scheduled and run;
- RO read and snapshot read into a Parquet file (`Table.read(output=...)`, streamed, so memory is not the result's).
Prints seconds and microseconds per row for each step and size, wall and CPU (user + system seconds of the
whole process tree: this process, the Spark JVM and its Python workers — what the step cost the machine, however
busy it was), the ratios of the largest size's time per row to the smallest's, and the peak resident memory of
every process that ran the step (this process, the Spark JVM, Spark's
Python workers), sampled every 50 ms. One JSON line on stdout; progress on stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from bench.common import descendants, emit, log, records, scratch_dir, tree_cpu_s, upsert_keys

STEPS = ("insert", "upsert_10pct", "compaction", "read_optimized", "snapshot")
FILE_ROWS = 1_000_000


def _rss_mb(pid: int) -> tuple[str, float] | None:
    """The process's role (self, jvm, python worker) and its resident memory now."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            rss = next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0)
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None
    role = "self" if pid == os.getpid() else "jvm" if cmd.endswith("java") else "python_workers"
    return role, rss / 1024


@contextmanager
def peak_memory() -> Iterator[dict[str, float]]:
    """Peak RSS (MB) per role while the block runs: the largest single process of each role."""
    peaks: dict[str, float] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in descendants(os.getpid()):
                got = _rss_mb(pid)
                if got is not None:
                    peaks[got[0]] = max(peaks.get(got[0], 0.0), got[1])
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peaks
    finally:
        done.set()
        sampler.join()


def _stage(directory: str, n: int, keys_of: Callable[[int, int], Any], seq: int) -> list[str]:
    """Parquet input files of at most FILE_ROWS rows each (generated a file at a time: bounded memory here)."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, first in enumerate(range(0, n, FILE_ROWS)):
        rows = records(min(FILE_ROWS, n - first), keys=keys_of(first, min(FILE_ROWS, n - first)), seq=seq, seed=i)
        path = os.path.join(directory, f"part-{i:04d}.parquet")
        pq.write_table(rows, path)
        paths.append(path)
    return paths


def stage_size(root: str, n: int) -> None:
    """The inputs of size `n`: generated here, before the steps' process starts (its memory is the steps' own)."""
    _stage(os.path.join(root, f"in{n}"), n, lambda first, k: np.arange(first, first + k), 0)
    chosen = upsert_keys(n, n // 10)
    _stage(os.path.join(root, f"up{n}"), len(chosen), lambda first, k: chosen[first:first + k], 1)


def _inputs(root: str, kind: str, n: int) -> list[str]:
    folder = os.path.join(root, f"{kind}{n}")
    return sorted(os.path.join(folder, f) for f in os.listdir(folder))


def run_size(root: str, n: int, buckets: int) -> dict[str, Any]:
    """Every step on a fresh table of `n` rows, in this process (a fresh one per size: `main`)."""
    from engine import Table, env, placement
    from engine.spark import get_spark

    path = os.path.join(root, f"t{n}")
    table = Table.create(path, name=f"scale_{n}", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                         event_time_field="event_time", merge_mode="event_time", hive_style=True,
                         settings={"hoodie.bucket.index.num.buckets": str(buckets)})
    inserts, upserts = _inputs(root, "in", n), _inputs(root, "up", n)
    out: dict[str, Any] = {"rows": n, "buckets": buckets}
    if n > env.whole(placement.MAX_ROWS_ENV, placement.DEFAULT_MAX_ROWS):   # this size's writes run on Spark: its
        t0 = time.perf_counter()                                              # start is not a per-row cost
        get_spark()
        out["spark_start_s"] = round(time.perf_counter() - t0, 3)
    middle = records(1, keys=np.array([n // 2])).column("event_time")[0].as_py()

    def step(name: str, rows: int, fn: Callable[[], Any]) -> None:
        log(f"{n:,} rows: {name}")
        # The step before left its files' pages dirty (the insert's: as much as the table), and a file system
        # journal commit makes this step's fsyncs wait for their write-back: at 4 M rows that took the upsert from
        # 0.33 s to 0.57 s. Written back first, outside the timing, each step pays for its own writes only.
        os.sync()
        with peak_memory() as peaks:
            cpu0, t0 = tree_cpu_s(), time.perf_counter()
            fn()
            seconds, cpu = time.perf_counter() - t0, tree_cpu_s() - cpu0
        out[name] = {"s": round(seconds, 3), "us_per_row": round(seconds / rows * 1e6, 3),
                     "cpu_s": round(cpu, 2), "cpu_us_per_row": round(cpu / rows * 1e6, 3),
                     "peak_rss_mb": {k: round(v) for k, v in sorted(peaks.items())}}

    step("insert", n, lambda: table.write(inserts, "insert"))
    step("upsert_10pct", n // 10, lambda: table.write(upserts, "upsert"))

    def compact() -> None:
        plan = table.schedule_compaction(threshold=middle)
        out["compaction_file_groups"] = len(plan.operations)
        table.run_compaction(plan.instant)

    step("compaction", n, compact)
    for query in ("read_optimized", "snapshot"):
        target = os.path.join(root, f"{query}-{n}.parquet")
        step(query, n, lambda q=query, t=target: table.read(q, output=t))
        os.remove(target)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16", help="millions of rows, comma separated")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--buckets-per-million", type=int, default=4)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every size (bench.run_all --scale)")
    ap.add_argument("--rounds", type=int, default=1, help="every size this many times; medians reported")
    ap.add_argument("--run", nargs=3, metavar=("ROOT", "ROWS", "BUCKETS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:   # one size's steps, in a process of its own
        print(json.dumps(run_size(args.run[0], int(args.run[1]), int(args.run[2]))), flush=True)
        return
    env = {**os.environ, "SPARK_MASTER": os.environ.get("SPARK_MASTER", f"local[{args.cores}]")}
    sizes = [int(float(s) * args.scale * 1_000_000) for s in args.sizes.split(",")]
    # Every round runs every size, smallest first, so a change of load between rounds reaches all sizes alike.
    rounds = [[run_fresh(env, n, args.buckets_per_million) for n in sizes] for _ in range(args.rounds)]
    results = [median_size([r[i] for r in rounds]) for i in range(len(sizes))]
    growth = {s: round(results[-1][s]["us_per_row"] / results[0][s]["us_per_row"], 2) for s in STEPS}
    cpu_growth = {s: round(results[-1][s]["cpu_us_per_row"] / max(results[0][s]["cpu_us_per_row"], 1e-9), 2)
                  for s in STEPS}
    emit("bench_data_scale", {"sizes": results, "rounds": len(rounds), "us_per_row_largest_over_smallest": growth,
                              "cpu_us_per_row_largest_over_smallest": cpu_growth, "target_growth": 1.2,
                              **({"every_round": rounds} if len(rounds) > 1 else {})})


def run_fresh(env: dict[str, str], n: int, buckets_per_million: int) -> dict[str, Any]:
    """One size's steps on freshly staged inputs, in a process of its own."""
    root = scratch_dir("tidemark-data-scale-")
    try:
        log(f"{n:,} rows: generating the inputs")
        stage_size(root, n)
        buckets = max(1, buckets_per_million * n // 1_000_000)
        done = subprocess.run([sys.executable, "-m", "bench.bench_data_scale", "--run", root, str(n), str(buckets)],
                              env=env, stdout=subprocess.PIPE, text=True, check=True)
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def median_size(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One size's figures over the rounds: each step's time and CPU the median of the rounds (with its per-row
    figures), its peak memory the largest."""
    out = dict(runs[0])
    for step in STEPS:
        figures = [r[step] for r in runs]
        rows = runs[0]["rows"] // 10 if step == "upsert_10pct" else runs[0]["rows"]   # as `run_size` steps them
        wall, cpu = statistics.median(f["s"] for f in figures), statistics.median(f["cpu_s"] for f in figures)
        peak = {role: max(f["peak_rss_mb"].get(role, 0) for f in figures) for role in figures[0]["peak_rss_mb"]}
        out[step] = {"s": round(wall, 3), "us_per_row": round(wall / rows * 1e6, 3),
                     "cpu_s": round(cpu, 2), "cpu_us_per_row": round(cpu / rows * 1e6, 3),
                     "peak_rss_mb": peak}
    return out

if __name__ == "__main__":
    main()
