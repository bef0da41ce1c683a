"""Planning and compaction on S3 (moto in server mode on 127.0.0.1) vs local disk, side by side in one run.

The same table (P partitions x B buckets, W writes, one log per file group per write) is built locally and on
S3 through `Table`; then, on each: a planning preview (median of 3; requests counted at the S3 server per
planned log file) and event-time schedule + runs on fresh identical table pairs after a warm-up compaction,
the order alternating per round (requests per compacted file group, median time ratio).

    .venv/bin/python -m bench.bench_s3_storage [--partitions 2 --buckets 4 --writes 6 --rows 20000 --rounds 3]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--writes", type=int, default=6)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3, help="fresh table pairs compacted, order alternating")
    args = ap.parse_args()

    from tests.support.s3_server import S3Server

    with S3Server() as s3, tempfile.TemporaryDirectory(prefix="tidemark-bench-s3-") as tmp:
        os.environ.update(s3.env())
        s3.make_bucket("bench")
        from engine import Table
        from engine.spark import get_spark

        get_spark()
        sources = [_batch(tmp, w, args.rows, args.partitions) for w in range(args.writes)]
        threshold = T0_MS + (args.writes // 2) * 86_400_000   # the first half of the writes compacted

        def build(location: str) -> Table:
            t = Table.create(location, name="b", record_keys=["id"], ordering_field="seq",
                             event_time_field="ts", partition_fields=["region"],
                             settings={"hoodie.bucket.index.num.buckets": str(args.buckets)})
            for src in sources:
                t.write(src)
            return t

        # A throwaway compaction on each backend first: the first one in a process pays Spark's Python
        # workers, JIT and (on S3) each worker's boto3 client set-up, which would otherwise be charged to
        # whichever backend happened to run first. Long-lived workers pay them once.
        for warm in (build(os.path.join(tmp, "warm")), build("s3://bench/warm")):
            warm.run_compaction(warm.schedule_compaction(threshold=threshold, carry_over="copy").instant)

        out: dict = {"params": vars(args)}
        planning = {"local": build(os.path.join(tmp, "plan")), "s3": build("s3://bench/plan")}
        logs = sum(len(s["log_files"]) for g in planning["s3"].describe().to_dict()["file_groups"]
                   for s in g["slices"])
        out["log_files"] = logs
        for name, t in planning.items():
            times = []
            for _ in range(3):
                s3.reset_counts()
                t0 = time.perf_counter()
                plan = t.plan_compaction(threshold=threshold)
                times.append(time.perf_counter() - t0)
                reqs = s3.counts()
            out[f"plan_{name}_s"] = round(statistics.median(times), 3)
            if name == "s3":
                out["plan_requests"] = dict(_requests(reqs))
                out["plan_requests_per_log_file"] = round(len(reqs) / logs, 2)
            out[f"plan_{name}_file_groups"] = len(plan.operations)

        # Each round compacts a fresh pair of identical tables, the order alternating between rounds so
        # neither backend always runs on the warmer process; medians over the rounds.
        times: dict[str, list[float]] = {"local": [], "s3": []}
        for r in range(args.rounds):
            tables = {"local": build(os.path.join(tmp, f"c{r}")), "s3": build(f"s3://bench/c{r}")}
            for name in (("local", "s3") if r % 2 == 0 else ("s3", "local")):
                t = tables[name]
                s3.reset_counts()
                t0 = time.perf_counter()
                planned = t.schedule_compaction(threshold=threshold, carry_over="copy")
                result = t.run_compaction(planned.instant)
                times[name].append(time.perf_counter() - t0)
                if name == "s3":
                    reqs = s3.counts()
                    out["compact_requests"] = dict(_requests(reqs))
                    out["compact_requests_per_file_group"] = round(len(reqs) / len(planned.operations), 1)
                    out["logs_carried_over"] = result.logs_carried_over
        for name, ts in times.items():
            out[f"compact_{name}_s"] = round(statistics.median(ts), 3)
            out[f"compact_{name}_runs_s"] = [round(x, 3) for x in ts]
        out["compact_ratio_s3_over_local"] = round(out["compact_s3_s"] / out["compact_local_s"], 2)
        out["compact_ratio_per_round"] = [round(s / loc, 2) for s, loc in zip(times["s3"], times["local"])]
        emit("bench_s3_storage", out)


if __name__ == "__main__":
    sys.exit(main())
