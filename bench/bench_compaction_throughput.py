"""Compaction throughput: run_compaction through Spark vs a plain-Python floor doing the same work.

    python -m bench.bench_compaction_throughput [--scale 1.0] [--base 2000000] [--upserts 1000000]
                                                [--variants 1,8] [--cores 1,2] [--repeat 3] [--keep DIR]
    python -m bench.bench_compaction_throughput --interleave ROUNDS [--warm-runs N] [--table DIR/table-8fg]

`--interleave`: 1 vs 2 cores only, on the 8-file-group table: a local[1] and a local[2] session alive side by
side, runs alternating 1, 2, 1, 2, ... (median of each), and every round a pure-Python control loop in 1 vs 2
processes, which says how much parallelism the (shared) machine gave at that moment; and the CPU seconds of
each Python worker per run (from /proc): the busiest worker's is the run's critical path on an idle machine.
`--warm-runs N`: each driver first makes N untimed compactions. A fresh driver JVM spends ~0.5-1 CPU-s per run
JIT-compiling Spark's task path over its first ~10 runs; a 1-core run leaves that to the idle second core, a
2-core run pays it from its workers' time. The control plane's workers keep their session for life, so their
compactions meet a warm JVM; the JVM's CPU per run is reported either way.
`--pin`: each driver's whole process tree on as many CPUs as its Spark cores (sched_setaffinity, inherited by
the JVM and its Python workers). Without it "1 core" is one Spark task slot on a 2-CPU machine, whose JIT
compiler, garbage collector and driver run on the other CPU for free; with it, both runs pay for them.

Tables (built with Spark, excluded from timings): `--base` records written with write_dataframe and turned
into base files by an unbounded compaction, then `--upserts` updates of existing keys written in 4
deltacommits. Variant 1 = one file group (1 bucket, 1 partition); variant 8 = 4 buckets x 2 partitions.

Timed, medians of `--repeat`, on a fresh copy of the pristine table each time (copy + schedule untimed):
- ours: Table.schedule_compaction(strategy="unbounded") then Table.run_compaction() timed, in a fresh
  subprocess per core count (get_spark(cores=N); session start and a warm-up job excluded);
- floor, in this process, no Spark: per file group pq.read_table(base) (1 thread), read_log_file of the
  logs (engine.logformat.avro_codec vectorized decode), pyarrow/numpy merge (latest seq per key wins, base rows of
  updated keys dropped), pq.write_table (snappy; dictionaries where values repeat, as ours: `parquet_encoding`).
  `floor_1p`: file groups one after another; `floor_2p`:
  two worker processes (variant 8 only).
- ours in-process: the same runs with `run_compaction(local=True)` in this process (threads, one per CPU; what
  `tidemark compaction run` does below TIDEMARK_LOCAL_MAX_COMPACTION_MB), after one untimed warm-up.
Ratio = ours / floor (target <= 1.5 for 1 core vs floor_1p).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import (
    cpu_split,
    descendants,
    emit,
    log,
    median_time,
    rate,
    records,
    scratch_dir,
    stage_parquet,
    table_layout,
    timed,
    upsert_keys,
)
from engine.io.parquet_encoding import dictionary_columns

TARGET_RATIO = 1.5
UPSERT_WRITES = 4
VARIANTS = {1: (1, 1), 8: (4, 2), 16: (8, 2), 32: (16, 2)}      # file groups -> (buckets, partitions)


# ------------------------------------------------------------------------------------------ build

def build(spark, path: str, work: str, n_base: int, n_up: int, file_groups: int) -> dict:
    from engine import Table

    buckets, partitions = VARIANTS[file_groups]
    table = Table.create(path, name="bench_compact", record_keys=["id"], partition_fields=["region"],
                         ordering_field="seq", event_time_field="event_time", merge_mode="event_time",
                         hive_style=True, settings={"hoodie.bucket.index.num.buckets": str(buckets)})

    def rows(t: pa.Table) -> pa.Table:   # 1 partition: every record in region "eu"
        return t if partitions > 1 else t.set_column(1, "region", pa.array(["eu"] * t.num_rows, pa.string()))

    def write(t: pa.Table, name: str) -> None:
        table.write(spark.read.parquet(stage_parquet(rows(t), work, f"{name}.parquet")), "upsert")

    write(records(n_base, seq=0), "base")
    plan = table.schedule_compaction(strategy="unbounded")
    table.run_compaction(plan.instant)
    keys = upsert_keys(n_base, n_up)
    step = -(-len(keys) // UPSERT_WRITES)
    for i in range(UPSERT_WRITES):
        chunk = keys[i * step:(i + 1) * step]
        write(records(len(chunk), keys=chunk, seq=i + 1, seed=100 + i), f"upsert{i}")
    return table_layout(path)


# ------------------------------------------------------------------------------------------ floor

def slices_of(path: str) -> list[tuple[str, tuple[str, ...]]]:
    from engine.read.query import plan_read

    return [(s.base_path, s.log_paths) for s in plan_read(path, "snapshot").slices]


PHASES: dict[str, float] = {}   # floor phase seconds, summed over the slices of the last floor() call


def floor_slice(base_path: str, log_paths: tuple[str, ...], out: str) -> int:
    """Read base, decode logs, vectorized merge (latest seq per key wins), write: no Spark, no engine merge."""
    from engine.logformat import DataBlock, read_log_file

    t0 = time.perf_counter()
    base = pq.read_table(base_path, use_threads=False)
    t1 = time.perf_counter()
    blocks = [b.records for p in log_paths for b in read_log_file(p).blocks if isinstance(b, DataBlock)]
    t2 = time.perf_counter()
    logs = pa.concat_tables(blocks)
    codes = pc.dictionary_encode(logs.column("_hoodie_record_key")).combine_chunks().indices.to_numpy()
    seq = logs.column("seq").to_numpy()
    order = np.lexsort((np.arange(len(codes)), seq, codes))
    last = np.ones(len(order), bool)
    last[:-1] = codes[order][1:] != codes[order][:-1]
    winners = logs.take(pa.array(np.sort(order[last])))
    updated = pc.is_in(base.column("_hoodie_record_key"), value_set=winners.column("_hoodie_record_key"))
    merged = pa.concat_tables([base.filter(pc.invert(updated)), winners.cast(base.schema)])
    t3 = time.perf_counter()
    pq.write_table(merged, out, compression="snappy", row_group_size=1_000_000,
                   use_dictionary=dictionary_columns(merged))   # the encoding our base files get
    t4 = time.perf_counter()
    for k, v in (("read_base", t1 - t0), ("decode_logs", t2 - t1), ("merge", t3 - t2), ("write", t4 - t3)):
        PHASES[k] = PHASES.get(k, 0.0) + v
    return merged.num_rows


def _floor_job(args: tuple) -> int:
    return floor_slice(*args)


def floor(path: str, out_dir: str, pool: ProcessPoolExecutor | None = None) -> int:
    """All file groups one after another, or spread over `pool` (started and warmed beforehand, untimed)."""
    jobs = [(b, logs, os.path.join(out_dir, f"floor-{i}.parquet")) for i, (b, logs) in enumerate(slices_of(path))]
    if pool is None:
        return sum(_floor_job(j) for j in jobs)
    return sum(pool.map(_floor_job, jobs))


def _warm(_: object = None) -> int:
    import engine.logformat  # noqa: F401 - import in the pool's processes before timing

    return os.getpid()


# ------------------------------------------------------------------------------------------ ours (worker)

def fresh_copy(pristine: str, dest: str) -> str:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(pristine, dest, symlinks=True)
    return dest


def _worker_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each Python worker under this driver (pyspark.daemon and its forks)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in descendants(os.getpid())[1:]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"pyspark.daemon" not in fh.read():
                    continue
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rindex(b")") + 2:].split()
        out[pid] = (int(rest[11]) + int(rest[12])) / tick
    return out


def _jvm_cpu() -> float:
    """CPU seconds of the driver JVM below this process (its JIT compiler threads among them)."""
    return cpu_split()["jvm"]


def _one_run(pristine: str, scratch: str, cores: int, r: int,
             local: bool | None = None) -> tuple[float, int, list[float], float]:
    """One timed run; also the CPU seconds each Python worker spent in it (busiest first) and the JVM's.
    `local=True`: on this process's threads (cores 0 names the run's copy)."""
    from engine import Table

    path = fresh_copy(pristine, os.path.join(scratch, f"run-{cores}-{r}"))
    table = Table.open(path)
    plan = table.schedule_compaction(strategy="unbounded")
    # The copy's dirty pages go to disk now, not during the timed run: the kernel's writeback would take CPU
    # from a 2-core run's workers while a 1-core run has a spare core to absorb it.
    os.sync()
    before, jvm = _worker_cpu(), _jvm_cpu()
    seconds, result = timed(lambda t=table, c=plan.instant: t.run_compaction(c, local=local))
    spent = sorted((round(v - before.get(pid, 0.0), 2) for pid, v in _worker_cpu().items()), reverse=True)
    jvm = _jvm_cpu() - jvm
    shutil.rmtree(path, ignore_errors=True)
    return round(seconds, 4), result.records_written, [c for c in spent if c > 0.05], round(jvm, 2)


def worker(pristine: str, scratch: str, cores: int, repeat: int, serve: bool = False, warm_runs: int = 0,
           pin: bool = False) -> None:
    """Subprocess: start Spark with `cores`, then time run_compaction on fresh copies of the table.
    `serve`: after the warm-up (and `warm_runs` untimed compactions), one run per "run" line on stdin (one JSON
    line back each), until EOF. `pin`: this process and everything it starts (the JVM, its Python workers)
    run on the first `cores` CPUs only."""
    from engine.spark import get_spark

    if pin:
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cores]))

    start_s, spark = timed(lambda: get_spark(cores=cores))
    # Warm-up: start the Python workers and import the compaction code there (excluded, like session start).
    warm_s = timed(lambda: spark.sparkContext.parallelize(range(cores), cores)
                   .map(lambda _: __import__("engine.compaction.file_group_task").__name__).collect())[0]
    if serve:
        for r in range(warm_runs):
            _one_run(pristine, scratch, cores, -1 - r)
        print(json.dumps({"ready": True, "spark_start_s": round(start_s, 2), "warmup_s": round(warm_s, 2)}),
              flush=True)
        for r, line in enumerate(sys.stdin):
            if line.strip() != "run":
                break
            seconds, n, cpu, jvm = _one_run(pristine, scratch, cores, r)
            print(json.dumps({"s": seconds, "records_written": n, "worker_cpu_s": cpu, "jvm_cpu_s": jvm,
                              "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)
        spark.stop()
        return
    runs, written = [], []
    for r in range(repeat):
        seconds, n, _, _ = _one_run(pristine, scratch, cores, r)
        runs.append(seconds)
        written.append(n)
    spark.stop()
    print(json.dumps({"cores": cores, "spark_start_s": round(start_s, 2), "warmup_s": round(warm_s, 2),
                      "median_s": sorted(runs)[len(runs) // 2], "runs_s": runs, "records_written": written[0],
                      "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)


def in_process_runs(pristine: str, scratch: str, repeat: int) -> dict:
    """run_compaction(local=True) in this process (no Spark here): the file groups on one thread per CPU, as
    `tidemark compaction run` runs a plan under TIDEMARK_LOCAL_MAX_COMPACTION_MB."""
    _one_run(pristine, scratch, 0, -1, local=True)   # warm-up: imports, page cache
    runs = [_one_run(pristine, scratch, 0, r, local=True)[:2] for r in range(repeat)]
    return {"median_s": statistics.median(s for s, _ in runs), "runs_s": [s for s, _ in runs],
            "records_written": sorted({n for _, n in runs})}


def run_worker(pristine: str, scratch: str, cores: int, repeat: int) -> dict:
    cmd = [sys.executable, "-m", "bench.bench_compaction_throughput", "--worker", pristine, "--scratch", scratch,
           "--worker-cores", str(cores), "--repeat", str(repeat)]
    proc = subprocess.run(cmd, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"cores": cores, "error": f"exit {proc.returncode}", "stderr_tail": proc.stderr.splitlines()[-8:]}
    return json.loads(lines[-1])


def _control(n: int) -> int:
    """A pure-Python loop: what 1 vs 2 processes gain on this machine right now, with no memory traffic."""
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def control_speedup(pool1: ProcessPoolExecutor, pool2: ProcessPoolExecutor, n: int = 3_000_000) -> dict:
    t1 = timed(lambda: list(pool1.map(_control, [n] * 4)))[0]
    t2 = timed(lambda: list(pool2.map(_control, [n] * 4)))[0]
    return {"1p_s": round(t1, 3), "2p_s": round(t2, 3), "speedup": round(t1 / t2, 3)}


def interleaved(pristine: str, work: str, rounds: int, warm_runs: int = 0, pin: bool = False) -> dict:
    """local[1] and local[2] alive side by side (two driver processes, warmed up), runs alternating
    1, 2, 1, 2, ...; each round also times the control loop in 1 vs 2 processes. `warm_runs`: untimed
    compactions each driver makes first (a long-lived driver's JVM has finished compiling Spark's task path).
    `pin`: each driver's whole process tree confined to as many CPUs as its Spark cores."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    procs = {}
    for n in (1, 2):
        cmd = [sys.executable, "-m", "bench.bench_compaction_throughput", "--worker", pristine, "--scratch", work,
               "--worker-cores", str(n), "--serve", "--warm-runs", str(warm_runs)] + (["--pin"] if pin else [])
        procs[n] = subprocess.Popen(cmd, cwd=here, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
        ready = _json_line(procs[n])
        log(f"  local[{n}] ready: {ready}")
    runs: dict[int, list[float]] = {1: [], 2: []}
    cpus: dict[int, list[list[float]]] = {1: [], 2: []}
    jvms: dict[int, list[float]] = {1: [], 2: []}
    written, loads, controls = set(), [], []
    try:
        with ProcessPoolExecutor(1) as pool1, ProcessPoolExecutor(2) as pool2:
            list(pool1.map(_control, [10]))
            list(pool2.map(_control, [10, 10]))
            for r in range(rounds):
                for n in (1, 2):
                    procs[n].stdin.write("run\n")
                    procs[n].stdin.flush()
                    out = _json_line(procs[n])
                    runs[n].append(out["s"])
                    cpus[n].append(out["worker_cpu_s"])
                    jvms[n].append(out["jvm_cpu_s"])
                    written.add(out["records_written"])
                    loads.append(out["load_avg_1m"])
                controls.append(control_speedup(pool1, pool2))
                log(f"  round {r}: 1 core {runs[1][-1]} s, 2 cores {runs[2][-1]} s, workers' CPU s {cpus[1][-1]} / "
                    f"{cpus[2][-1]}, JVM CPU s {jvms[1][-1]} / {jvms[2][-1]}, control {controls[-1]}")
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
    m1, m2 = statistics.median(runs[1]), statistics.median(runs[2])
    # Load-proof view: the busiest worker's CPU seconds are the run's critical path on an otherwise idle machine.
    c1 = statistics.median(sum(c) for c in cpus[1])
    c2 = statistics.median(max(c, default=0.0) for c in cpus[2])
    return {"warm_runs": warm_runs, "pinned": pin, "worker_cpu_1core_s": cpus[1], "worker_cpu_2core_s": cpus[2],
            "jvm_cpu_1core_s": jvms[1], "jvm_cpu_2core_s": jvms[2],
            "cpu_critical_path_speedup": round(c1 / c2, 3) if c2 else None,
            "cpu_total_2core_vs_1core": round(statistics.median(sum(c) for c in cpus[2]) / c1, 3) if c1 else None,
            "runs_1core_s": runs[1], "runs_2core_s": runs[2], "median_1core_s": m1, "median_2core_s": m2,
            "speedup_2_vs_1_core": round(m1 / m2, 3),
            "per_round_speedups": [round(a / b, 3) for a, b in zip(runs[1], runs[2])],
            "control_speedups": [c["speedup"] for c in controls],
            "control_speedup_median": statistics.median(c["speedup"] for c in controls),
            "records_written": sorted(written), "load_avg_1m": loads}


def _json_line(proc: subprocess.Popen) -> dict:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{"):
            out: dict = json.loads(line)
            return out
    raise RuntimeError(f"worker exited ({proc.wait()}) without a result")


# ------------------------------------------------------------------------------------------ main

def measure(pristine: str, work: str, n_in: int, n_out_expected: int, cores: list[int], repeat: int,
            file_groups: int) -> dict:
    out_dir = os.path.join(work, "floor-out")
    os.makedirs(out_dir, exist_ok=True)
    floor(pristine, out_dir)                                    # warm page cache and imports
    res: dict = {"floor_1p": median_time(lambda: floor(pristine, out_dir), repeat)}
    PHASES.clear()
    rows = floor(pristine, out_dir)
    res["floor_1p_phases_s"] = {k: round(v, 3) for k, v in PHASES.items()}
    if file_groups > 1:
        with ProcessPoolExecutor(2) as pool:
            list(pool.map(_warm, range(4)))
            floor(pristine, out_dir, pool)
            res["floor_2p"] = median_time(lambda: floor(pristine, out_dir, pool), repeat)
    shutil.rmtree(out_dir, ignore_errors=True)
    log(f"  floor {res}")
    for n in cores:
        res[f"ours_{n}core"] = run_worker(pristine, work, n, repeat)
        log(f"  ours {n} core(s): {res[f'ours_{n}core']}")
    res["ours_in_process"] = in_process_runs(pristine, work, repeat)
    log(f"  ours in-process: {res['ours_in_process']}")
    f1 = res["floor_1p"]["median_s"]
    res["floor_rows"] = rows
    res["rows_match"] = all(res[f"ours_{n}core"].get("records_written") == rows for n in cores)
    for n in cores:
        ours = res[f"ours_{n}core"].get("median_s")
        if ours:
            res[f"ratio_ours_{n}core_vs_floor_1p"] = round(ours / f1, 3)
            res[f"input_rec_per_s_ours_{n}core"] = round(rate(n_in, ours))
            if "floor_2p" in res:
                res[f"ratio_ours_{n}core_vs_floor_2p"] = round(ours / res["floor_2p"]["median_s"], 3)
    if res.get("ours_2core", {}).get("median_s"):
        res["ratio_in_process_vs_ours_2core"] = round(res["ours_in_process"]["median_s"] / res["ours_2core"]["median_s"], 3)
    if 1 in cores and 2 in cores and res["ours_1core"].get("median_s") and res["ours_2core"].get("median_s"):
        res["speedup_2_vs_1_core"] = round(res["ours_1core"]["median_s"] / res["ours_2core"]["median_s"], 3)
    res["input_rec_per_s_floor_1p"] = round(rate(n_in, f1))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --base and --upserts")
    ap.add_argument("--base", type=int, default=2_000_000)
    ap.add_argument("--upserts", type=int, default=1_000_000)
    ap.add_argument("--variants", default="1,8", help="file-group variants to run: 1 and/or 8")
    ap.add_argument("--cores", default="1,2", help="Spark core counts, one subprocess each")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="build the tables in this directory and keep them")
    ap.add_argument("--interleave", type=int, default=0, metavar="ROUNDS",
                    help="only 1 vs 2 cores on the 8-file-group table: ROUNDS alternating runs in two live "
                         "sessions, plus a control loop each round (no floor)")
    ap.add_argument("--warm-runs", type=int, default=0, metavar="N",
                    help="--interleave: N untimed compactions in each driver before the timed rounds (a "
                         "long-lived driver, as the control plane's workers keep theirs)")
    ap.add_argument("--pin", action="store_true",
                    help="--interleave: confine each driver's process tree (JVM, Python workers) to as many CPUs "
                         "as its Spark cores, so '1 core' is one CPU for everything, JIT and GC included")
    ap.add_argument("--table", help="reuse this 8-file-group table (from --keep DIR: DIR/table-8fg) unchanged")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    ap.add_argument("--worker-cores", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.scratch, args.worker_cores, args.repeat, args.serve, args.warm_runs, args.pin)
        return
    if args.pin and not args.interleave:
        ap.error("--pin applies to --interleave runs only")
    if args.interleave:
        args.variants = "8"
    n_base, n_up = int(args.base * args.scale), int(args.upserts * args.scale)
    variants = [int(v) for v in args.variants.split(",") if v]
    cores = [int(c) for c in args.cores.split(",") if c]
    work = args.keep or scratch_dir("tm-bench-compact-")
    result: dict = {"base_records": n_base, "upsert_records": n_up, "input_records": n_base + n_up}
    try:
        from engine.spark import get_spark

        tables = {}
        if args.table:   # an 8-file-group table built earlier by this bench (--keep), reused as the pristine copy
            tables[8] = (args.table, table_layout(args.table), 0.0)
            variants = [8]
        spark = get_spark(cores=2) if not args.table else None
        for fg in variants if spark is not None else []:
            path = os.path.join(work, f"table-{fg}fg")
            build_s, lay = timed(lambda p=path, g=fg: build(spark, p, os.path.join(work, f"stage-{g}"), n_base, n_up, g))
            log(f"bench_compaction_throughput: {fg} file group(s) built in {build_s:.1f}s: {lay}")
            tables[fg] = (path, lay, build_s)
            shutil.rmtree(os.path.join(work, f"stage-{fg}"), ignore_errors=True)
        if spark is not None:
            spark.stop()
            time.sleep(1)
        for fg in variants:
            path, lay, build_s = tables[fg]
            log(f"bench_compaction_throughput: measuring {fg} file group(s)")
            if args.interleave:
                result[f"fg{fg}"] = {"table": lay, "build_s": round(build_s, 1),
                                     **interleaved(path, work, args.interleave, args.warm_runs, args.pin)}
                continue
            m = measure(path, work, n_base + n_up, n_base, cores, args.repeat, fg)
            result[f"fg{fg}"] = {"table": lay, "build_s": round(build_s, 1), **m}
        if args.interleave:
            emit("bench_compaction_throughput", {**result, "target_speedup_2_vs_1_core": 1.8})
            return
        head = result.get("fg1") or result.get(f"fg{variants[0]}")
        ratio = head.get("ratio_ours_1core_vs_floor_1p")
        result["target_ratio"] = TARGET_RATIO
        result["meets_target"] = ratio is not None and ratio <= TARGET_RATIO
        emit("bench_compaction_throughput", result)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
