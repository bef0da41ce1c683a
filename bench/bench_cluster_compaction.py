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

    python -m bench.bench_cluster_compaction --critical-path [--cores 2,4] [--file-groups 32] [--scale 4]

Scaling with executor cores on a machine with fewer CPUs than cores: wall time cannot show it, so each run is
measured by CPU. One standalone cluster of max(cores) workers x 1 core; a driver per core count k takes k of them
(`spark.cores.max`, so Spark's default parallelism — and the engine's bundling of file groups into tasks — is
k), writes Spark's event log, and reads /proc for every executor's CPU (its JVM, and its Python daemon and
workers) before and after each run. Per run: the stage's tasks (event log: executor, launch, finish, JVM CPU)
each cost the CPU its Python worker measured over the task's work (CompactionResult.spark_tasks)
plus a share of the rest of its executor's CPU over the run (JVM; Python outside the work), in proportion;
the driver's serial part is the run's wall time minus the span from the first task's launch to the last one's
finish (planning, task serialisation, scheduling, commit); the critical path on k cores is the serial part plus
the makespan of the tasks on k slots, in Spark's launch order (greedy; longest-first shown too). The ratio is
critical path(min k) / critical path(k), medians over each driver's runs after its first. The serial part is also
split at the run's Spark job (event log: submission, completion): the driver before it, Spark to the first launch,
Spark after the last finish, the driver after it (`serial_phases_s`).

    --versus DIR   (either mode) another source tree's drivers alternate with this tree's on the same cluster and
                   table, summarised apart: before/after pairs, e.g. `git archive HEAD~1 | tar -x -C DIR`.
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
from pathlib import Path

from bench.bench_compaction_throughput import build, fresh_copy
from bench.common import emit, log, scratch_dir, timed

ROOT = Path(__file__).resolve().parents[1]
MODES = ("local", "cluster")


def worker(pristine: str, scratch: str, repeat: int, trace: str | None = None) -> None:
    """Subprocess: start Spark on SPARK_MASTER, warm every executor up, time run_compaction `repeat` times.
    `trace` (the event log's folder): also each run's tasks and executors' CPU (`--critical-path`)."""
    from bench.common import cpu_split
    from engine import Table
    from engine.spark import get_spark

    start_s, spark = timed(get_spark)
    sc = spark.sparkContext
    if trace:
        _await_executors(sc, int(os.environ["BENCH_EXECUTORS"]))
    slots = max(2, sc.defaultParallelism)
    warm_s = timed(lambda: sc.parallelize(range(4 * slots), 4 * slots)
                   .map(lambda _: __import__("engine.compaction.file_group_task").__file__).collect())[0]
    runs, written, windows, cpus, drivers, figures = [], [], [], [], [], []
    app_id, parallelism = sc.applicationId, sc.defaultParallelism
    for r in range(repeat):
        path = fresh_copy(pristine, os.path.join(scratch, f"run-{os.getpid()}-{r}"))
        table = Table.open(path)
        plan = table.schedule_compaction(strategy="unbounded")
        os.sync()   # the copy's dirty pages written back now, not on the run's CPUs
        before, driver = (executor_cpu(app_id), cpu_split()) if trace else ({}, {})
        t0 = time.time()
        seconds, result = timed(lambda t=table, c=plan.instant: t.run_compaction(c))
        t1 = time.time()
        if trace:
            after, driver_after = executor_cpu(app_id), cpu_split()
            windows.append((t0, t1))
            cpus.append({e: {k: round(after[e][k] - before.get(e, {}).get(k, 0.0), 3) for k in after[e]}
                         for e in after})
            drivers.append({k: round(driver_after[k] - driver[k], 3) for k in ("self", "jvm")})
            figures.append([f.to_dict() for f in result.spark_tasks or ()])
        runs.append(round(seconds, 3))
        written.append(result.records_written)
        shutil.rmtree(path, ignore_errors=True)
    master = sc.master
    spark.stop()
    out = {"master": master, "spark_start_s": round(start_s, 2), "warmup_s": round(warm_s, 2),
           "runs_s": runs, "records_written": written[0], "load_avg_1m": round(os.getloadavg()[0], 2)}
    if trace:
        out.update(default_parallelism=parallelism,
                   runs=[{**analyse_run(t0, t1, tasks, cpu, f), "driver_cpu_s": d} for (t0, t1), tasks, cpu, d, f
                         in zip(windows, tasks_in_windows(trace, app_id, windows), cpus, drivers, figures)])
    print(json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------------ --critical-path

def _await_executors(sc, n: int, timeout_s: float = 120) -> None:
    """Until `n` executors registered (before that, defaultParallelism — the engine's bundling — is smaller)."""
    deadline = time.monotonic() + timeout_s
    while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < n:   # the driver's block manager counts too
        if time.monotonic() > deadline:
            raise RuntimeError(f"{n} executors did not register in {timeout_s:.0f} s")
        time.sleep(0.2)


def executor_cpu(app_id: str) -> dict[str, dict[str, float]]:
    """Executor id -> CPU seconds so far of its JVM ("jvm") and of the Python daemon and workers below it
    ("python"), for the executors of application `app_id` on this machine (from /proc)."""
    from bench.common import _TICKS, _stat_fields, descendants

    out: dict[str, dict[str, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                args = fh.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" not in args or app_id not in args:
            continue
        executor = args[args.index("--executor-id") + 1]
        cpu = {"jvm": 0.0, "python": 0.0}
        root = int(name)
        for pid in descendants(root):
            fields = _stat_fields(pid)
            if fields is not None:
                cpu["jvm" if pid == root else "python"] += (int(fields[11]) + int(fields[12])) / _TICKS
        out[executor] = cpu
    return out


def tasks_in_windows(trace: str, app_id: str, windows: list[tuple[float, float]]) -> list[list[dict]]:
    """The tasks Spark's event log (in `trace`) shows launched within each (start, end) wall-clock window; each
    window's Spark jobs (submission and completion, ms) as a last entry {"jobs": [...]}."""
    files = [f for f in os.listdir(trace) if f.startswith(app_id)]
    if not files:
        raise RuntimeError(f"no event log for {app_id} in {trace}")
    out: list[list[dict]] = [[] for _ in windows]
    jobs: dict[int, dict] = {}
    with open(os.path.join(trace, files[0]), encoding="utf-8") as fh:
        for line in fh:
            if '"SparkListenerJobStart"' in line or '"SparkListenerJobEnd"' in line:
                ev = json.loads(line)
                job = jobs.setdefault(ev["Job ID"], {})
                job.update({"submitted_ms": ev["Submission Time"]} if "Submission Time" in ev
                           else {"completed_ms": ev["Completion Time"]})
                continue
            if '"SparkListenerTaskEnd"' not in line:
                continue
            ev = json.loads(line)
            info, metrics = ev["Task Info"], ev.get("Task Metrics") or {}
            task = {"stage": ev["Stage ID"], "index": info["Index"], "executor": info["Executor ID"],
                    "launch_ms": info["Launch Time"], "finish_ms": info["Finish Time"],
                    "run_ms": metrics.get("Executor Run Time", 0),
                    "deserialize_ms": metrics.get("Executor Deserialize Time", 0),
                    "jvm_task_cpu_s": round((metrics.get("Executor CPU Time", 0)
                                             + metrics.get("Executor Deserialize CPU Time", 0)) / 1e9, 3),
                    "failed": ev.get("Task End Reason", {}).get("Reason") != "Success"}
            for w, (t0, t1) in enumerate(windows):
                if t0 * 1000 <= task["launch_ms"] <= t1 * 1000:
                    out[w].append(task)
    for w, (t0, t1) in enumerate(windows):
        out[w].append({"jobs": [j for j in jobs.values() if t0 * 1000 <= j.get("submitted_ms", 0) <= t1 * 1000]})
    return out


def makespan(costs: list[float], slots: int, longest_first: bool = False) -> float:
    """Finish time of the last of `costs` run on `slots` slots, each task on the slot free first, in the given
    order (Spark's launch order) or longest first."""
    loads = [0.0] * slots
    for c in (sorted(costs, reverse=True) if longest_first else costs):
        k = loads.index(min(loads))
        loads[k] += c
    return max(loads)


def analyse_run(t0: float, t1: float, tasks: list[dict], cpu: dict[str, dict[str, float]],
                figures: list[dict]) -> dict:
    """One run: tasks' costs, the driver's serial part, the critical path on as many slots as the run had
    executors. A task's cost is the CPU its Python worker measured over the task's work (`figures`, by partition:
    CompactionResult.spark_tasks) plus a share of the rest of its executor's CPU over the run (the
    JVM; the Python worker outside the work: receiving the task, pickling results), shared by that CPU."""
    measured = {f["partition"]: f for f in figures}
    jobs = [j for t in tasks if "jobs" in t for j in t["jobs"]]
    tasks = sorted((t for t in tasks if "jobs" not in t and t["index"] in measured and not t["failed"]),
                   key=lambda t: (t["launch_ms"], t["index"]))
    by_executor: dict[str, float] = {}
    for t in tasks:
        t["work_cpu_s"] = measured[t["index"]]["python_cpu_s"]
        by_executor[t["executor"]] = by_executor.get(t["executor"], 0.0) + t["work_cpu_s"]
    for t in tasks:
        share = t["work_cpu_s"] / by_executor[t["executor"]] if by_executor[t["executor"]] else 0.0
        e = cpu.get(t["executor"], {"jvm": 0.0, "python": 0.0})
        rest = e["jvm"] + max(0.0, e["python"] - by_executor[t["executor"]])
        t["cost_s"] = round(t["work_cpu_s"] + rest * share, 3)
    wall = t1 - t0
    span = (max(t["finish_ms"] for t in tasks) - min(t["launch_ms"] for t in tasks)) / 1000 if tasks else 0.0
    serial = wall - span
    slots = len(cpu)
    phases = serial_phases(t0, t1, tasks, jobs)
    costs = [t["cost_s"] for t in tasks]
    return {"wall_s": round(wall, 3), "task_span_s": round(span, 3), "serial_s": round(serial, 3),
            "tasks": len(tasks), "stages": len({t["stage"] for t in tasks}), "executors": slots,
            "task_cost_s": costs, "task_cost_sum_s": round(sum(costs), 3),
            "task_work_cpu_s": [round(t["work_cpu_s"], 3) for t in tasks],
            "executor_cpu_sum_s": round(sum(e["jvm"] + e["python"] for e in cpu.values()), 3),
            "busiest_executor_cpu_s": round(max((e["jvm"] + e["python"] for e in cpu.values()), default=0.0), 3),
            "task_run_s": [round(t["run_ms"] / 1000, 3) for t in tasks],
            "task_launch_s": [round(t["launch_ms"] / 1000 - t0, 3) for t in tasks],
            "task_finish_s": [round(t["finish_ms"] / 1000 - t0, 3) for t in tasks],
            "jvm_task_cpu_s": [t["jvm_task_cpu_s"] for t in tasks],
            "executor_cpu": cpu,
            "makespan_s": round(makespan(costs, slots), 3) if costs else 0.0,
            "makespan_lpt_s": round(makespan(costs, slots, True), 3) if costs else 0.0,
            "critical_path_s": round(serial + (makespan(costs, slots) if costs else 0.0), 3),
            "failed_tasks": sum(t["failed"] for t in tasks), "spark_jobs": len(jobs), "serial_phases_s": phases}


def serial_phases(t0: float, t1: float, tasks: list[dict], jobs: list[dict]) -> dict[str, float]:
    """The serial part split at the run's Spark jobs (event log): the driver before the first job's submission,
    Spark from it to the first task's launch, from the last task's finish to the last job's completion, and the
    driver after that (results, commit, clean)."""
    if not tasks or not jobs:
        return {}
    submitted = min(j.get("submitted_ms", t0 * 1000) for j in jobs) / 1000
    completed = max(j.get("completed_ms", t1 * 1000) for j in jobs) / 1000
    first, last = min(t["launch_ms"] for t in tasks) / 1000, max(t["finish_ms"] for t in tasks) / 1000
    return {"driver_before_s": round(submitted - t0, 3), "submit_to_launch_s": round(first - submitted, 3),
            "finish_to_job_end_s": round(completed - last, 3), "driver_after_s": round(t1 - completed, 3)}


def critical_path(pristine: str, work: str, cores: list[int], repeat: int, rounds: int,
                  versus: str | None = None) -> dict:
    """Drivers on `k` of one cluster's max(cores) single-core workers, for each k (alternating order per round).
    `versus`: another source tree (e.g. `git archive` of the previous commit) whose drivers alternate with this
    tree's on the same cluster and table, summarised apart ("versus")."""
    from tests.support.spark_cluster import bare_executor_python, standalone_cluster

    python = bare_executor_python(Path(work))
    trace = Path(work) / "eventlog"
    trace.mkdir(exist_ok=True)
    trees = [ROOT] + ([Path(versus).resolve()] if versus else [])
    out: dict[Path, dict[int, list[dict]]] = {t: {k: [] for k in cores} for t in trees}
    started = time.perf_counter()
    with standalone_cluster(Path(work) / "cluster", workers=max(cores), cores=1) as cluster:
        cluster_up_s = time.perf_counter() - started
        for i in range(rounds):
            for k in (cores if i % 2 == 0 else cores[::-1]):
                for tree in (trees if i % 2 == 0 else trees[::-1]):
                    env = cluster.env(python)
                    env.update(TIDEMARK_DRIVER_MEMORY="2g", BENCH_EXECUTORS=str(k), PYSPARK_SUBMIT_ARGS=" ".join(
                        f"--conf {c}" for c in (f"spark.cores.max={k}", "spark.eventLog.enabled=true",
                                                f"spark.eventLog.dir=file://{trace}", "spark.eventLog.compress=false",
                                                "spark.eventLog.rolling.enabled=false")) + " pyspark-shell")
                    res = run_worker(env, pristine, work, repeat, str(trace), tree)
                    log(f"  round {i + 1}, {k} cores{'' if tree == ROOT else ', ' + str(tree)}: runs "
                        f"{res['runs_s']} s, critical paths {[r['critical_path_s'] for r in res['runs']]} s, serial "
                        f"{[r['serial_s'] for r in res['runs']]} s, tasks' CPU {[r['task_cost_s'] for r in res['runs']]}"
                        f", load {os.getloadavg()[0]:.1f}")
                    out[tree][k].append(res)
    result = {"cluster_start_s": round(cluster_up_s, 1), **summarise(out[ROOT], cores),
              "rows_match": len({res["records_written"] for t in trees for k in cores for res in out[t][k]}) == 1,
              "rounds": {str(k): out[ROOT][k] for k in cores}}
    if versus:
        result["versus"] = {"tree": str(trees[1]), **summarise(out[trees[1]], cores),
                            "rounds": {str(k): out[trees[1]][k] for k in cores}}
    return result


def summarise(out: dict[int, list[dict]], cores: list[int]) -> dict:
    """Per core count the medians of the drivers' runs after their first, and the speedups from the fewest cores."""
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 3) if values else 0.0

    # A driver's first run meets executors whose JVM has not compiled the task path yet and Python workers that
    # import pyarrow's compute kernels on first use (2-3x the CPU of later runs): a long-lived cluster's state is
    # the later runs', so the summary is theirs (each first run is in "rounds").
    runs = {k: [r for res in out[k] for r in (res["runs"][1:] if len(res["runs"]) > 1 else res["runs"])]
            for k in cores}
    phases = ("driver_before_s", "submit_to_launch_s", "finish_to_job_end_s", "driver_after_s")
    summary = {k: {"default_parallelism": sorted({res["default_parallelism"] for res in out[k]}),
                   "wall_s": med([r["wall_s"] for r in runs[k]]),
                   "serial_s": med([r["serial_s"] for r in runs[k]]),
                   "serial_phases_s": {p: med([r["serial_phases_s"][p] for r in runs[k] if r.get("serial_phases_s")])
                                       for p in phases},
                   "executor_jvm_cpu_s": med([sum(e["jvm"] for e in r["executor_cpu"].values()) for r in runs[k]]),
                   "task_work_cpu_sum_s": med([sum(r["task_work_cpu_s"]) for r in runs[k]]),
                   "driver_cpu_s": med([r["driver_cpu_s"]["self"] + r["driver_cpu_s"]["jvm"] for r in runs[k]]),
                   "tasks": sorted({r["tasks"] for r in runs[k]}),
                   "task_cost_sum_s": med([r["task_cost_sum_s"] for r in runs[k]]),
                   "makespan_s": med([r["makespan_s"] for r in runs[k]]),
                   "makespan_lpt_s": med([r["makespan_lpt_s"] for r in runs[k]]),
                   "critical_path_s": med([r["critical_path_s"] for r in runs[k]])} for k in cores}
    lo = min(cores)
    return {"per_cores": summary,
            "speedup_by_critical_path": {f"{lo}->{k}": round(summary[lo]["critical_path_s"]
                                                               / summary[k]["critical_path_s"], 3)
                                         for k in cores if k != lo},
            "speedup_tasks_only": {f"{lo}->{k}": round(summary[lo]["makespan_s"] / summary[k]["makespan_s"], 3)
                                   for k in cores if k != lo}}


def run_worker(env: dict[str, str], pristine: str, scratch: str, repeat: int, trace: str | None = None,
               tree: Path = ROOT) -> dict:
    """A driver process from source tree `tree` (its engine shipped to the executors)."""
    cmd = [sys.executable, "-m", "bench.bench_cluster_compaction", "--worker", pristine, "--scratch", scratch,
           "--repeat", str(repeat)] + (["--trace", trace] if trace else [])
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker on {env.get('SPARK_MASTER')} failed (exit {proc.returncode}):\n"
                           + "\n".join(proc.stderr.splitlines()[-15:]))
    return json.loads(lines[-1])


def measure(pristine: str, work: str, repeat: int, rounds: int, versus: str | None = None) -> dict:
    """`local[2]` vs the cluster, alternating; `versus`: another source tree's drivers alternate with this tree's
    (the same cluster and table), summarised apart."""
    from tests.support.spark_cluster import bare_executor_python, standalone_cluster

    python = bare_executor_python(Path(work))
    trees = [ROOT] + ([Path(versus).resolve()] if versus else [])
    started = time.perf_counter()
    with standalone_cluster(Path(work) / "cluster", workers=2, cores=1) as cluster:
        cluster_up_s = time.perf_counter() - started
        envs = {"local": dict(os.environ, SPARK_MASTER="local[2]", TIDEMARK_DRIVER_MEMORY="2g"),
                "cluster": cluster.env(python)}
        envs["cluster"]["TIDEMARK_DRIVER_MEMORY"] = "2g"
        out: dict[Path, dict[str, list[dict]]] = {t: {m: [] for m in MODES} for t in trees}
        for i in range(rounds):
            for tree in (trees if i % 2 == 0 else trees[::-1]):
                for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                    res = run_worker(envs[mode], pristine, work, repeat, tree=tree)
                    log(f"  round {i + 1} {mode}{'' if tree == ROOT else ' ' + str(tree)}: {res}")
                    out[tree][mode].append(res)
    result = {"cluster_start_s": round(cluster_up_s, 1), "rounds": out[ROOT], **ratio(out[ROOT]),
              "rows_match": len({r["records_written"] for t in trees for m in MODES for r in out[t][m]}) == 1}
    if versus:
        result["versus"] = {"tree": str(trees[1]), "rounds": out[trees[1]], **ratio(out[trees[1]])}
    return result


def ratio(out: dict[str, list[dict]]) -> dict:
    """Median run per mode and cluster / local[2]."""
    runs = {m: sorted(s for r in out[m] for s in r["runs_s"]) for m in MODES}
    median = {m: runs[m][len(runs[m]) // 2] for m in MODES}
    return {"median_s": median, "ratio_cluster_vs_local2": round(median["cluster"] / median["local"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --base and --upserts")
    ap.add_argument("--base", type=int, default=400_000)
    ap.add_argument("--upserts", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="timed compactions per driver process")
    ap.add_argument("--rounds", type=int, default=2, help="driver processes per mode, alternating order")
    ap.add_argument("--keep", help="build in this directory and keep it")
    ap.add_argument("--critical-path", action="store_true",
                    help="measure scaling with executor cores by each task's CPU (see the module doc)")
    ap.add_argument("--cores", default="2,4", help="--critical-path: executor core counts, comma-separated")
    ap.add_argument("--file-groups", type=int, default=8, choices=(8, 16, 32), help="the table's file groups")
    ap.add_argument("--versus", help="another source tree whose drivers alternate with this tree's (e.g. "
                                     "`git archive HEAD~1 | tar -x -C DIR`), summarised apart")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    ap.add_argument("--trace", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.scratch, args.repeat, args.trace)
        return
    n_base, n_up = int(args.base * args.scale), int(args.upserts * args.scale)
    work = args.keep or scratch_dir("tm-bench-cluster-")
    try:
        from engine.spark import get_spark

        spark = get_spark(cores=2)
        path = os.path.join(work, "table")
        build_s, layout = timed(lambda: build(spark, path, os.path.join(work, "stage"), n_base, n_up,
                                              args.file_groups))
        spark.stop()
        shutil.rmtree(os.path.join(work, "stage"), ignore_errors=True)
        log(f"bench_cluster_compaction: table built in {build_s:.1f}s: {layout}")
        result = {"base_records": n_base, "upsert_records": n_up, "file_groups": args.file_groups,
                  "table": layout, "build_s": round(build_s, 1)}
        if args.critical_path:
            result.update(critical_path(path, work, [int(k) for k in args.cores.split(",")], args.repeat,
                                        args.rounds, args.versus))
        else:
            result.update(measure(path, work, args.repeat, args.rounds, args.versus))
        emit("bench_cluster_compaction", result)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
