"""One scenario of Spark jobs (writes in every input format, a compaction, reads) run on any master.

The cluster test (tests/integration/test_spark_cluster.py) runs it in a driver process of its own against the
standalone cluster, with *relative* paths from the data folder (as a user in a shell would), and in the test
process on local Spark; the results must agree row for row. Run as a script:

    python -m tests.support.cluster_steps DATA_DIR     # prints a JSON summary on stdout's last line
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from engine.cli import main

TABLE = "table"   # relative to the data folder
THRESHOLD = "2024-01-02T12:00:00Z"   # compacts the day-1 and day-2 logs, carries the day-3 logs over

REGIONS = ("eu", "us")


def _rows(keys: range, seq: int, day: int) -> pa.Table:
    start = dt.datetime(2024, 1, day, tzinfo=dt.UTC)
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


CLI_CREATE = ["create", TABLE, "--name=orders", "--record-key=id", "--partition-field=region", "--ordering-field=seq",
              "--event-time-field=ts", "--config=hoodie.bucket.index.num.buckets=2"]


def run_all(root: str) -> dict:
    """The whole scenario; `root` is the data folder as the caller names it ("." on the cluster, so every path
    stays relative). Create and the first write go through the CLI's own entry point (in this process, so
    one SparkSession serves the scenario): `tidemark write table --input day1.parquet` is the command
    that failed on executors before paths were resolved at the boundary."""
    from engine import Table

    def at(name: str) -> str:
        return os.path.join(root, name)

    seconds: dict[str, float] = {}

    def timed(step: str, fn):
        start = time.perf_counter()
        out = fn()
        seconds[step] = round(time.perf_counter() - start, 2)
        return out

    create = [*CLI_CREATE[:1], at(TABLE), *CLI_CREATE[2:]]
    assert main(create) == 0 and timed("write parquet (CLI)", lambda: main(["write", at(TABLE), "--input", at("day1.parquet")])) == 0
    table = Table.open(at(TABLE))
    timed("write csv", lambda: table.write(at("day2.csv")))
    timed("write jsonl", lambda: table.write(at("day3.jsonl"), "insert"))
    plan = table.schedule_compaction(threshold=THRESHOLD, carry_over="copy")
    compaction = timed("compaction run", lambda: table.run_compaction(plan.instant))
    timed("write late parquet", lambda: table.write(at("late.parquet")))
    timed("delete parquet list", lambda: table.write([at("delete.parquet")], "delete"))
    os.makedirs(at("out"), exist_ok=True)
    reads = {q: timed(f"read {q}", lambda q=q: table.read(q, output=at(f"out/{q}.parquet")).rows)
             for q in ("snapshot", "read_optimized")}
    # one DataFrame (the same partitions in this session) written by Spark's tasks and in this process
    df_logs = {"tasks": timed("write dataframe on tasks", lambda: dataframe_logs(at("df_tasks"), local=False)),
               "in_process": timed("write dataframe in-process", lambda: dataframe_logs(at("df_here"), local=True))}
    return {"table": table.path, "compaction": {"base_files": len(compaction.base_files),
                                                "records_written": compaction.records_written,
                                                "logs_carried_over": compaction.logs_carried_over},
            "reads": reads, "dataframe_logs": df_logs, "executors": executor_probe(), "seconds": seconds}


def dataframe_logs(path: str, local: bool) -> dict[str, str]:
    """A DataFrame of several partitions (one per core) written into a new table (`local`: in this process, else on Spark's
    tasks); each log's MD5 by its name without the write token. Each run has its own instant, and file ids are
    derived from it: both are made placeholders of the same length in names and bytes alike (a file id keeps its
    bucket number), so two runs' logs compare byte for byte."""
    import hashlib

    from engine import Table
    from engine.spark import get_spark

    assert main([*CLI_CREATE[:1], path, *CLI_CREATE[2:]]) == 0
    data = pa.concat_tables([_rows(range(0, 300), 1, 1), _rows(range(100, 160), 2, 1)])
    # Arrow slices, no shuffle: a shuffle's rows come in the order its blocks are fetched, which on a cluster is
    # not the same from one run to the next (local blocks first)
    result = Table.open(path).write(get_spark().createDataFrame(data), local=local)
    out = {}
    for folder, _, names in os.walk(path):
        for name in (n for n in names if ".log." in n):
            file_id = name.lstrip(".").split("_", 1)[0]
            same = {result.instant: "I" * len(result.instant), file_id: file_id[:9] + "F" * (len(file_id) - 9)}
            with open(os.path.join(folder, name), "rb") as fh:
                data_bytes = fh.read()
            key = os.path.relpath(os.path.join(folder, name), path).rsplit("_", 1)[0]
            for real, placeholder in same.items():
                data_bytes, key = data_bytes.replace(real.encode(), placeholder.encode()), key.replace(real, placeholder)
            out[key] = hashlib.md5(data_bytes, usedforsecurity=False).hexdigest()
    return out


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
    print(json.dumps(run_all(".")))
