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


# ---------------------------------------------------------------------------------------------- partial updates

WIDE = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("w", pa.string())])


def wide(records: list[dict], columns: tuple[str, ...] = ("ts", "v", "w")) -> pa.Table:
    names = ["_hoodie_record_key", *columns]
    return pa.table({n: pa.array([r.get(n) for r in records], WIDE.field(n).type) for n in names})


def merged_rows(base: list[pa.Table], items: list, mode: str) -> list[tuple]:
    out = pa.concat_tables(list(merge_slice(base, items, mode, "ts", WIDE)) or [WIDE.empty_table()])
    return sorted(tuple(r.values()) for r in out.to_pylist())


def test_a_partial_winner_takes_the_columns_it_lacks_from_its_base_row():
    base = [wide([{"_hoodie_record_key": "a", "ts": 5, "v": "v0", "w": "w0"}])]
    logs = [DataItem(wide([{"_hoodie_record_key": "a", "ts": 7, "v": None}], ("ts", "v")), partial=True),
            DataItem(wide([{"_hoodie_record_key": "b", "w": "wb"}], ("w",)), partial=True)]
    # a: v is carried (as null), w is the base row's; b has no base row: what it lacks is null
    assert merged_rows(base, logs, EVENT_TIME_ORDERING) == [("a", 7, None, "w0"), ("b", None, None, "wb")]


def test_a_losing_partial_record_fills_only_what_the_winner_lacks():
    """Event time: the second record loses on ts (2 < 4) yet supplies w, which the winner does not carry; a full
    record that loses supplies nothing; after a winning delete nothing before it counts."""
    first = DataItem(wide([{"_hoodie_record_key": "a", "ts": 4, "v": "v1"}], ("ts", "v")), partial=True)
    loser = DataItem(wide([{"_hoodie_record_key": "a", "ts": 2, "v": "v2", "w": "w2"}], ("ts", "v", "w")[::2]),
                     partial=True)
    full_loser = DataItem(wide([{"_hoodie_record_key": "a", "ts": 1, "v": "v3", "w": "w3"}]))
    assert merged_rows([], [first, loser], EVENT_TIME_ORDERING) == [("a", 4, "v1", "w2")]
    assert merged_rows([], [first, full_loser], EVENT_TIME_ORDERING) == [("a", 4, "v1", None)]
    assert merged_rows([], [first, loser], COMMIT_TIME_ORDERING) == [("a", 2, "v1", "w2")]
    hard = DeleteItem(pa.array(["a"]), pa.array([0], pa.int64()), pa.array([True]))
    assert merged_rows([], [loser, hard, first], EVENT_TIME_ORDERING) == [("a", 4, "v1", None)]


def _model(base: list[dict], entries: list[tuple], mode: str) -> list[tuple]:
    """hudi 0.5.0's key-based buffer, one record at a time (buffer/key_based.rs, record_merger.rs)."""
    commit = mode == COMMIT_TIME_ORDERING
    state: dict[str, dict] = {}

    def newer_wins(old: dict, new: dict) -> bool:
        if commit or old["hard"] or new["hard"] or old["ts"] is None or new["ts"] is None:
            return True
        return bool(new["ts"] >= old["ts"])

    for key, kind, ts, cols in entries:
        old = state.get(key)
        if kind == "data":
            new = {"del": False, "hard": False, "ts": ts, "cols": cols}
            if old is not None and not old["del"] and len(cols) < 3:   # a partial record folds with its prior
                win, lose = (new, old) if newer_wins(old, new) else (old, new)
                new = {**win, "cols": {**lose["cols"], **win["cols"]}}
            elif old is not None and not newer_wins(old, new):
                continue
            state[key] = new
        elif old is None or commit or not (old["del"] and old["hard"]) and not (
                kind == "delete" and old["ts"] is not None and old["ts"] > ts):
            state[key] = {"del": True, "hard": kind == "hard", "ts": None if kind == "hard" else ts, "cols": {}}
    out = []
    for row in base:
        log = state.pop(row["_hoodie_record_key"], None)
        if log is None:
            out.append(row)
        elif log["del"]:
            if not commit and not log["hard"] and row["ts"] > log["ts"]:
                out.append(row)
        elif commit or log["ts"] is None or log["ts"] >= row["ts"]:
            out.append({**row, **log["cols"]})
        else:
            out.append(row)
    out += [{"_hoodie_record_key": k, "ts": None, "v": None, "w": None, **s["cols"]} for k, s in state.items()
            if not s["del"]]
    return sorted((r["_hoodie_record_key"], r["ts"], r["v"], r["w"]) for r in out)


# What a record carries: None a full record, else a partial one (all three columns too: Java's rule is the schema's
# fields, not the flag, so that one folds as a full record).
CARRIED = st.sampled_from([None, None, ("ts", "v"), ("ts", "w"), ("v",), ("w",), ("ts",), ("ts", "v", "w")])
ENTRY = st.tuples(st.sampled_from("ab"), st.sampled_from(["data", "data", "data", "delete", "hard"]), st.integers(1, 3),
                  CARRIED)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 3)), max_size=5), st.lists(ENTRY, max_size=10),
       st.sampled_from([EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING]), st.integers(1, 3))
def test_partial_fold_equals_hudis_record_by_record_fold(base_keys, log, mode, batch):
    """One record per log block: full or partial (carrying some of ts, v, w; without ts it has no ordering value),
    ordered or processing-time deletes; the base may hold a key twice and comes in batches."""
    base = [{"_hoodie_record_key": k, "ts": ts, "v": f"v{i}", "w": f"w{i}"} for i, (k, ts) in enumerate(base_keys)]
    items, entries = [], []
    for i, (key, kind, ts, columns) in enumerate(log):
        if kind != "data":
            items.append(DeleteItem(pa.array([key]), pa.array([0 if kind == "hard" else ts], pa.int64()),
                                    pa.array([kind == "hard"])))
            entries.append((key, kind, ts, {}))
            continue
        carried = columns or ("ts", "v", "w")
        record = {"_hoodie_record_key": key, "ts": ts, "v": f"v{key}{i}", "w": f"w{key}{i}"}
        items.append(DataItem(wide([record], carried), partial=columns is not None))
        entries.append((key, "data", ts if "ts" in carried else None, {c: record[c] for c in carried}))
    batches = [wide(base[i:i + batch]) for i in range(0, len(base), batch)]
    assert merged_rows(batches, items, mode) == _model(base, entries, mode)
