"""engine.write.job and log_writer: the key-uniqueness test behind pre-combining, and grouping routed rows."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.index import routing
from engine.index.bucket_hash import bucket_ids, spark_hash_strings
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


def test_keys_distinct_takes_routings_hashes_and_settles_their_collisions():
    same = np.zeros(3, np.int32)   # hashes the caller carried, all alike: every key compared exactly
    assert job.keys_distinct(pa.array(["a", "b", "c"]), same)
    assert not job.keys_distinct(pa.array(["a", "b", "a"]), same)
    keys = pa.array([f"key-{i}" for i in range(1000)])
    routed = routing.route(routing.Routing(("id",), (), False, 4), pa.table({"id": keys}))
    hashes = routed.column(routing.HASH_COL).to_numpy()
    assert np.array_equal(hashes, spark_hash_strings(keys))   # the hash the buckets came from
    assert np.array_equal(routed.column(routing.BUCKET_COL).to_numpy(), bucket_ids(keys, 4))
    assert job.keys_distinct(keys, hashes)


def test_group_indices_keep_input_order():
    table = pa.table({"v": list(range(8)), PART_COL: ["p", "q", "p", "p", "q", "p", "q", "p"],
                      BUCKET_COL: pa.array([0, 0, 1, 0, 0, 1, 0, 0], pa.int32())})
    groups = {key: rows.column("v").to_pylist() for key, rows in log_writer.groups(table)}
    assert groups == {("p", 0): [0, 3, 7], ("p", 1): [2, 5], ("q", 0): [1, 4, 6]}
    whole = list(log_writer.group_indices(table.slice(0, 1)))
    assert whole == [(("p", 0), None)]


def test_group_indices_by_counting_and_by_sorting_agree():
    """Few (partition, bucket) codes are grouped by counting and a 16-bit radix sort, many by np.unique and a
    64-bit sort: the same groups, in code order, rows in input order."""
    rng = np.random.default_rng(5)
    for partitions, buckets, n in ((3, 4, 5_000), (300, 256, 20_000)):   # codes below / above 2**16
        table = pa.table({PART_COL: [f"p={i:04d}" for i in rng.integers(0, partitions, n)],
                          BUCKET_COL: pa.array(rng.integers(0, buckets, n), pa.int32())})
        expected: dict[tuple[str, int], list[int]] = {}
        for i, (p, b) in enumerate(zip(table.column(PART_COL).to_pylist(), table.column(BUCKET_COL).to_pylist())):
            expected.setdefault((p, b), []).append(i)
        got = [(key, rows.tolist()) for key, rows in log_writer.group_indices(table)]
        assert dict(got) == expected
        dictionary = pc.dictionary_encode(table.column(PART_COL)).combine_chunks().dictionary.to_pylist()
        assert [key for key, _ in got] == sorted(expected, key=lambda k: (dictionary.index(k[0]), k[1]))


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


def test_commit_seqnos_are_the_joined_strings_at_every_digit_count():
    for n in (0, 1, 9, 10, 11, 999, 1000, 10_001, 125_000):
        built = job.commit_seqnos("20261129075212345_3", n)
        built.validate(full=True)
        joined = pc.binary_join_element_wise("20261129075212345_3", pc.cast(pa.array(np.arange(n)), pa.string()), "_")
        assert built.equals(joined), n
