"""Reading Java-written Merge-On-Read tables whose base files are Lance (Hudi 1.1, table version 9): every query
returns what hudi 0.5.0 returns, in-process, through Spark and from S3."""
from __future__ import annotations

import os

import pytest

from engine.datasource import load_table
from engine.io import storage
from engine.read.query import QuerySpec, read_arrow
from engine.timeline.instants import Timeline
from tests.support.fixtures import unzip_fixture
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)

LANCE_TABLES = ["v9_trips_lance", "v9_lance_nonhivestyle"]


@pytest.fixture(params=LANCE_TABLES)
def lance_table(request, tmp_path) -> str:
    return str(unzip_fixture(request.param, tmp_path / request.param))


def test_the_fixtures_base_files_are_lance(lance_table):
    names = [n for _, _, files in os.walk(lance_table) for n in files if not n.startswith(".")]
    assert any(n.endswith(".lance") for n in names) and not any(n.endswith(".parquet") for n in names)


@pytest.mark.parametrize("query", ["snapshot", "read_optimized"])
def test_snapshot_and_read_optimized_equal_hudi(lance_table, query):
    theirs = rows_by_key(hudi_read(lance_table, query))
    assert theirs and rows_by_key(read_arrow(lance_table, query)) == theirs


def test_time_travel_and_incremental_at_every_completed_instant_equal_hudi(lance_table):
    completed = [i.timestamp for i in Timeline.load(lance_table).completed()]
    assert len(completed) >= 6
    begin = "0"
    for ts in completed:
        assert rows_by_key(read_arrow(lance_table, QuerySpec("time_travel", as_of=ts))) == \
            rows_by_key(hudi_read(lance_table, "time_travel", as_of=ts)), ts
        assert rows_by_key(read_arrow(lance_table, QuerySpec("incremental", begin=begin, end=ts))) == \
            rows_by_key(hudi_read(lance_table, "incremental", begin=begin, end=ts)), (begin, ts)
        begin = ts


@pytest.mark.parametrize("query", ["snapshot", "read_optimized"])
def test_spark_reads_lance_bases_through_the_data_source(spark, lance_table, query):
    """Spark has no Lance reader here: slices whose rows are their base's (RO, log-less snapshot slices) go
    through the tidemark data source instead of spark.read.parquet."""
    df = load_table(spark, lance_table, query)
    assert rows_by_key(df.toArrow()) == rows_by_key(hudi_read(lance_table, query))


def test_a_lance_table_on_s3_reads_as_the_local_one(s3_env, lance_table):  # noqa: F811
    remote = f"{s3_env['bucket_uri']}/{os.path.basename(lance_table)}"
    for folder, _, files in os.walk(lance_table):
        for name in files:
            local = os.path.join(folder, name)
            storage.upload(local, f"{remote}/{os.path.relpath(local, lance_table)}")
    for query in ("snapshot", "read_optimized"):
        assert rows_by_key(read_arrow(remote, query)) == rows_by_key(read_arrow(lance_table, query))
