"""Issue 9 cases 1 and 3: a partial compaction never changes the snapshot (ours and hudi 0.5.0), and exact
mode's RO view is the as-of view across repeated compactions.

Tables here have a separate ordering field (`seq`) and event-time field (`ts`), so an update can be newer
in ordering but later in event time than a delete — the shape that resurrected keys.
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.compaction.execute import RO_COMPLETION_KEY
from engine.config.layout import create_table
from engine.config.properties import load_table_config
from engine.read.query import read_arrow
from engine.write.pipeline import write_dataframe
from tests.support.oracle import hudi_read

E = 1_700_000_000_000


def make(path, mode: str = "event_time", ordering: str = "seq") -> str:
    """One bucket: every key in one file group, so a write's log holds all of its rows."""
    create_table(str(path), name="t", record_keys=["id"], partition_fields=[], ordering_field=ordering,
                 event_time_field="ts", merge_mode=mode, settings={"hoodie.bucket.index.num.buckets": "1"})
    return str(path)


def put_rows(spark, path: str, rows: list[tuple[str, int, int]]) -> None:
    """(key, seq, ts) rows as one write."""
    table = pa.table({"id": [r[0] for r in rows], "seq": pa.array([r[1] for r in rows], pa.int64()),
                      "ts": pa.array([E + r[2] for r in rows], pa.int64()), "v": [f"{r[0]}{r[1]}" for r in rows]})
    write_dataframe(path, spark.createDataFrame(table), "upsert")


def put(spark, path: str, key: str, seq: int, ts: int, v: str = "") -> None:
    rows = pa.table({"id": [key], "seq": pa.array([seq], pa.int64()), "ts": pa.array([E + ts], pa.int64()),
                     "v": [v or f"{key}{seq}"]})
    write_dataframe(path, spark.createDataFrame(rows), "upsert")


def delete(spark, path: str, key: str, seq: int | None, ts: int) -> None:
    cols = {"id": [key], "ts": pa.array([E + ts], pa.int64())}
    if seq is not None:
        cols["seq"] = pa.array([seq], pa.int64())
    write_dataframe(path, spark.createDataFrame(pa.table(cols)), "delete")


def view(table: pa.Table) -> dict[str, int]:
    """key -> seq."""
    keys = table.column("_hoodie_record_key").to_pylist()
    assert len(keys) == len(set(keys)), "duplicate keys"
    return dict(zip(keys, table.column("seq").to_pylist()))


def snapshot(path: str) -> dict[str, int]:
    ours, theirs = view(read_arrow(path)), view(hudi_read(path))
    assert ours == theirs
    return ours


def ro(path: str) -> dict[str, int]:
    ours, theirs = view(read_arrow(path, "read_optimized")), view(hudi_read(path, "read_optimized"))
    assert ours == theirs
    return ours


def compact(spark, path: str, threshold: int, *, exact: bool, carry: str = "symlink") -> None:
    plan = schedule_compaction(path, threshold_ms=E + threshold, exact=exact, carry_over=carry)
    assert plan.written
    run_compaction(path, spark=spark)


@pytest.mark.parametrize("exact,carry", [(False, "symlink"), (True, "copy")])
def test_a_delete_folded_into_the_base_still_beats_a_carried_lower_update(spark, tmp_path, exact, carry):
    """Case 1: put (seq 10), delete (seq 30), then after the threshold put (seq 20): k stays deleted."""
    path = make(tmp_path / "t")
    put(spark, path, "other", 1, 1)
    put(spark, path, "k", 10, 1)
    delete(spark, path, "k", 30, 2)
    put(spark, path, "k", 20, 10)
    before = snapshot(path)
    assert "k" not in before
    compact(spark, path, 5, exact=exact, carry=carry)
    assert snapshot(path) == before
    assert "k" not in ro(path)


def test_a_winner_before_a_processing_time_delete_stays_out_of_the_base(spark, tmp_path):
    """Hudi lets the base row compete with a record written after a delete without ordering value: the
    compaction must not replace that base row with the prefix's winner."""
    path = make(tmp_path / "t")
    put(spark, path, "k", 20, 1, "base")
    assert schedule_compaction(path, strategy="unbounded").written
    run_compaction(path, spark=spark)
    put(spark, path, "k", 30, 2, "prefix")
    delete(spark, path, "k", None, 20)
    put(spark, path, "k", 10, 30, "late")
    before = snapshot(path)
    assert before == {"k": 20}
    compact(spark, path, 5, exact=False)
    assert snapshot(path) == before


def test_a_processing_time_delete_in_the_prefix_is_replayed(spark, tmp_path):
    """put (seq 20) ... delete without ordering, then after the threshold a delete with ordering and a record:
    the ordered delete is ignored after the processing-time one, so the record wins."""
    path = make(tmp_path / "t")
    put(spark, path, "k", 20, 1)
    delete(spark, path, "k", None, 2)
    delete(spark, path, "k", 30, 10)
    put(spark, path, "k", 10, 11)
    before = snapshot(path)
    assert before == {"k": 10}
    compact(spark, path, 5, exact=False)
    assert snapshot(path) == before


@pytest.mark.parametrize("mode", ["event_time", "commit_time"])
def test_exact_mode_keeps_every_late_version_for_the_next_compaction(spark, tmp_path, mode):
    """Case 3: two late versions of k in compacted logs; the second exact compaction (higher T) must find
    the first one, and the first compaction must not promise past it."""
    path = make(tmp_path / "t", mode=mode, ordering="ts")
    put_rows(spark, path, [("other", 1, 1), ("k", 40, 40)])
    put_rows(spark, path, [("k", 45, 45), ("x", 2, 2)])
    before = snapshot(path)
    compact(spark, path, 35, exact=True)
    assert snapshot(path) == before and ro(path) == {"other": 1, "x": 2}
    completion = int(load_table_config(path).props[RO_COMPLETION_KEY])
    assert completion < E + 40, "RO misses k@40, so the promise must stay below it"
    compact(spark, path, 42, exact=True)
    assert snapshot(path) == before
    assert ro(path) == {"other": 1, "x": 2, "k": 40}
    assert int(load_table_config(path).props[RO_COMPLETION_KEY]) < E + 45


@pytest.mark.parametrize("mode", ["event_time", "commit_time"])
def test_exact_mode_never_applies_a_delete_after_the_threshold(spark, tmp_path, mode):
    path = make(tmp_path / "t", mode=mode, ordering="ts")
    put_rows(spark, path, [("k", 10, 10)])
    delete(spark, path, "k", 50, 50)
    put_rows(spark, path, [("x", 5, 5)])          # late data: the compacted prefix reaches past the delete
    before = snapshot(path)
    assert before == {"x": 5}
    compact(spark, path, 30, exact=True)
    assert snapshot(path) == before
    assert ro(path) == {"k": 10, "x": 5}            # the as-of view at T: the delete came later
    compact(spark, path, 60, exact=True)
    assert snapshot(path) == before and ro(path) == {"x": 5}


def test_exact_mode_with_commit_time_ordering_and_a_late_update_of_older_event_time(spark, tmp_path):
    """Commit-time: the later write wins even with an older event time; the earlier, later-event-time
    version can never be the as-of winner again, so no compaction may bring it back."""
    path = make(tmp_path / "t", mode="commit_time", ordering="ts")
    put_rows(spark, path, [("k", 50, 50)])
    put_rows(spark, path, [("k", 20, 20), ("j", 40, 40)])
    delete(spark, path, "j", None, 25)
    before = snapshot(path)
    assert before == {"k": 20}
    compact(spark, path, 30, exact=True)
    assert snapshot(path) == before and ro(path) == {"k": 20}
    put(spark, path, "m", 55, 55)
    compact(spark, path, 60, exact=True)
    assert snapshot(path) == {"k": 20, "m": 55} and ro(path) == {"k": 20, "m": 55}
