"""Catalog sync of a table on S3: partitions are found through the storage layer (one listing of the bucket
prefix on the S3 server, never the local disk) and registered with their s3:// locations.

The table lives on an S3-compatible server (moto, started by the tests); the catalog is the Glue of that same
server (moto serves both), as Hudi's AwsGlueCatalogSyncTool would fill it.
"""
from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from engine import Table
from engine.catalog import last_sync
from engine.results import iso
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)
from tests.support.tables import day_file

DB = "lake_s3"
RO_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"


def _glue(endpoint: str):
    return boto3.client("glue", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


@pytest.fixture
def synced(s3_env, tmp_path, spark):  # noqa: F811
    server = s3_env["server"]
    uri = f"{s3_env['bucket_uri']}/flights"
    # a table of its own per test: the catalog refuses to hand one table's name over to another table
    database = f"{DB}_{s3_env['bucket_uri'].rsplit('-', 1)[-1]}"
    table = Table.create(uri, name="flights", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         partition_fields=["day"], hive_style=True, settings={
                             "hoodie.bucket.index.num.buckets": "1",
                             "hoodie.datasource.hive_sync.enable": "true",
                             "hoodie.datasource.hive_sync.database": database,
                             "hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
                             "hoodie.aws.glue.region": "us-east-1",
                             "hoodie.aws.glue.endpoint": server.endpoint})
    for i, day in enumerate(("01", "02")):
        table.write(day_file(tmp_path, i, day, extra={"day": day}))
    return {"table": table, "uri": uri, "server": server, "db": database}


def test_an_s3_tables_partitions_reach_the_catalog_with_their_s3_locations(synced, tmp_path):
    table, uri, server = synced["table"], synced["uri"], synced["server"]
    server.reset_counts()
    written = table.write(day_file(tmp_path, 2, "03", extra={"day": "03"}))   # a new partition: the write syncs it
    requests = server.counts()
    bucket, prefix = uri[len("s3://"):].split("/", 1)
    # the partitions were listed on the store (one recursive LIST of the table's prefix), not on local disk
    assert any(r["method"] == "GET" and "list-type=2" in r["query"] and f"prefix={prefix}%2F" in r["query"]
               and "delimiter" not in r["query"] for r in requests), requests
    assert not Path(uri).exists() and not Path("s3:").exists()
    assert written.catalog_sync and all(s.ok for s in written.catalog_sync), written.catalog_sync
    glue = _glue(server.endpoint)
    for name in ("flights_ro", "flights_rt"):
        found = glue.get_table(DatabaseName=synced["db"], Name=name)["Table"]
        assert found["StorageDescriptor"]["Location"] == uri
        parts = glue.get_partitions(DatabaseName=synced["db"], TableName=name)["Partitions"]
        assert sorted((p["Values"][0], p["StorageDescriptor"]["Location"]) for p in parts) == [
            (day, f"{uri}/day={day}") for day in ("01", "02", "03")]
    assert glue.get_table(DatabaseName=synced["db"], Name="flights_ro")["Table"]["StorageDescriptor"]["InputFormat"] == RO_FORMAT
    state = last_sync(uri)
    assert state is not None and state["ok"]


def test_a_compaction_on_s3_publishes_its_completion_time_to_the_catalog(synced):
    table, server = synced["table"], synced["server"]
    plan = table.schedule_compaction(threshold="2024-01-01T12:00:00Z", carry_over="copy")
    result = table.run_compaction(plan.instant)
    params = _glue(server.endpoint).get_table(DatabaseName=synced["db"], Name="flights_ro")["Table"]["Parameters"]
    assert params["tidemark.ro.completion.instant"] == result.instant
    # all of day 01 is in base files now: complete up to just before day 02's first record
    assert params["tidemark.ro.completion.time"] == iso(result.ro_completion_time) == "2024-01-01T23:59:59.999Z"
