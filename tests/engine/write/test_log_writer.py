"""engine.write.job and log_writer: the key-uniqueness test behind pre-combining, and grouping routed rows."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.index.routing import BUCKET_COL, PART_COL
from engine.write import job, log_writer


def test_keys_distinct_is_exact():
    keys = pa.array([f"key-{i}" for i in range(50_000)])
    assert job.keys_distinct(keys)
    assert not job.keys_distinct(pa.concat_arrays([keys, pa.array(["key-17"])]))
    assert job.keys_distinct(pa.chunked_array([keys[:10], keys[10:]]))


def test_keys_distinct_settles_hash_collisions_exactly(monkeypatch):
    # Every key hashing alike forces the exact comparison on all of them.
    monkeypatch.setattr(job, "spark_hash_strings", lambda keys, seed=0: np.zeros(len(keys), np.int32))
    assert job.keys_distinct(pa.array(["a", "b", "c"]))
    assert not job.keys_distinct(pa.array(["a", "b", "a"]))


def test_group_indices_keep_input_order():
    table = pa.table({"v": list(range(8)), PART_COL: ["p", "q", "p", "p", "q", "p", "q", "p"],
                      BUCKET_COL: pa.array([0, 0, 1, 0, 0, 1, 0, 0], pa.int32())})
    groups = {key: rows.column("v").to_pylist() for key, rows in log_writer.groups(table)}
    assert groups == {("p", 0): [0, 3, 7], ("p", 1): [2, 5], ("q", 0): [1, 4, 6]}
    whole = list(log_writer.group_indices(table.slice(0, 1)))
    assert whole == [(("p", 0), None)]


def test_grouped_is_one_take_with_groups_as_slices():
    table = pa.table({"v": list(range(8)), PART_COL: ["p", "q", "p", "p", "q", "p", "q", "p"],
                      BUCKET_COL: pa.array([0, 0, 1, 0, 0, 1, 0, 0], pa.int32())})
    ordered, spans = log_writer.grouped(table)
    assert ordered.column_names == ["v"]   # the group's key names partition and bucket
    assert {key: ordered.slice(start, count).column("v").to_pylist() for key, start, count in spans} == \
        {key: rows.column("v").to_pylist() for key, rows in log_writer.groups(table)}
    assert [key for key, _, _ in spans] == [("p", 0), ("p", 1), ("q", 0)]
    one, whole = log_writer.grouped(table.slice(0, 1))
    assert whole == [(("p", 0), 0, 1)] and one.column("v").to_pylist() == [0]
