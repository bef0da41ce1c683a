"""The direct Parquet write path routes keys exactly like the DataFrame path and reads like hudi 0.5.0."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.config.layout import create_table
from engine.errors import InputError
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.write import pipeline as write_mod
from engine.write.pipeline import write_dataframe, write_file, write_parquet
from tests.support.oracle import hudi_read, rows_by_key

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def rows(ids, seq, region=lambda i: ("eu", "us", "apac")[i % 3]):
    return pa.table({"id": [f"key-{i}-é" for i in ids], "region": [region(i) for i in ids],
                     "seq": pa.array([seq] * len(ids), pa.int64()),
                     "ts": pa.array([T0 + dt.timedelta(minutes=i) for i in ids], pa.timestamp("ms", tz="UTC")),
                     "v": [float(i) for i in ids]})


def groups_of(path):
    return {(g.partition_path, g.file_id) for g in FileSystemView(path).file_groups()}


@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_parquet_path_matches_dataframe_path(spark, tmp_path, monkeypatch, block_format):
    monkeypatch.setattr(write_mod, "CHUNK_ROWS", 100)  # several routing tasks and exchange files
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="ts", hive_style=True,
                 settings={"hoodie.bucket.index.num.buckets": "4", "hoodie.logfile.data.block.format": block_format})
    first = tmp_path / "first.parquet"
    pq.write_table(rows(range(1000), 1), first, row_group_size=100)
    result = write_file(path, str(first), local=False)   # Spark's routing tasks and exchange files
    assert result.records_written == 1000
    groups = groups_of(path)
    assert len(groups) == 12  # 3 partitions x 4 buckets
    # The DataFrame path must send the same keys to the same file groups: no new group appears and
    # every key keeps one version.
    write_dataframe(path, spark.createDataFrame(rows(range(0, 1000, 2), 2)), "upsert")
    assert groups_of(path) == groups
    second = tmp_path / "second.parquet"
    pq.write_table(rows(range(500, 1500), 3), second, row_group_size=150)
    write_parquet(path, [str(second)])   # in-process (engine.placement: a small input)
    ours = rows_by_key(read_arrow(path))
    assert ours == rows_by_key(hudi_read(path))
    assert len(ours) == 1500
    seqs = {k[1]: r["seq"] for k, r in ours.items()}
    assert seqs["key-0-é"] == 2 and seqs["key-1-é"] == 1 and seqs["key-600-é"] == 3


def test_parquet_path_deletes_and_falls_back_for_other_key_types(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts")
    src = tmp_path / "in.parquet"
    pq.write_table(rows(range(20), 1), src)
    write_file(path, str(src))
    dels = tmp_path / "del.parquet"
    pq.write_table(rows(range(5), 1).select(["id"]), dels)
    write_file(path, str(dels), "delete")
    assert sorted(rows_by_key(read_arrow(path))) == sorted(rows_by_key(hudi_read(path))) and \
        len(read_arrow(path)) == 15
    # A double-typed key renders differently in Spark and pyarrow, so it goes through Spark.
    other = str(tmp_path / "o")
    create_table(other, name="o", record_keys=["v"], ordering_field="seq", event_time_field="ts")
    write_file(other, str(src))
    assert rows_by_key(read_arrow(other)) == rows_by_key(hudi_read(other))


def test_parquet_inputs_must_agree(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts")
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(rows(range(3), 1), a)
    pq.write_table(rows(range(3), 1).drop_columns(["v"]), b)
    with pytest.raises(InputError, match="disagree on their schema"):
        write_parquet(path, [str(a), str(b)])


def test_an_in_process_write_allocates_from_jemalloc_and_gives_the_pool_back(tmp_path, monkeypatch):
    """engine.io.arrow_pool.in_process_pool: the write's reading, routing and log writing run on jemalloc."""
    from engine.write import in_process

    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="ts", hive_style=True, settings={"hoodie.bucket.index.num.buckets": "2"})
    source = tmp_path / "in.parquet"
    pq.write_table(rows(range(300), 1), source)
    seen = []
    real = in_process.write_groups

    def write_groups(job, groups, on_progress=None):
        seen.append(pa.default_memory_pool().backend_name)
        return real(job, groups, on_progress)

    monkeypatch.setattr(in_process, "write_groups", write_groups)
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        assert write_parquet(path, [str(source)], local=True).records_written == 300
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)
    assert seen == ["jemalloc"]
    assert rows_by_key(read_arrow(path)) == rows_by_key(hudi_read(path))
