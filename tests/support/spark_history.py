"""The five writes the Spark compaction tests replay (test_compaction_execute, test_v8_tables), and the RO
guarantee they must leave: keys `k<i>` in regions eu/us, `ts` both the ordering and the event-time field."""
from __future__ import annotations

import pyarrow as pa

from engine.write.pipeline import write_dataframe

E = 1_700_000_000_000          # epoch millis of the test's "day"
T = E + 2600                   # the threshold used throughout

# (op, ids, ts) in write order; ts is both the ordering and the event-time field.
HISTORY = [
    ("upsert", [(i, E + 1000 + i) for i in range(20)]),
    ("upsert", [(i, E + 2000) for i in range(5)] + [(i, E + 2700) for i in range(7, 13)]),  # straddles T
    ("delete", [(5, E + 2500), (6, E + 2500)]),
    ("upsert", [(0, E + 3000), (1, E + 3000), (20, E + 3000), (21, E + 3000)]),
    ("upsert", [(5, E + 4000), (2, E + 4000)]),   # 5 comes back after its delete
]


def region(i: int) -> str:
    return "eu" if i % 3 else "us"


def frame(rows: list[tuple[int, int]]) -> pa.Table:
    return pa.table({"id": [f"k{i:02d}" for i, _ in rows], "region": [region(i) for i, _ in rows],
                     "ts": pa.array([ts for _, ts in rows], pa.int64()),
                     "note": [f"n{i}@{ts - E}" for i, ts in rows]})


def write(spark, path, op, rows) -> None:
    data = frame(rows)
    if op == "delete":
        data = data.select(["id", "region", "ts"])
    write_dataframe(str(path), spark.createDataFrame(data), op)


def events(history) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {}
    for op, rows in history:
        for i, ts in rows:
            out.setdefault(f"k{i:02d}", []).append((op, ts))
    return out


def as_of(history, threshold=None) -> dict[str, int]:
    """key -> ts of the state as of `threshold` (all events if None); deleted keys are absent."""
    state = {}
    for key, evs in events(history).items():
        seen = [e for e in evs if threshold is None or e[1] <= threshold]
        if seen and seen[-1][0] == "upsert":
            state[key] = seen[-1][1]
    return state


def ts_by_key(table: pa.Table) -> dict[str, int]:
    keys = table.column("_hoodie_record_key").to_pylist()
    assert len(set(keys)) == len(keys), "duplicate keys"
    return dict(zip(keys, table.column("ts").to_pylist()))


def assert_ro_guarantee(ro: dict[str, int], history, threshold: int) -> None:
    """Each key: its latest version ≤ T or a later one; a delete ≤ T applied unless the key came back."""
    for key, evs in events(history).items():
        versions = {ts for op, ts in evs if op == "upsert"}
        if key in ro:
            assert ro[key] in versions, (key, ro[key])
        seen = [e for e in evs if e[1] <= threshold]
        if not seen:
            continue
        op, ts = seen[-1]
        if op == "upsert":
            assert key in ro and ro[key] >= ts, (key, ro.get(key), ts)
        else:
            assert key not in ro or ro[key] > ts, (key, ro[key])
