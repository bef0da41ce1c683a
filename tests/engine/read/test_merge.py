"""Vectorised merge semantics: commit-time and event-time ordering, deletes, streaming base batches."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.config.properties import COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING
from engine.read.merge import DataItem, DeleteItem, merge_slice

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
