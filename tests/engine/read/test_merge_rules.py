"""Each merge rule of docs/ARCHITECTURE.md ("Merge rules"), on a real table, against hudi 0.5.0.

One file group, one key `k`; every step is one deltacommit (its own log file, so log order = step order),
`base` compacts everything written so far into a base file. Deletes carry the ordering value given, or
none at all (a processing-time delete: Java's IntWrapper 0).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.config.layout import create_table
from engine.read.query import read_arrow
from engine.write.pipeline import write_dataframe
from tests.support.oracle import hudi_read

NO_ORDERING = None


def put(ts: int, v: str) -> tuple:
    return ("put", ts, v)


def delete(ts: int | None) -> tuple:
    return ("delete", ts)


BASE = ("base",)


def build(spark, path, mode: str, steps: list[tuple]) -> None:
    create_table(str(path), name="t", record_keys=["id"], partition_fields=[], ordering_field="ts",
                 event_time_field="ts", merge_mode=mode)
    other = pa.table({"id": ["other"], "ts": pa.array([1], pa.int64()), "v": ["o"]})
    write_dataframe(str(path), spark.createDataFrame(other), "upsert")   # the table has a schema from the start
    for step in steps:
        if step[0] == "put":
            rows = pa.table({"id": ["k"], "ts": pa.array([step[1]], pa.int64()), "v": [step[2]]})
            write_dataframe(str(path), spark.createDataFrame(rows), "upsert")
        elif step[0] == "delete":
            rows = pa.table({"id": ["k"]}) if step[1] is None else pa.table(
                {"id": ["k"], "ts": pa.array([step[1]], pa.int64())})
            write_dataframe(str(path), spark.createDataFrame(rows), "delete")
        else:
            assert schedule_compaction(str(path), strategy="unbounded").written
            run_compaction(str(path), spark=spark)


def value_of_k(table: pa.Table) -> str | None:
    rows = table.filter(pc.equal(table.column("_hoodie_record_key"), "k"))
    assert rows.num_rows <= 1
    return rows.column("v")[0].as_py() if rows.num_rows else None


EVENT_TIME_RULES = {
    # log against log
    "greater ordering wins": ([put(20, "a"), put(10, "b")], "a"),
    "equal ordering: the later record wins": ([put(20, "a"), put(20, "b")], "b"),
    "delete with ordering beats an older record": ([put(10, "a"), delete(30)], None),
    "delete with ordering loses to a newer record": ([put(20, "a"), delete(10)], "a"),
    "equal ordering: a later delete wins": ([put(20, "a"), delete(20)], None),
    "equal ordering: a later record beats a delete": ([delete(20), put(20, "a")], "a"),
    "a record after a delete with greater ordering stays deleted": ([put(10, "a"), delete(30), put(20, "c")], None),
    "delete without ordering removes everything before it": ([put(50, "a"), delete(NO_ORDERING)], None),
    "a record after a delete without ordering always wins": ([put(20, "a"), delete(NO_ORDERING), put(10, "n")], "n"),
    "deletes with ordering after a delete without ordering are ignored":
        ([put(5, "x"), delete(NO_ORDERING), delete(30), put(10, "n"), delete(5)], "n"),
    "after the first record they compete again": ([put(5, "x"), delete(NO_ORDERING), delete(30), put(10, "n"),
                                                   delete(20)], None),
    # log against base
    "base with greater ordering beats the log": ([put(20, "b"), BASE, put(10, "a")], "b"),
    "equal ordering: the log beats the base": ([put(20, "b"), BASE, put(20, "a")], "a"),
    "delete with smaller ordering keeps the base": ([put(20, "b"), BASE, delete(10)], "b"),
    "delete with equal ordering removes the base": ([put(20, "b"), BASE, delete(20)], None),
    "delete without ordering removes the base": ([put(20, "b"), BASE, delete(NO_ORDERING)], None),
    "a record after a delete without ordering competes with the base (issue 9 case 2)":
        ([put(20, "b"), BASE, delete(NO_ORDERING), put(10, "n")], "b"),
    "... and wins with a greater ordering": ([put(20, "b"), BASE, delete(NO_ORDERING), put(10, "n"), put(30, "m")],
                                             "m"),
    "a forgotten delete without ordering: the log's ordered delete meets the base":
        ([put(20, "b"), BASE, delete(NO_ORDERING), put(10, "n"), delete(15)], "b"),
    "the last of two deletes decides against the base": ([put(20, "b"), BASE, delete(NO_ORDERING), delete(10)], None),
    "an older record, then a delete with ordering, then a newer record": ([put(20, "b"), BASE, delete(30),
                                                                          put(25, "a")], None),
}

COMMIT_TIME_RULES = {
    "the later record wins whatever its ordering": ([put(20, "a"), put(10, "b")], "b"),
    "a delete removes the key whatever its ordering": ([put(20, "a"), delete(10)], None),
    "a record after a delete comes back": ([put(10, "a"), delete(30), put(20, "c")], "c"),
    "the log beats the base whatever its ordering": ([put(20, "b"), BASE, put(10, "a")], "a"),
    "a delete removes the base row": ([put(20, "b"), BASE, delete(10)], None),
}


@pytest.mark.parametrize("rule", list(EVENT_TIME_RULES))
def test_event_time_rule(spark, tmp_path, rule):
    steps, expected = EVENT_TIME_RULES[rule]
    build(spark, tmp_path / "t", "event_time", steps)
    assert value_of_k(hudi_read(tmp_path / "t")) == expected
    assert value_of_k(read_arrow(str(tmp_path / "t"))) == expected


@pytest.mark.parametrize("rule", list(COMMIT_TIME_RULES))
def test_commit_time_rule(spark, tmp_path, rule):
    steps, expected = COMMIT_TIME_RULES[rule]
    build(spark, tmp_path / "t", "commit_time", steps)
    assert value_of_k(hudi_read(tmp_path / "t")) == expected
    assert value_of_k(read_arrow(str(tmp_path / "t"))) == expected
