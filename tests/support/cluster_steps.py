"""One scenario of Spark jobs (writes in every input format, a compaction, reads) run on any master.

The cluster test (tests/test_spark_cluster.py) runs it in a driver process of its own against the
standalone cluster, with *relative* paths from the data folder (as a user in a shell would), and in the test
process on local Spark; the results must agree row for row. Run as a script:

    python -m tests.support.cluster_steps DATA_DIR     # prints a JSON summary on stdout's last line
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

TABLE = "table"   # relative to the data folder
THRESHOLD = "2024-01-02T12:00:00Z"   # compacts the day-1 and day-2 logs, carries the day-3 logs over
CREATE = dict(name="orders", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
              event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "2"})
REGIONS = ("eu", "us")


def _rows(keys: range, seq: int, day: int) -> pa.Table:
    start = dt.datetime(2024, 1, day, tzinfo=dt.timezone.utc)
    return pa.table({
        "id": [f"k{k:04d}" for k in keys],
        "region": [REGIONS[k % 2] for k in keys],
        "seq": pa.array([seq] * len(keys), pa.int64()),
        "ts": pa.array([start + dt.timedelta(minutes=k) for k in keys], pa.timestamp("us", tz="UTC")),
        "amount": [k * 1.25 + seq for k in keys],
    })


def make_inputs(folder: Path) -> None:
    """The batches: Parquet (day 1), CSV (day 2, updates + new keys), JSON lines (day 3), a late Parquet
    batch after the compaction (day 1 again) and a Parquet delete."""
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(_rows(range(0, 200), 1, 1), folder / "day1.parquet", row_group_size=64)
    pacsv.write_csv(_rows(range(100, 300), 2, 2), folder / "day2.csv")
    with open(folder / "day3.jsonl", "w") as out:
        for row in _rows(range(250, 350), 3, 3).to_pylist():
            out.write(json.dumps({**row, "ts": row["ts"].strftime("%Y-%m-%dT%H:%M:%S.%fZ")}) + "\n")
    pq.write_table(_rows(range(0, 50), 4, 1), folder / "late.parquet")
    pq.write_table(_rows(range(300, 320), 5, 3), folder / "delete.parquet")


def after_first_write(root: str) -> dict:
    """Everything after `create` + the day-1 write (which the test does through the CLI on the cluster).
    `root` is the data folder as the caller names it ("." on the cluster: paths stay relative)."""
    from engine import Table

    def at(name: str) -> str:
        return os.path.join(root, name)

    table = Table.open(at(TABLE))
    table.write(at("day2.csv"))
    table.write(at("day3.jsonl"), "insert")
    plan = table.schedule_compaction(threshold=THRESHOLD, carry_over="copy")
    compaction = table.run_compaction(plan.instant)
    table.write(at("late.parquet"))
    table.write([at("delete.parquet")], "delete")
    os.makedirs(at("out"), exist_ok=True)
    reads = {q: table.read(q, output=at(f"out/{q}.parquet")).rows for q in ("snapshot", "read_optimized")}
    return {"table": table.path, "compaction": {"base_files": len(compaction.base_files),
                                                "records_written": compaction.records_written,
                                                "logs_carried_over": compaction.logs_carried_over},
            "reads": reads, "executors": executor_probe()}


def executor_probe() -> list[str]:
    """Where executors import the engine from and which Python runs them (one line per distinct answer)."""
    from engine.spark import get_spark

    def probe(_: int) -> str:
        import engine

        return f"{engine.__file__} {sys.executable}"

    sc = get_spark().sparkContext
    return sorted(set(sc.parallelize(range(8), 8).map(probe).collect()))


if __name__ == "__main__":
    os.chdir(sys.argv[1])
    print(json.dumps(after_first_write(".")))
