"""Ordering values are read in the table's type and unit whatever the input format (issue 9, case 4).

A table whose ordering field is a timestamp holds it in one unit (timestamp-millis or -micros, fixed by its
first write). Deletes and upserts then arrive as CSV or JSONL (ISO strings, naive = UTC), Parquet in ms or µs,
or a Spark DataFrame (µs). An older delete must lose, a newer one must win, an older upsert must lose — in our
snapshot and in hudi 0.5.0's.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.config.layout import create_table
from engine.read.query import read_arrow
from engine.write.pipeline import write_dataframe, write_file
from tests.support.oracle import hudi_read, rows_by_key

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
STORED = T0 + dt.timedelta(minutes=10)            # ordering value of every stored row
OLDER, NEWER = T0 + dt.timedelta(minutes=5), T0 + dt.timedelta(minutes=20)


def stored_rows(unit: str) -> pa.Table:
    ids = ["k1", "k2", "k3", "k4"]
    return pa.table({"id": ids, "updated_at": pa.array([STORED] * 4, pa.timestamp(unit, tz="UTC")),
                     "ts": pa.array([T0] * 4, pa.timestamp(unit, tz="UTC")), "v": [1.0, 2.0, 3.0, 4.0]})


# k1: a delete older than the stored row (loses); k2: a newer delete (wins); the naive and offset spellings
# of the same instants must mean UTC and that offset.
DELETES = [("k1", OLDER), ("k2", NEWER)]
# k3: an older upsert (loses); k4: a newer upsert (wins).
UPSERTS = [("k3", OLDER, 30.0), ("k4", NEWER, 40.0)]


def as_text(when: dt.datetime, spelling: int) -> str:
    """Three spellings of one instant: Z, naive (= UTC), and +01:00."""
    if spelling == 0:
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")
    if spelling == 1:
        return when.strftime("%Y-%m-%dT%H:%M:%S")
    return (when + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S+01:00")


def write_input(spark, table: str, tmp: Path, fmt: str, rows: list[dict], operation: str, name: str) -> None:
    if fmt == "csv":
        cols = list(rows[0])
        lines = [",".join(cols)] + [",".join(str(r[c]) for c in cols) for r in rows]
        (tmp / f"{name}.csv").write_text("\n".join(lines) + "\n")
        write_file(table, str(tmp / f"{name}.csv"), operation)
    elif fmt == "jsonl":
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        write_file(table, str(tmp / f"{name}.jsonl"), operation)
    else:
        unit = {"parquet_ms": "ms", "parquet_us": "us", "dataframe": "us"}[fmt]
        data = pa.table({c: ([r[c] for r in rows] if c in ("id", "v") else
                             pa.array([r[c] for r in rows], pa.timestamp(unit, tz="UTC"))) for c in rows[0]})
        if fmt == "dataframe":
            write_dataframe(table, spark.createDataFrame(data), operation)
        else:
            pq.write_table(data, tmp / f"{name}.parquet")
            write_file(table, str(tmp / f"{name}.parquet"), operation)


def spelled(when: dt.datetime, fmt: str, i: int):
    return as_text(when, i % 3) if fmt in ("csv", "jsonl") else when


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet_ms", "parquet_us", "dataframe"])
@pytest.mark.parametrize("table_unit", ["ms", "us"])
def test_ordering_values_compare_in_the_table_unit(spark, tmp_path, table_unit, fmt):
    table = str(tmp_path / "t")
    create_table(table, name="t", record_keys=["id"], ordering_field="updated_at", event_time_field="ts",
                 settings={"hoodie.bucket.index.num.buckets": "1"})
    pq.write_table(stored_rows(table_unit), tmp_path / "stored.parquet")
    write_file(table, str(tmp_path / "stored.parquet"))

    upserts = [{"id": k, "updated_at": spelled(w, fmt, i), "ts": spelled(T0, fmt, i), "v": v}
               for i, (k, w, v) in enumerate(UPSERTS)]
    write_input(spark, table, tmp_path, fmt, upserts, "upsert", "up")
    deletes = [{"id": k, "updated_at": spelled(w, fmt, i + 1)} for i, (k, w) in enumerate(DELETES)]
    write_input(spark, table, tmp_path, fmt, deletes, "delete", "del")

    ours = rows_by_key(read_arrow(table))
    assert {k: r["v"] for (_, k), r in ours.items()} == {"k1": 1.0, "k3": 3.0, "k4": 40.0}
    stamp = {k: r["updated_at"] for (_, k), r in ours.items()}
    assert stamp["k4"] == NEWER.timestamp() * 1000 and stamp["k1"] == STORED.timestamp() * 1000
    assert rows_by_key(hudi_read(table)) == ours
