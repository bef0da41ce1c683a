"""What `<name>_ro` / `<name>_rt` look like, from the table alone (no catalog): HiveSyncTool's type mapping,
Spark's schema properties, partition values and locations, and the settings that pick the catalogs."""
from __future__ import annotations

import json

import pytest

from engine.catalog.shape import (
    RoGuarantee,
    SyncNames,
    catalog_shape,
    hive_type,
    partition_values,
    spark_type,
    table_location,
)
from engine.catalog.sync import GLUE, HIVE, resolve_targets
from engine.config.properties import TableConfig, validate_settings
from engine.errors import ConfigError
from engine.timeline.instants import Timeline

DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
TS = {"type": "long", "logicalType": "timestamp-micros"}
NESTED = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"},
                                                    {"name": "b", "type": ["null", {"type": "array", "items": "string"}]}]}


@pytest.mark.parametrize("avro, hive, spark", [
    ("string", "string", "string"), ("int", "int", "integer"), ("long", "bigint", "long"),
    ("double", "double", "double"), ("float", "float", "float"), ("boolean", "boolean", "boolean"),
    ("bytes", "binary", "binary"), (DECIMAL, "decimal(10,2)", "decimal(10,2)"),
    ({"type": "int", "logicalType": "date"}, "date", "date"), (TS, "timestamp", "timestamp"),
    (["null", "long"], "bigint", "long"), ({"type": "map", "values": "long"}, "map<string,bigint>", None),
    (NESTED, "struct<a:int,b:array<string>>", None)])
def test_types_as_hive_sync_tool_derives_them(avro, hive, spark):
    assert hive_type(avro, True) == hive
    if spark is not None:
        assert spark_type(avro, True) == spark


def test_timestamps_are_bigint_when_support_timestamp_is_off():
    # hoodie.datasource.hive_sync.support_timestamp=false: Hudi's non-Spark default, INT64 stays bigint in Hive;
    # Spark's schema comes from the Parquet types (Parquet2SparkSchemaUtils), where it is a timestamp either way
    assert hive_type(TS, False) == "bigint" and spark_type(TS, False) == "timestamp"


def test_struct_field_names_are_lower_case_as_hive_sync_writes_them():
    struct = {"type": "record", "name": "s", "fields": [{"name": "Bx", "type": "string"}, {"name": "a", "type": "int"}]}
    assert hive_type(struct, True) == "struct<bx:string,a:int>"


def test_partition_values_follow_multi_part_keys_value_extractor():
    assert partition_values("year=2013/month=1") == ["2013", "1"]
    assert partition_values("2013/01") == ["2013", "01"]
    assert partition_values("__HIVE_DEFAULT_PARTITION__") == ["__HIVE_DEFAULT_PARTITION__"]


def test_locations_are_uris():
    assert table_location("/data/t") == "file:/data/t"
    assert table_location("s3://lake/t/") == "s3://lake/t"


def _config(tmp_path, settings=None, partitions="region,day") -> TableConfig:
    props = {"hoodie.table.name": "trips", "hoodie.table.partition.fields": partitions,
             **validate_settings(settings or {})}
    return TableConfig(base_path=str(tmp_path), props=props)


def test_shape_of_both_tables(tmp_path):
    schema = {"type": "record", "name": "trips_record", "fields": [
        {"name": "id", "type": "string"}, {"name": "region", "type": ["null", "string"]},
        {"name": "fare", "type": DECIMAL}, {"name": "day", "type": {"type": "int", "logicalType": "date"}}]}
    shape = catalog_shape(_config(tmp_path), Timeline(str(tmp_path)), ["", "region=eu/day=2024-01-01"],
                          SyncNames("lake", "trips"), avro_schema=schema,
                          ro_guarantee=RoGuarantee("2024-01-01T12:00:00.000Z", "20240101130000000", "holds"), spark_version="4.3.0")
    ro, rt = shape.ro, shape.rt
    assert (ro.name, rt.name) == ("trips_ro", "trips_rt")
    assert [c.name for c in ro.columns][:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                                "_hoodie_partition_path", "_hoodie_file_name"]
    assert [(c.name, c.type) for c in ro.columns][5:] == [("id", "string"), ("fare", "decimal(10,2)")]
    # partition keys take the column's type when the data has it (HiveSchemaUtil.getPartitionKeyType)
    assert [(c.name, c.type) for c in ro.partition_keys] == [("region", "string"), ("day", "date")]
    assert [(p.values, p.location) for p in shape.partitions] == [
        (["eu", "2024-01-01"], f"file:{tmp_path}/region=eu/day=2024-01-01")]
    assert ro.parameters["tidemark.ro.completion.time"] == "2024-01-01T12:00:00.000Z"
    assert ro.parameters["tidemark.ro.completion.instant"] == "20240101130000000"
    assert not any(k.startswith("tidemark.") for k in rt.parameters)
    assert "last_commit_time_sync" not in ro.parameters   # no completed commit on this timeline
    fields = json.loads(ro.parameters["spark.sql.sources.schema.part.0"])["fields"]
    assert [f["name"] for f in fields][-3:] == ["fare", "region", "day"]   # partition columns last
    assert ro.parameters["spark.sql.sources.schema.partCol.1"] == "day"
    assert ro.parameters["spark.sql.create.version"] == "4.3.0"
    assert (ro.serde_parameters["hoodie.query.as.ro.table"], rt.serde_parameters["hoodie.query.as.ro.table"]) == \
        ("true", "false")


def test_a_long_schema_is_split_in_parts_of_4000_characters(tmp_path):
    fields = [{"name": f"column_with_a_long_name_{i:04d}", "type": "string"} for i in range(200)]
    shape = catalog_shape(_config(tmp_path, partitions=""), Timeline(str(tmp_path)), [""], SyncNames("d", "t"),
                          avro_schema={"type": "record", "name": "x", "fields": fields}, ro_guarantee=None)
    params = shape.rt.parameters
    parts = int(params["spark.sql.sources.schema.numParts"])
    assert parts > 1 and all(len(params[f"spark.sql.sources.schema.part.{i}"]) == 4000 for i in range(parts - 1))
    text = "".join(params[f"spark.sql.sources.schema.part.{i}"] for i in range(parts))
    assert len(json.loads(text)["fields"]) == 205
    assert "spark.sql.sources.schema.numPartCols" not in params and shape.partitions == []


def test_targets_from_hudis_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("TIDEMARK_HIVE_METASTORE_URIS", raising=False)
    with pytest.raises(ConfigError, match="no metastore URI"):
        resolve_targets(_config(tmp_path))
    monkeypatch.setenv("TIDEMARK_HIVE_METASTORE_URIS", "thrift://env:9083")
    [env] = resolve_targets(_config(tmp_path))
    assert (env.kind, env.catalog, env.names.ro) == (HIVE, "thrift://env:9083", "trips_ro")
    cfg = _config(tmp_path, {"hoodie.datasource.hive_sync.metastore.uris": "thrift://table:9083",
                             "hoodie.datasource.hive_sync.table": "t2", "hoodie.datasource.hive_sync.database": "db"})
    [table] = resolve_targets(cfg)
    assert (table.catalog, table.names.database, table.names.rt) == ("thrift://table:9083", "db", "t2_rt")
    assert resolve_targets(cfg, "thrift://flag:1")[0].catalog == "thrift://flag:1"
    glue = _config(tmp_path, {"hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
                              "hoodie.aws.glue.region": "eu-west-1"})
    assert [(t.kind, t.catalog) for t in resolve_targets(glue)] == [(GLUE, "glue:eu-west-1")]
    with pytest.raises(ConfigError, match="malformed value"):
        validate_settings({"hoodie.meta.sync.client.tool.class": "com.example.Tool"})
    with pytest.raises(ConfigError, match="expected thrift://host:port"):
        resolve_targets(cfg, "http://x:1")


def test_a_version_8_table_publishes_its_last_commits_completion_time(tmp_path):
    from engine.timeline.instants import Instant, State

    done = Instant("20240101120000000", "deltacommit", State.COMPLETED, "20240101120001500")
    schema = {"type": "record", "name": "r", "fields": [{"name": "id", "type": "string"}]}
    shape = catalog_shape(_config(tmp_path, partitions=""), Timeline(str(tmp_path), [done], 2), [""],
                          SyncNames("d", "t"), avro_schema=schema, ro_guarantee=None)
    assert shape.ro.parameters["last_commit_time_sync"] == "20240101120000000"
    assert shape.ro.parameters["last_commit_completion_time_sync"] == "20240101120001500"   # Hudi 1.x's
    shape = catalog_shape(_config(tmp_path, partitions=""), Timeline(str(tmp_path), [done], 2), [""],
                          SyncNames("d", "t"), avro_schema=schema, ro_guarantee=None, glue=True)
    assert shape.rt.parameters["hudi.metadata-listing-enabled"] == "false"
