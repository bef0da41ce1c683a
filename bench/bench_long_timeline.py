"""A table that runs for a year: the cost of one operation at commit 100, 1,000 and 10,000.

    python -m bench.bench_long_timeline [--commits 100,1000,10000] [--versions 6,8] [--rows 20] [--samples 5]

One table per table version, created with default settings (automatic clean and archival on, as Hudi's
defaults), fed by small in-process upserts (`--rows` records each, four partitions, keys reused so slices
accumulate logs) — a micro-batch stream's shape. Every 100 commits a compaction is scheduled and run, as a
stream with a compaction service would. When the table reaches each checkpoint the bench times, each
`--samples` times (median reported):
  write     one more small upsert (its automatic clean and archival included: they are part of a write's cost)
  schedule  `plan_compaction` (the planning a schedule does, nothing written)
  metrics   `Table.metrics()` (the backlog figures the control plane samples)
  clean     `Table.clean()` (an explicit clean on top of the automatic ones)
and records the active timeline's instant files and the table's file count. The target (issue 33): each cost at
the last checkpoint within 1.5x of the first. Ratios are measured in this one run, side by side.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from bench.common import T0_MS, emit, log, records, scratch_dir
from engine import Table
from engine.io import storage
from engine.timeline.instants import Timeline

PARTITIONS = 4
COMPACT_EVERY = 100
KEY_SPACE = 4_000
THRESHOLD_MS = T0_MS + KEY_SPACE * 500   # half the keys' event times: an event-time plan with work to do


def _batch(path: str, n: int, rows: int, rng: np.random.Generator) -> str:
    """Stage batch n (rows keys drawn from KEY_SPACE, so upserts update earlier rows) as a Parquet file."""
    keys = rng.choice(KEY_SPACE, size=rows, replace=False)
    table = records(rows, keys=keys, seq=n, seed=n)
    out = os.path.join(path, f"batch-{n % 2}.parquet")
    pq.write_table(table, out)
    return out


def _median(fn: Callable[[], Any], samples: int) -> float:
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _footprint(table_path: str) -> dict[str, int]:
    timeline = Timeline.load(table_path)
    files = sum(len(f) for _, _, f in os.walk(table_path))
    active = len(storage.list_names_validated(timeline.timeline_path))
    return {"active_timeline_files": active, "table_files": files}


class Feeder:
    """Writes the stream's small commits, compacting every COMPACT_EVERY of them."""

    def __init__(self, table: Table, staging: str, rows: int) -> None:
        self.table, self.staging, self.rows = table, staging, rows
        self.rng = np.random.default_rng(7)
        self.commits = 0

    def one(self) -> None:
        self.table.write([_batch(self.staging, self.commits, self.rows, self.rng)], local=True)
        self.commits += 1
        if self.commits % COMPACT_EVERY == 0:
            plan = self.table.schedule_compaction(strategy="unbounded")
            if plan.instant is not None:
                self.table.run_compaction(plan.instant)

    def until(self, target: int) -> float:
        t = time.perf_counter()
        while self.commits < target:
            self.one()
        return time.perf_counter() - t


def run_version(version: int, checkpoints: list[int], rows: int, samples: int, root: str) -> dict[str, Any]:
    path = os.path.join(root, f"v{version}")
    staging = os.path.join(root, f"staging-v{version}")
    os.makedirs(staging, exist_ok=True)
    table = Table.create(path, name=f"year_v{version}", record_keys=["id"], ordering_field="seq",
                         event_time_field="event_time", partition_fields=["region"], table_version=version)
    feeder = Feeder(table, staging, rows)
    out: list[dict[str, Any]] = []
    for target in checkpoints:
        fed_s = feeder.until(target)
        row: dict[str, Any] = {"commits": feeder.commits, "feed_s": round(fed_s, 1)}
        row["write_s"] = _median(feeder.one, samples)
        row["schedule_s"] = _median(lambda: table.plan_compaction(strategy="event_time", threshold=THRESHOLD_MS), samples)
        row["metrics_s"] = _median(table.metrics, samples)
        row["clean_s"] = _median(table.clean, samples)
        row.update(_footprint(path))
        log(f"v{version} {row}")
        out.append(row)
    first, last = out[0], out[-1]
    ratios = {k: round(last[k] / first[k], 2) for k in ("write_s", "schedule_s", "metrics_s", "clean_s")}
    return {"version": version, "checkpoints": out, "last_over_first": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", default="100,1000,10000")
    parser.add_argument("--versions", default="6,8")
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    checkpoints = sorted(int(c) for c in args.commits.split(","))
    root = scratch_dir("long-timeline")
    results = [run_version(int(v), checkpoints, args.rows, args.samples, root) for v in args.versions.split(",")]
    emit("bench_long_timeline", {"rows_per_commit": args.rows, "compact_every": COMPACT_EVERY,
                                 "results": results, "target_last_over_first": 1.5})


if __name__ == "__main__":
    main()
