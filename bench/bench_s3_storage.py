"""Planning and compaction on S3 (moto in server mode on 127.0.0.1) vs local disk, side by side in one run.

The same table (P partitions x B buckets, W writes, one log per file group per write) is built locally and on
S3 through `Table`; then, on each: a planning preview (median of 3; requests counted at the S3 server per
planned log file, for the first preview as a process that has read nothing of the table — kept instants and
scans dropped — and for a repeat, which reuses what its listing validates; then, on the S3 table, a second first
preview after one compaction (the first half of the writes compacted, the rest carried over) and W/2 more writes:
planning on a table with history, `plan2_requests_per_log_file`; and a third after a compaction of everything and
W/2 more writes, `plan3_requests_per_log_file`)
and event-time schedule + runs on fresh identical table pairs after a warm-up compaction, the order
alternating per round (requests per compacted file group, median time ratio).

    .venv/bin/python -m bench.bench_s3_storage [--partitions 2 --buckets 4 --writes 6 --rows 20000 --rounds 4]
        [--trace DIR] [--pin-store] [--in-process] [--latency-ms N] [--store-lock] [--table-version 6|8|9]

`--in-process` runs the compactions on this process's threads (what `tidemark compaction run` does with a small
plan) instead of Spark tasks, on both backends.

`--latency-ms N` makes every S3 request wait N ms at the server before it is served (a remote store's time to
first byte; S3's is some 10-30 ms for small objects): what round trips in sequence cost there.

`--store-lock` sets Hudi's storage-based lock provider on the S3 tables: each lock a compaction takes is then also
a lock object in the store (`engine.io.store_lock`), read and conditionally written.

`--pin-store` runs the S3 server on a CPU of its own and the compaction (local and S3 alike) on the others: a
remote store's CPU is not the client's, and here the emulator's would otherwise take the compaction's cores.

`--trace DIR` also attributes every request of the last S3 schedule + run to a phase (schedule, run set-up,
run pre-check, executors, commit, post-commit sync: the server's log split at the driver's phase boundaries,
with each phase's wall time) and to the code that made it (`bench.s3_trace`: callers of the storage layer, in
the driver and in Spark's workers), as `compact_phases` and `compact_callers`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import T0_MS, emit


def _batch(path: str, write: int, rows: int, partitions: int) -> str:
    """`rows` upserts whose event times fall on day `write` (so a threshold splits the logs by write)."""
    rng = np.random.default_rng(write)
    keys = rng.integers(0, rows * 2, rows)
    table = pa.table({
        "id": [f"id-{k:09d}" for k in keys],
        "region": [f"r{k % partitions}" for k in keys],
        "seq": pa.array(np.full(rows, write), pa.int64()),
        "ts": pa.array(T0_MS + write * 86_400_000 + rng.integers(0, 86_400_000, rows), pa.timestamp("ms", "UTC")),
        "amount": rng.random(rows),
        "note": [f"note-{k % 997:012d}" for k in keys],
    })
    out = os.path.join(path, f"batch{write}.parquet")
    pq.write_table(table, out)
    return out


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) process `pid` has used."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pin_store(server_pid: int) -> None:
    """The server (and the threads it starts) on the last CPU; this process, the JVM and Python workers it starts,
    on the rest, with as many Spark cores."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin-store needs at least 2 CPUs")
    os.sched_setaffinity(server_pid, {cpus[-1]})
    os.sched_setaffinity(0, set(cpus[:-1]))
    os.environ["SPARK_MASTER"] = f"local[{len(cpus) - 1}]"


def _requests(log: list[dict]) -> Counter:
    kinds: Counter = Counter()
    for r in log:
        kind = r["method"]
        if kind == "GET" and "list-type" in r["query"]:
            kind = "LIST"
        elif kind == "GET" and r["range"]:
            kind = "GET(range)"
        elif kind == "PUT" and r["copy_source"]:
            kind = "COPY"
        kinds[kind] += 1
    return kinds


_PHASES = (("engine.table", "Table", "_schedule", "schedule"),
           ("engine.compaction.execute", None, "_check_logs", "run pre-check"),
           ("engine.compaction.execute", None, "transition_to_inflight", "run set-up"),
           ("engine.compaction.execute", None, "_execute_all", "executors"),
           ("engine.compaction.execute", None, "_commit", "commit"),
           ("engine.services.table_services", None, "after_commit", "post-commit services"),
           ("engine.table", None, "_sync_after", "post-commit sync"))


class _PhaseClock:
    """Wraps the driver functions that bound each phase; requests outside them belong to "run set-up"."""

    def __init__(self) -> None:
        import importlib

        from bench import s3_trace

        self.windows: list[tuple[str, float, float]] = []
        for module, cls, fn, name in _PHASES:
            owner = getattr(importlib.import_module(module), cls) if cls else importlib.import_module(module)
            setattr(owner, fn, self._timed(getattr(owner, fn), name, s3_trace))

    def _timed(self, original, name, s3_trace):  # type: ignore[no-untyped-def]
        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            t0 = time.time()
            try:
                with s3_trace.phase(name):
                    return original(*args, **kwargs)
            finally:
                self.windows.append((name, t0, time.time()))
        return timed

    def phase_at(self, at: float) -> str:
        inside = [w for w in self.windows if w[1] <= at <= w[2]]
        return min(inside, key=lambda w: w[2] - w[1])[0] if inside else "run set-up"

    def seconds(self, start: float, end: float) -> dict[str, float]:
        out: Counter = Counter()
        for name, t0, t1 in self.windows:
            if t0 >= start and t1 <= end and name != "run set-up":
                out[name] += t1 - t0
        out["run set-up"] = (end - start) - sum(out.values())
        return {k: round(v, 3) for k, v in out.items()}


def waves(spans: list[tuple[float, float]]) -> int:
    """Round trips that wait on each other: requests in flight together are one wave; a request that starts after
    everything of the current wave was answered starts the next one."""
    count, until = 0, float("-inf")
    for start, end in sorted(spans):
        if start > until:
            count += 1
            until = end
        else:
            until = max(until, end)
    return count


DRIVER_PHASES = ("schedule", "run pre-check", "run set-up", "commit")


def _round_trips(clock: _PhaseClock, reqs: list[dict], trace: list[dict]) -> dict[str, int]:
    """The driver's round trips in sequence (its phases' requests, as the store saw them arrive and answered
    them), and the longest sequence one executor process waited through (its trace, client side)."""
    driver = [(r["at"], r.get("done", r["at"])) for r in reqs if clock.phase_at(r["at"]) in DRIVER_PHASES]
    phases = {name: waves([(r["at"], r.get("done", r["at"])) for r in reqs if clock.phase_at(r["at"]) == name])
              for name in (*DRIVER_PHASES, "executors")}
    by_pid: dict[int, list[tuple[float, float]]] = {}
    for t in trace:
        if t["pid"] != os.getpid() and t["path"].startswith("s3://"):
            by_pid.setdefault(t["pid"], []).append((t["at"], t["at"] + t["s"]))
    # the executors' requests as the store saw them: in flight together across file groups, the waves are the
    # longest chain of requests one waited for before the next (in-process runs: every group is in this process)
    return {"driver": waves(driver), "by_phase": phases, "executors": phases.pop("executors"),
            "executor_process_max": max((waves(s) for s in by_pid.values()), default=0)}


def _breakdown(clock: _PhaseClock, reqs: list[dict], trace: list[dict], start: float, end: float) -> dict:
    phases: dict[str, Counter] = {}
    for r in reqs:
        phases.setdefault(clock.phase_at(r["at"]), Counter()).update(_requests([r]))
    seconds = clock.seconds(start, end)
    driver = os.getpid()
    callers: Counter = Counter()
    for t in trace:
        if not t["path"].startswith("s3://"):
            continue
        where = "executors" if t["pid"] != driver else (t["phase"] or "run set-up")
        callers[f"{where} | {t['fn']}{'(range)' if t['range'] else ''} | {' < '.join(reversed(t['stack'][-3:]))}"] += 1
    return {"phases": {p: {"requests": dict(c), "total": sum(c.values()), "s": seconds.get(p)}
                       for p, c in phases.items()},
            "callers": dict(callers.most_common())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--writes", type=int, default=6)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=4,
                    help="fresh table pairs compacted, order alternating (an even count: each backend first as often)")
    ap.add_argument("--trace", metavar="DIR", help="attribute the last S3 compaction's requests (phase, caller)")
    ap.add_argument("--in-process", action="store_true",
                    help="compaction runs on this process's threads (what `tidemark compaction run` does with a "
                         "small plan) instead of Spark tasks, on both backends")
    ap.add_argument("--pin-store", action="store_true",
                    help="the S3 server on the last CPU, this process and its Spark (local[CPUs - 1]) on the others: "
                         "the store's CPU stops competing with the compaction, as a remote store's would")
    ap.add_argument("--store-lock", action="store_true",
                    help="tables locked in their store too (Hudi's storage-based lock provider): what the lock "
                         "objects' conditional writes add, on both backends (a local table keeps its flock)")
    ap.add_argument("--latency-ms", type=float, default=0,
                    help="each S3 request waits this long at the server before it is served (no CPU): a remote "
                         "store's time to first byte, which the emulator on 127.0.0.1 does not have")
    ap.add_argument("--table-version", type=int, default=6, choices=(6, 8, 9),
                    help="the tables' version (a v8/9 log's name carries the instant that wrote it)")
    args = ap.parse_args()

    from tests.support.s3_server import S3Server

    with S3Server(latency_ms=args.latency_ms) as s3, tempfile.TemporaryDirectory(prefix="tidemark-bench-s3-") as tmp:
        os.environ.update(s3.env())
        if args.pin_store:
            _pin_store(s3.proc.pid)
        clock = None
        if args.trace:
            from bench import s3_trace

            os.environ.update(s3_trace.worker_env(args.trace))   # Spark's workers, started below, trace too
            s3_trace.install(args.trace)
            clock = _PhaseClock()
        from engine import Table
        from engine.config.properties import LOCK_PROVIDER_KEY, STORAGE_LOCK_PROVIDER
        from engine.spark import get_spark

        get_spark()
        sources = [_batch(tmp, w, args.rows, args.partitions) for w in range(args.writes)]
        threshold = T0_MS + (args.writes // 2) * 86_400_000   # the first half of the writes compacted

        def build(location: str) -> Table:
            if location.startswith("s3://"):
                # A bucket per table: moto answers a LIST by walking every key of the bucket, where S3's cost
                # follows what the listing returns; with all tables in one bucket each round's LISTs would
                # grow with the tables made before it.
                s3.make_bucket(location.split("/")[2])
            settings = {"hoodie.bucket.index.num.buckets": str(args.buckets)}
            if args.store_lock and location.startswith("s3://"):
                settings[LOCK_PROVIDER_KEY] = STORAGE_LOCK_PROVIDER
            t = Table.create(location, name="b", record_keys=["id"], ordering_field="seq",
                             event_time_field="ts", partition_fields=["region"], settings=settings,
                             table_version=args.table_version)
            for src in sources:
                t.write(src)
            return t

        # A throwaway compaction on each backend first: the first one in a process pays Spark's Python
        # workers, JIT and (on S3) each worker's boto3 client set-up, which would otherwise be charged to
        # whichever backend happened to run first. Long-lived workers pay them once.
        for warm in (build(os.path.join(tmp, "warm")), build("s3://bench-warm/t")):
            warm.run_compaction(warm.schedule_compaction(threshold=threshold, carry_over="copy").instant,
                                local=args.in_process)

        out: dict = {"params": vars(args)}
        planning = {"local": build(os.path.join(tmp, "plan")), "s3": build("s3://bench-plan/t")}
        logs = sum(len(s["log_files"]) for g in planning["s3"].describe().to_dict()["file_groups"]
                   for s in g["slices"])
        out["log_files"] = logs
        for name, t in planning.items():
            times = []
            if name == "s3":
                # The first preview as a process that has read nothing of the table (this one wrote it, and kept
                # what it published): every completed instant and log scan comes from the store.
                from engine.io import storage
                from engine.logformat import scan

                storage.clear_kept_immutable()
                scan.clear_validated_scans()
            for i in range(3):
                s3.reset_counts()
                t0 = time.perf_counter()
                plan = t.plan_compaction(threshold=threshold)
                times.append(time.perf_counter() - t0)
                reqs = s3.counts()
                if name == "s3" and i == 0:   # the first preview reads what it needs; repeats reuse what it read
                    out["plan_requests"] = dict(_requests(reqs))
                    out["plan_requests_per_log_file"] = round(len(reqs) / logs, 2)
            out[f"plan_{name}_s"] = round(statistics.median(times), 3)
            if name == "s3":
                out["plan_repeat_requests"] = dict(_requests(reqs))
                out["plan_repeat_requests_per_log_file"] = round(len(reqs) / logs, 2)
            out[f"plan_{name}_file_groups"] = len(plan.operations)

        # A second plan on a table with history: one compaction, then more writes; the first preview again as a
        # process that has read nothing of the table.
        from engine.io import storage
        from engine.logformat import scan

        # Then a third after a compaction of everything and W/2 more writes: only those writes are pending.
        hist = planning["s3"]
        more = args.writes // 2
        for key, first_threshold in (("plan2", threshold), ("plan3", T0_MS + 1000 * 86_400_000)):
            hist.run_compaction(hist.schedule_compaction(threshold=first_threshold, carry_over="copy").instant,
                                local=True)
            written = len(hist.timeline())
            write_reqs = []
            for w in range(written, written + more):
                batch = _batch(tmp, w, args.rows, args.partitions)
                s3.reset_counts()
                hist.write(batch)
                write_reqs.append(dict(_requests(s3.counts())))
            # each write's requests (the first right after the compaction): what a summary of the pending logs'
            # event times in the deltacommit (engine/compaction/pending_summary.py) costs the writer
            out[f"{key}_write_requests"] = [sum(r.values()) for r in write_reqs]
            out[f"{key}_write_request_kinds"] = write_reqs[0]
            pending = sum(len(g["slices"][-1]["log_files"]) for g in hist.describe().to_dict()["file_groups"])
            storage.clear_kept_immutable()
            scan.clear_validated_scans()
            s3.reset_counts()
            later = hist.plan_compaction(threshold=T0_MS + (written + 1) * 86_400_000)
            reqs = s3.counts()
            out[f"{key}_log_files"] = pending
            out[f"{key}_file_groups"] = len(later.operations)
            out[f"{key}_requests"] = dict(_requests(reqs))
            out[f"{key}_requests_per_log_file"] = round(len(reqs) / pending, 2)

        # Each round compacts a fresh pair of identical tables, the order alternating between rounds so
        # neither backend always runs on the warmer process; medians over the rounds.
        times: dict[str, list[float]] = {"local": [], "s3": []}
        server_cpu: list[float] = []
        own_cpu: dict[str, list[float]] = {"local": [], "s3": []}   # this process's CPU (all of a run in-process)
        for r in range(args.rounds):
            tables = {"local": build(os.path.join(tmp, f"c{r}")), "s3": build(f"s3://bench-c{r}/t")}
            for name in (("local", "s3") if r % 2 == 0 else ("s3", "local")):
                t = tables[name]
                s3.reset_counts()
                if clock is not None:
                    s3_trace.clear(args.trace)
                    clock.windows.clear()
                started, cpu0, own0 = time.time(), _cpu_s(s3.proc.pid), _cpu_s(os.getpid())
                t0 = time.perf_counter()
                planned = t.schedule_compaction(threshold=threshold, carry_over="copy")
                result = t.run_compaction(planned.instant, local=args.in_process)
                times[name].append(time.perf_counter() - t0)
                own_cpu[name].append(_cpu_s(os.getpid()) - own0)
                if name == "s3":
                    server_cpu.append(_cpu_s(s3.proc.pid) - cpu0)
                if clock is not None and name == "local":
                    out["compact_local_phases_s"] = clock.seconds(started, time.time())
                if name == "s3":
                    reqs = s3.counts()
                    if clock is not None:
                        b = _breakdown(clock, reqs, s3_trace.records(args.trace), started, time.time())
                        out["compact_phases"], out["compact_callers"] = b["phases"], b["callers"]
                        trips = _round_trips(clock, reqs, s3_trace.records(args.trace))
                        out["compact_round_trips"] = trips
                        fixed = sum(p["total"] for name, p in b["phases"].items() if name in DRIVER_PHASES)
                        out["compact_fixed_requests"] = fixed   # the plan's: schedule, set-up, commit
                        out["compact_executor_requests_per_file_group"] = round(
                            b["phases"].get("executors", {}).get("total", 0) / len(planned.operations), 2)
                    out["compact_requests"] = dict(_requests(reqs))
                    # the emulator's CPU per kind of request (ms, this compaction): where its time goes
                    cpu_by_kind: Counter = Counter()
                    for q in reqs:
                        cpu_by_kind[next(iter(_requests([q])))] += q.get("cpu_ms", 0)
                    out["compact_server_cpu_ms_by_kind"] = {k: round(v, 1) for k, v in cpu_by_kind.most_common()}
                    out["compact_requests_per_file_group"] = round(len(reqs) / len(planned.operations), 1)
                    out["logs_carried_over"] = result.logs_carried_over
        for name, ts in times.items():
            out[f"compact_{name}_s"] = round(statistics.median(ts), 3)
            out[f"compact_{name}_runs_s"] = [round(x, 3) for x in ts]
        out["compact_s3_server_cpu_s"] = round(statistics.median(server_cpu), 3)   # moto's CPU, same 2 cores
        for name, cpu in own_cpu.items():
            out[f"compact_{name}_process_cpu_s"] = round(statistics.median(cpu), 3)
        if args.in_process and not args.pin_store:
            # Every CPU-second of an in-process run is this process's, and the emulator's are on the same CPUs:
            # the S3 run cannot take less wall time than both spread over every CPU, whatever its requests wait.
            floor = (out["compact_s3_process_cpu_s"] + out["compact_s3_server_cpu_s"]) / (os.cpu_count() or 1)
            out["compact_s3_floor_s"] = round(floor, 3)
        out["compact_ratio_s3_over_local"] = round(out["compact_s3_s"] / out["compact_local_s"], 2)
        if "compact_round_trips" in out:
            # A store `ms` away: the local run plus every round trip that waits on another, in the driver and in the
            # executors' longest chain (a model: the emulator answers in ~1 ms, so its time says nothing of this;
            # with --latency-ms the waves are measured with requests that take that long)
            trips = out["compact_round_trips"]["driver"] + out["compact_round_trips"]["executors"]
            out["compact_modelled_s"] = {f"{ms} ms": round(out["compact_local_s"] + trips * ms / 1000, 3)
                                         for ms in (20, 50)}
        out["compact_ratio_per_round"] = [round(s / loc, 2) for s, loc in zip(times["s3"], times["local"])]
        emit("bench_s3_storage", out)


if __name__ == "__main__":
    sys.exit(main())
