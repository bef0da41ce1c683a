"""Compacting a file group whose base file holds a record key more than once (the sdist's `table_duplicate_keys`):
the new base holds what hudi 0.5.0 reads, the rows the logs never met included."""
from __future__ import annotations

import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.config.eventtime import MAX_MS
from engine.config.properties import EVENT_TIME_ORDERING
from engine.read.query import read_arrow
from tests.support.fixtures import unzip_fixture
from tests.support.java_queries import rows
from tests.support.oracle import hudi_read
from tests.support.partial_tables import Delete, Put, build, compact_with_late_writes

REWRITTEN = ("_hoodie_commit_seqno", "_hoodie_file_name")   # a compaction gives each row a new file and number


def test_java_table_compacts_in_place_with_hudis_snapshot_unchanged(tmp_path):
    path = str(unzip_fixture("table_duplicate_keys", tmp_path / "t"))
    snapshot = hudi_read(path)
    assert schedule_compaction(path, strategy="event_time", threshold_ms=MAX_MS - 999).written
    done = run_compaction(path, local=True)
    assert done.spark_tasks is None and "spark_tasks" not in done.to_dict()   # no Spark task: the result's shape
    for ours in (hudi_read(path), read_arrow(path), hudi_read(path, "read_optimized"),
                 read_arrow(path, "read_optimized")):
        assert rows(ours, REWRITTEN) == rows(snapshot, REWRITTEN)
    got = sorted((r["id"], r["val"]) for r in read_arrow(path, "read_optimized").to_pylist())
    assert got == [("k1", "k1-row-b"), ("k1", "k1-updated"), ("k2", "k2-row-b"), ("k2", "k2-row-c"),
                   ("k3", "k3-row-a")]


# --------------------------------------------------------------------------- writes while the plan is pending

HISTORIES = {
    # one delete in the logs removes the first row; folded, a later delete would meet (and remove) the second
    "delete, then delete": ([Delete(("k0",))], [Delete(("k0",))]),
    # folded, the update would land after the second row, which the later update would then replace
    "update, then update": ([Put({"k0": {"ts": 5, "a": "a1", "b": "b1"}})], [Put({"k0": {"ts": 6, "a": "a2", "b": "b2"}})]),
}


@pytest.mark.parametrize("history", list(HISTORIES))
def test_a_key_held_twice_and_written_while_the_plan_is_pending_reads_as_before(tmp_path, history):
    """Event time reads the logs written into slice C: a folded winner of a key the old base holds twice is
    withheld, so what follows still meets the first row of the key, as it did before the run."""
    folded, late = HISTORIES[history]
    base = [("k0", {"ts": 3, "a": "a-0", "b": "b-0"}), ("k0", {"ts": 3, "a": "a-1", "b": "b-1"})]
    path, _ = build(tmp_path / "t", EVENT_TIME_ORDERING, base, folded)
    _, before = compact_with_late_writes(path, late)
    assert rows(hudi_read(path)) == rows(before) == rows(read_arrow(path))
