"""Vectorised merge semantics: commit-time and event-time ordering, deletes, streaming base batches."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config.properties import COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING
from engine.read.merge import DataItem, DeleteItem, _event_time_winners, _last_per_key, merge_log_items, merge_slice

SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def rows(keys, ts, vals):
    return pa.table({"_hoodie_record_key": keys, "ts": ts, "v": vals}, schema=SCHEMA)


def merged(base_batches, items, mode):
    out = pa.concat_tables(list(merge_slice(base_batches, items, mode, "ts", SCHEMA)) or [SCHEMA.empty_table()])
    return dict(zip(out.column("_hoodie_record_key").to_pylist(), out.column("v").to_pylist()))


BASE = [rows(["a", "b"], [5, 5], ["a0", "b0"]), rows(["c", "d"], [5, 5], ["c0", "d0"])]
LOGS = [
    DataItem(rows(["a", "b", "e"], [6, 4, 1], ["a1", "b1", "e1"])),
    DeleteItem(pa.array(["c", "e"]), pa.array([0, 0], pa.int32()), pa.array([True, True])),
    DataItem(rows(["e"], [0], ["e2"])),
    DeleteItem(pa.array(["d"]), pa.array([4], pa.int64()), pa.array([False])),
]


def test_event_time_ordering():
    # b: older ts in the log loses to the base; c: processing-time delete always wins;
    # d: delete with ordering 4 < base 5 loses; e: re-insert after a processing-time delete comes back.
    assert merged(BASE, LOGS, EVENT_TIME_ORDERING) == {"a": "a1", "b": "b0", "d": "d0", "e": "e2"}


def test_commit_time_ordering():
    assert merged(BASE, LOGS, COMMIT_TIME_ORDERING) == {"a": "a1", "b": "b1", "e": "e2"}


def test_ties_go_to_the_later_record():
    logs = [DataItem(rows(["a"], [5], ["a1"])), DataItem(rows(["a"], [5], ["a2"]))]
    assert merged(BASE, logs, EVENT_TIME_ORDERING)["a"] == "a2"


def test_no_base_and_no_logs():
    assert merged([], [], EVENT_TIME_ORDERING) == {}
    assert merged([], [DataItem(rows(["x"], [1], ["x1"]))], COMMIT_TIME_ORDERING) == {"x": "x1"}


def test_unknown_merge_mode_is_refused():
    with pytest.raises(ValueError, match="unknown merge mode"):
        list(merge_slice([], [], "WHATEVER", "ts", SCHEMA))


def test_distinct_log_keys_event_time():
    # Every key once in the logs: a wins (6 > 5), b loses to the base (4 < 5), c's processing-time delete
    # removes it, d's delete with ordering 4 loses to the base, x is a new insert.
    logs = [DataItem(rows(["a", "b", "x"], [6, 4, 1], ["a1", "b1", "x1"])),
            DeleteItem(pa.array(["c", "d"]), pa.array([0, 4], pa.int64()), pa.array([True, False]))]
    assert merged(BASE, logs, EVENT_TIME_ORDERING) == {"a": "a1", "b": "b0", "d": "d0", "x": "x1"}
    assert merged(BASE, logs, COMMIT_TIME_ORDERING) == {"a": "a1", "b": "b1", "x": "x1"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["data", "delete", "hard"]), st.integers(0, 3)), min_size=1, max_size=12),
       st.booleans())
def test_distinct_keys_shortcut_equals_the_fold(entries, distinct):
    """The winners of logs whose keys are all distinct equal the general fold's (which also runs for repeats)."""
    keys = [f"k{i}" if distinct else f"k{i % 3}" for i in range(len(entries))]
    items = []
    for key, (kind, ts) in zip(keys, entries):
        if kind == "data":
            items.append(DataItem(rows([key], [ts], [f"{key}@{ts}"])))
        else:
            items.append(DeleteItem(pa.array([key]), pa.array([ts if kind == "delete" else 0], pa.int64()),
                                    pa.array([kind == "hard"])))
    is_del = np.array([kind != "data" for kind, _ in entries])
    is_hard = np.array([kind == "hard" for kind, _ in entries])
    codes = pc.dictionary_encode(pa.array(keys)).indices.to_numpy()
    seq = np.arange(len(keys))
    for mode in (EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING):
        got = merge_log_items(items, mode, "ts", SCHEMA)
        if mode == EVENT_TIME_ORDERING:
            ordering = pa.array([ts if kind != "hard" else 0 for kind, ts in entries], pa.int64())
            want, kills = _event_time_winners(codes, seq, ordering, is_hard, is_del)
        else:
            want, kills = _last_per_key(codes, seq), np.zeros(len(set(keys)), bool)
        assert got.entries is not None
        assert got.entries.tolist() == want.tolist()
        assert got.kills_base.tolist() == kills.tolist()
        assert got.keys.to_pylist() == [keys[i] for i in want]
        assert got.is_delete.tolist() == is_del[want].tolist()


# ---------------------------------------------------------------------------------- keys the base holds twice

def test_a_base_key_held_twice_meets_its_log_winner_once_across_batches():
    base = [rows(["a", "b"], [5, 5], ["a0", "b0"]), rows(["a", "b"], [5, 5], ["a1", "b1"])]
    logs = [DataItem(rows(["a"], [6], ["a2"])),
            DeleteItem(pa.array(["b"]), pa.array([0], pa.int64()), pa.array([True]))]
    for mode in (EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING):
        out = pa.concat_tables(list(merge_slice(base, logs, mode, "ts", SCHEMA)))
        assert sorted(zip(out.column("_hoodie_record_key").to_pylist(), out.column("v").to_pylist())) == [
            ("a", "a1"), ("a", "a2"), ("b", "b1")]
