"""A Spark DataFrame written in-process (`engine.write.in_process`: collected as Arrow, or a plain Parquet scan
read by pyarrow) makes the same table as one written by Spark tasks (routing, shuffle, mapInArrow), and
`engine.placement` picks between them."""
from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import placement
from engine.config.layout import create_table
from engine.io.naming import bucket_of_file_id, parse_log_file_name
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from engine.write import in_process
from engine.write import pipeline as write_mod
from engine.write.pipeline import WriteError, write_dataframe
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
META = ("_hoodie_record_key", "_hoodie_partition_path")


def rows(ids: list[int], seq: int) -> pa.Table:
    return pa.table({"id": [f"key-{i}-é" for i in ids], "region": [("eu", "us", "apac")[i % 3] for i in ids],
                     "seq": pa.array([seq + i % 7 for i in ids], pa.int64()),
                     "ts": pa.array([T0 + dt.timedelta(minutes=i) for i in ids], pa.timestamp("ms", tz="UTC")),
                     "v": [float(i * seq) for i in ids]})


def new_table(path: str, block_format: str) -> None:
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="ts", hive_style=True,
                 settings={"hoodie.bucket.index.num.buckets": "4", "hoodie.logfile.data.block.format": block_format})


def layout(path: str) -> dict[tuple[str, int | None], list[int]]:
    """(partition, bucket) -> the log versions of its file group (file ids are named by instant, so differ)."""
    out = {}
    for group in FileSystemView(path).file_groups():
        names = [parse_log_file_name(lf.name) for s in group.slices for lf in s.log_files]
        out[(group.partition_path, bucket_of_file_id(group.file_id))] = sorted(n.version for n in names if n)
    return out


def writes(spark, path: str, block_format: str, local: bool) -> None:
    """Insert, an upsert whose input repeats keys (pre-combined by `seq`), a delete — each from a DataFrame
    of several Spark partitions."""
    new_table(path, block_format)
    write_dataframe(path, spark.createDataFrame(rows(list(range(600)), 1)).repartition(3), local=local)
    repeated = pa.concat_tables([rows(list(range(300, 900)), 2), rows(list(range(300, 400)), 10)])
    write_dataframe(path, spark.createDataFrame(repeated).repartition(4), local=local)
    gone = spark.createDataFrame(rows(list(range(0, 900, 5)), 3).select(["id", "region", "ts"]))
    write_dataframe(path, gone, "delete", local=local)


@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_in_process_dataframe_write_makes_the_spark_tasks_table(spark, tmp_path, block_format):
    here, there = str(tmp_path / "here"), str(tmp_path / "there")
    writes(spark, here, block_format, local=True)
    writes(spark, there, block_format, local=False)
    ours, theirs = hudi_read(here), hudi_read(there)
    assert Timeline.load(here).latest_schema() == Timeline.load(there).latest_schema()
    assert ours.schema == theirs.schema
    assert rows_by_key(ours, with_meta=META) == rows_by_key(theirs, with_meta=META)
    assert ours.num_rows == 900 - 180
    assert rows_by_key(read_arrow(here), with_meta=META) == rows_by_key(ours, with_meta=META)
    by_key = {k[1]: r for k, r in rows_by_key(ours, with_meta=META).items()}
    assert by_key["key-301-é"]["seq"] == 10 + 301 % 7 and by_key["key-401-é"]["seq"] == 2 + 401 % 7
    assert layout(here) == layout(there) and len(layout(here)) == 12


def test_placement_collects_small_dataframes_and_leaves_big_ones_to_spark(spark, tmp_path, monkeypatch):
    calls: list[int] = []
    real = in_process.write_groups

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(in_process, "write_groups", counting)
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    monkeypatch.delenv(placement.MAX_DATAFRAME_MB_ENV, raising=False)
    path = str(tmp_path / "t")
    new_table(path, "avro")
    df = spark.createDataFrame(rows(list(range(50)), 1))
    write_dataframe(path, df)
    assert calls == [1]
    monkeypatch.setenv(placement.MAX_DATAFRAME_MB_ENV, "0")   # every DataFrame is "big": Spark tasks write it
    write_dataframe(path, df)
    assert calls == [1]
    write_dataframe(path, df, local=True)                      # the caller's choice wins
    assert calls == [1, 1]
    assert len(rows_by_key(hudi_read(path))) == 50


@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_bare_parquet_scan_is_read_by_pyarrow_into_the_same_table(spark, tmp_path, monkeypatch, block_format):
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(rows(list(range(400)), 1), folder / "a.parquet", row_group_size=64)
    pq.write_table(rows(list(range(300, 700)), 5), folder / "b.parquet", row_group_size=100)
    here, there = str(tmp_path / "here"), str(tmp_path / "there")
    new_table(here, block_format)
    new_table(there, block_format)
    later = tmp_path / "later.parquet"
    pq.write_table(rows(list(range(650, 800)), 9), later)

    def upserts(path, local):   # the scan, then some of a file's columns (v is left out: null in those rows)
        write_dataframe(path, spark.read.parquet(str(folder)), local=local)
        write_dataframe(path, spark.read.parquet(str(later)).select("ts", "id", "region", "seq"), local=local)

    upserts(there, False)
    with monkeypatch.context() as m:   # no Spark routing, no collection: the files are read by pyarrow
        m.setattr(write_mod, "_with_routing", lambda *_: pytest.fail("the DataFrame was collected"))
        upserts(here, True)
    assert Timeline.load(here).latest_schema() == Timeline.load(there).latest_schema()
    assert '"timestamp-micros"' in str(Timeline.load(here).latest_schema())   # Spark's type, not the files' ms
    ours, theirs = hudi_read(here), hudi_read(there)
    assert ours.schema == theirs.schema and ours.num_rows == 800
    assert rows_by_key(ours, with_meta=META) == rows_by_key(theirs, with_meta=META)
    assert layout(here) == layout(there)


def test_only_bare_exact_parquet_scans_skip_spark(spark, tmp_path):
    plain = tmp_path / "plain.parquet"
    pq.write_table(rows(list(range(10)), 1), plain)
    int96 = tmp_path / "int96.parquet"
    pq.write_table(rows(list(range(10)), 1), int96, use_deprecated_int96_timestamps=True)
    hive = tmp_path / "hive"
    pq.write_to_dataset(rows(list(range(10)), 1), str(hive), partition_cols=["region"])
    spark2 = tmp_path / "spark2.parquet"   # as Spark 2.4 wrote it: Spark 4 rebases its dates from the old calendar
    old = rows(list(range(10)), 1)
    pq.write_table(old.replace_schema_metadata({b"org.apache.spark.version": b"2.4.0"}), spark2)

    def files(df):
        return write_mod._scanned_parquet_files(df, write_mod.keys.arrow_schema_of(df))

    df = spark.read.parquet(str(plain))
    assert files(df) == (str(plain),)
    assert files(df.select("region", "id")) == (str(plain),) and files(df.drop("v")) == (str(plain),)
    assert files(df.filter("seq > 1")) is None and files(df.selectExpr("id", "region", "seq + 1 AS seq")) is None
    assert files(df.withColumnRenamed("v", "w")) is None
    assert files(spark.read.option("mergeSchema", "true").parquet(str(plain))) is None
    assert files(spark.read.parquet(str(int96))) is None          # nanoseconds: Spark truncates them to µs
    assert files(spark.read.parquet(str(hive))) is None           # partition columns come from folder names
    assert files(spark.read.parquet(str(spark2))) is None
    spark.conf.set("spark.sql.parquet.datetimeRebaseModeInRead", "LEGACY")
    try:
        assert files(spark.read.parquet(str(plain))) is None
    finally:
        spark.conf.unset("spark.sql.parquet.datetimeRebaseModeInRead")
    assert files(spark.read.parquet(str(plain))) == (str(plain),)
    assert files(spark.createDataFrame(rows([1], 1))) is None


@pytest.mark.parametrize("local", [True, False])
def test_null_or_empty_keys_fail_and_roll_back_either_way(spark, tmp_path, local):
    path = str(tmp_path / "t")
    new_table(path, "avro")
    write_dataframe(path, spark.createDataFrame(rows([1, 2], 1)), local=local)
    for bad in ("", None):
        table = rows([3, 4], 1).set_column(0, "id", pa.array(["key-3", bad], pa.string()))
        with pytest.raises(WriteError, match="null"):
            write_dataframe(path, spark.createDataFrame(table), local=local)
    assert sorted(read_arrow(path).column("id").to_pylist()) == ["key-1-é", "key-2-é"]
    timeline = Timeline.load(path)
    assert [i.action for i in timeline.completed()] == ["deltacommit", "rollback", "rollback"]   # rolled back
    assert timeline.pending() == []
    logs = [n for _, _, names in os.walk(path) for n in names if ".log." in n]
    assert len(logs) == 2   # the first write's groups only (key-1 in us, key-2 in apac)


@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_spark_tasks_write_the_in_process_log_bytes(spark, tmp_path, monkeypatch, block_format):
    """Spark's tasks route each input partition's rows without a shuffle and write every file group from the
    exchange in input order, so their logs hold the bytes the in-process writer's do (same instant; names
    differ only in the write token's stage and attempt) — repeated keys pre-combined alike."""
    monkeypatch.setattr(write_mod, "CHUNK_ROWS", 150)   # several exchange files per input partition
    monkeypatch.setattr(write_mod, "new_instant_time", lambda after=None: "20240102030405006")
    data = pa.concat_tables([rows(list(range(800)), 1), rows(list(range(100, 300)), 5)])
    logs = {}
    for name, local in (("here", True), ("there", False)):
        path = str(tmp_path / name)
        new_table(path, block_format)
        write_dataframe(path, spark.createDataFrame(data).repartition(3), local=local)
        found = {}
        for folder, _, names in os.walk(path):
            for n in names:
                if ".log." in n:
                    rel = os.path.relpath(os.path.join(folder, n), path)
                    found[rel.rsplit("_", 1)[0] + "_" + rel.rsplit("_", 1)[1].split("-")[0]] = \
                        open(os.path.join(folder, n), "rb").read()
        logs[name] = found
    assert len(logs["here"]) == 12 and logs["here"] == logs["there"]
    assert hudi_read(str(tmp_path / "there")).num_rows == 800


def test_spark_tasks_write_the_in_process_bytes_on_s3(spark, s3_env, monkeypatch):  # noqa: F811
    """On an object store too: the executors route, exchange and write through the store, and each log holds
    the bytes the in-process writer puts there (names differ only in the write token)."""
    from engine.io import storage

    monkeypatch.setattr(write_mod, "CHUNK_ROWS", 150)
    monkeypatch.setattr(write_mod, "new_instant_time", lambda after=None: "20240102030405006")
    data = pa.concat_tables([rows(list(range(500)), 1), rows(list(range(100, 200)), 5)])
    logs = {}
    for name, local in (("here", True), ("there", False)):
        path = f"{s3_env['bucket_uri']}/spark-bytes/{name}"
        new_table(path, "avro")
        write_dataframe(path, spark.createDataFrame(data).repartition(3), local=local)
        logs[name] = {e.name.rsplit("_", 1)[0]: storage.read_bytes(e.path)
                      for e in storage.list_tree(path, skip=".hoodie") if ".log." in e.name}
    assert len(logs["here"]) == 12 and logs["here"] == logs["there"]
    assert not storage.list_tree(f"{s3_env['bucket_uri']}/spark-bytes/there/.hoodie/.temp")   # exchange gone
    there = f"{s3_env['bucket_uri']}/spark-bytes/there"
    assert hudi_read(there, storage_options=s3_env["storage_options"]).num_rows == 500
