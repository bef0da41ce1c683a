"""Compacting a file group whose base file holds a record key more than once (the sdist's `table_duplicate_keys`):
the new base holds what hudi 0.5.0 reads, the rows the logs never met included."""
from __future__ import annotations

from engine.compaction import run_compaction, schedule_compaction
from engine.config.eventtime import MAX_MS
from engine.read.query import read_arrow
from tests.support.fixtures import unzip_fixture
from tests.support.java_queries import rows
from tests.support.oracle import hudi_read

REWRITTEN = ("_hoodie_commit_seqno", "_hoodie_file_name")   # a compaction gives each row a new file and number


def test_java_table_compacts_in_place_with_hudis_snapshot_unchanged(tmp_path):
    path = str(unzip_fixture("table_duplicate_keys", tmp_path / "t"))
    snapshot = hudi_read(path)
    assert schedule_compaction(path, strategy="event_time", threshold_ms=MAX_MS - 999).written
    run_compaction(path, local=True)
    for ours in (hudi_read(path), read_arrow(path), hudi_read(path, "read_optimized"),
                 read_arrow(path, "read_optimized")):
        assert rows(ours, REWRITTEN) == rows(snapshot, REWRITTEN)
    got = sorted((r["id"], r["val"]) for r in read_arrow(path, "read_optimized").to_pylist())
    assert got == [("k1", "k1-row-b"), ("k1", "k1-updated"), ("k2", "k2-row-b"), ("k2", "k2-row-c"),
                   ("k3", "k3-row-a")]
