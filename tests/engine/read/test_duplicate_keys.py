"""A file group whose base file holds a record key more than once (Java's `hoodie.merge.allow.duplicate.on.inserts`):
each log winner meets the first base row of its key only, as hudi 0.5.0 merges by key (the sdist's
`table_duplicate_keys.scala`)."""
from __future__ import annotations

from engine.read.query import read_arrow
from tests.support.fixtures import unzip_fixture
from tests.support.java_queries import assert_every_query_like_hudi


def test_java_table_reads_like_hudi_in_every_query(tmp_path):
    assert_every_query_like_hudi(str(unzip_fixture("table_duplicate_keys", tmp_path / "t")))


def test_a_key_held_twice_meets_the_logs_once(tmp_path):
    """The log's upsert of k1 (one record per matched base row) replaces the first k1 row only, its delete of k2
    (three records) removes the first k2 row only: the other rows of each key pass through (5 rows, not 2)."""
    path = str(unzip_fixture("table_duplicate_keys", tmp_path / "t"))
    got = sorted((r["id"], r["val"]) for r in read_arrow(path).to_pylist())
    assert got == [("k1", "k1-row-b"), ("k1", "k1-updated"), ("k2", "k2-row-b"), ("k2", "k2-row-c"),
                   ("k3", "k3-row-a")]
