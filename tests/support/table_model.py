"""A small event-time table written without a JVM, and the model its snapshot must equal.

Keys `k<i>`, ordering and event time `ts`; upserts keep the higher `ts`, an ordered delete removes a key
whose `ts` is not above its own. Reads are checked against hudi 0.5.0 every time.
"""
from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.parquet as pq

from engine.config.layout import create_table
from engine.read.query import read_arrow
from engine.write.pipeline import write_parquet
from tests.support.inline_spark import InlineSpark
from tests.support.oracle import hudi_read

E = 1_700_000_000_000
T = E + 2000
HISTORY = [
    ("upsert", [(i, E + 1000 + i) for i in range(8)]),
    ("upsert", [(i, E + 3000) for i in range(3)] + [(8, E + 1500)]),
    ("delete", [(4, E + 3500)]),
]
LAST_WRITE = ("upsert", [(5, E + 4000), (9, E + 4100), (1, E + 2500)])   # (1, 2500) loses to (1, 3000)


def apply(model: dict[str, int], op: str, rows: list[tuple[int, int]]) -> dict[str, int]:
    out = dict(model)
    for i, ts in rows:
        key = f"k{i}"
        if op == "delete":
            if key in out and out[key] <= ts:
                del out[key]
        elif key not in out or out[key] <= ts:
            out[key] = ts
    return out


def model_of(history) -> dict[str, int]:
    model: dict[str, int] = {}
    for op, rows in history:
        model = apply(model, op, rows)
    return model


def write(path: str, op: str, rows: list[tuple[int, int]]) -> str:
    data = pa.table({"id": [f"k{i}" for i, _ in rows], "ts": pa.array([ts for _, ts in rows], pa.int64())})
    source = os.path.join(os.path.dirname(path), f"in-{time.monotonic_ns()}.parquet")
    pq.write_table(data, source)
    return write_parquet(path, [source], op, spark=InlineSpark()).instant


def snapshot(path: str) -> dict[str, int]:
    ours = read_arrow(path)
    result = dict(zip(ours.column("id").to_pylist(), ours.column("ts").to_pylist()))
    assert len(result) == ours.num_rows, "duplicate keys"
    theirs = hudi_read(path)
    assert dict(zip(theirs.column("id").to_pylist(), theirs.column("ts").to_pylist())) == result
    return result


def new_table(path: str, history=HISTORY, buckets: int = 2) -> None:
    create_table(path, name="f", record_keys=["id"], partition_fields=[], ordering_field="ts",
                 event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": str(buckets),
                                                  "hoodie.client.heartbeat.interval_in_ms": "100"})
    for op, rows in history:
        write(path, op, rows)


def read_optimized(path: str) -> dict[str, int]:
    ours = read_arrow(path, "read_optimized")
    result = dict(zip(ours.column("id").to_pylist(), ours.column("ts").to_pylist()))
    theirs = hudi_read(path, "read_optimized")
    assert dict(zip(theirs.column("id").to_pylist(), theirs.column("ts").to_pylist())) == result
    return result
