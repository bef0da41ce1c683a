"""Catalog sync against a real Hive metastore (pyspark's jars) and moto's Glue, both started by the tests.

One table syncs to both catalogs (Hudi's comma-separated sync tools) through create, writes (new partitions,
a new column), two event-time compactions, the rollback of the second, and a clean; the catalog is read back
after each step. Then: a catalog that is down never fails the compaction, and the next operation syncs.
"""
from __future__ import annotations

import datetime as dt
import json
import warnings
from pathlib import Path

import boto3
import pytest

from engine import Table
from engine.catalog import hms, last_sync
from engine.catalog import sync as catalog_sync
from engine.catalog.sync import CatalogSyncWarning
from engine.cli import main
from engine.results import iso
from engine.timeline.instants import Timeline
from tasks.metastore import free_port

RO_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
RT_FORMAT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]
TOOLS = "org.apache.hudi.hive.HiveSyncTool,org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"
DB = "lake"


def batch(tmp: Path, i: int, day: str, extra: str = "") -> str:
    src = tmp / f"batch{i}.jsonl"
    src.write_text("".join(f'{{"id":"k{k}","seq":{i},"day":"{day}","ts":"2024-01-{day}T0{k}:00:00Z"{extra}}}\n'
                           for k in range(3)))
    return str(src)


def hms_state(uri: str, name: str) -> dict:
    table = hms.read_table(uri, DB, name)
    assert table is not None, f"{DB}.{name} is not in the metastore"
    return {"type": table.tableType, "params": dict(table.parameters), "input": table.sd.inputFormat,
            "output": table.sd.outputFormat, "serde": table.sd.serdeInfo.serializationLib,
            "serde_params": dict(table.sd.serdeInfo.parameters), "location": table.sd.location,
            "cols": [(c.name, c.type) for c in table.sd.cols],
            "keys": [(c.name, c.type) for c in table.partitionKeys],
            "partitions": sorted((tuple(p.values), p.sd.location, tuple(c.name for c in p.sd.cols))
                                 for p in hms.read_partitions(uri, DB, name))}


def glue_state(endpoint: str, name: str) -> dict:
    glue = boto3.client("glue", region_name="us-east-1", endpoint_url=endpoint)
    table = glue.get_table(DatabaseName=DB, Name=name)["Table"]
    sd = table["StorageDescriptor"]
    parts = glue.get_partitions(DatabaseName=DB, TableName=name)["Partitions"]
    return {"type": table["TableType"], "params": dict(table["Parameters"]), "input": sd["InputFormat"],
            "output": sd["OutputFormat"], "serde": sd["SerdeInfo"]["SerializationLibrary"],
            "serde_params": dict(sd["SerdeInfo"]["Parameters"]), "location": sd["Location"],
            "cols": [(c["Name"], c["Type"]) for c in sd["Columns"]],
            "keys": [(c["Name"], c["Type"]) for c in table["PartitionKeys"]],
            "partitions": sorted((tuple(p["Values"]), p["StorageDescriptor"]["Location"],
                                  tuple(c["Name"] for c in p["StorageDescriptor"]["Columns"])) for p in parts)}


@pytest.fixture(scope="module", params=[6, 9], ids=["v6", "v9"])
def flow(request, tmp_path_factory, hive_metastore, glue_endpoint, spark):
    """The table's life, with both catalogs read back after every step; on table version 6 and 9 (whose
    hoodie.properties states its ordering fields and merge mode: the catalogs must look the same)."""
    tmp = tmp_path_factory.mktemp("catalog")
    path = tmp / "flights"
    steps: dict[str, dict] = {}

    def snap(step: str, result=None) -> None:
        steps[step] = {"result": result,
                       "hms": {n: hms_state(hive_metastore, n) for n in ("flights_ro", "flights_rt")},
                       "glue": {n: glue_state(glue_endpoint, n) for n in ("flights_ro", "flights_rt")}}

    table = Table.create(str(path), name="flights", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         partition_fields=["day"], hive_style=True, table_version=request.param, settings={
                             "hoodie.bucket.index.num.buckets": "1",
                             "hoodie.datasource.hive_sync.enable": "true",
                             "hoodie.datasource.hive_sync.metastore.uris": hive_metastore,
                             "hoodie.datasource.hive_sync.database": DB,
                             "hoodie.meta.sync.client.tool.class": TOOLS,
                             "hoodie.aws.glue.region": "us-east-1",
                             "hoodie.aws.glue.endpoint": glue_endpoint})
    steps["create"] = {"result": table.catalog_sync}
    writes = [table.write(batch(tmp, i, day)) for i, day in enumerate(("01", "02", "03"))]
    snap("writes", writes)
    same = table.write(batch(tmp, 3, "03"))   # no new partition, no new column: nothing for the catalog
    steps["same"] = {"result": same}
    evolved = table.write(batch(tmp, 4, "03", ', "gate": "A1"'))
    snap("evolved", evolved)
    c1 = table.run_compaction(table.schedule_compaction(threshold="2024-01-01T12:00:00Z").instant)
    snap("c1", c1)
    c2 = table.run_compaction(table.schedule_compaction(threshold="2024-01-02T12:00:00Z").instant)
    snap("c2", c2)
    rolled = table.rollback(c2.instant)
    snap("rolled_back", rolled)
    cleaned = table.clean(retain_commits=1)
    snap("cleaned", cleaned)
    yield {"path": str(path), "steps": steps, "uri": hive_metastore, "glue": glue_endpoint}
    _drop_catalog_tables(hive_metastore, glue_endpoint)   # the next version's table takes the same names


def _drop_catalog_tables(uri: str, endpoint: str) -> None:
    glue = boto3.client("glue", region_name="us-east-1", endpoint_url=endpoint)
    with hms.connect(uri) as client:
        for name in ("flights_ro", "flights_rt"):
            client.drop_table(DB, name, True)
            glue.delete_table(DatabaseName=DB, Name=name)


@pytest.mark.parametrize("catalog", ["hms", "glue"])
def test_ro_and_rt_have_hive_sync_tools_shape(flow, catalog):
    path, steps = flow["path"], flow["steps"]
    location = "file:" + path
    state = steps["writes"][catalog]
    for name, input_format, as_ro in (("flights_ro", RO_FORMAT, "true"), ("flights_rt", RT_FORMAT, "false")):
        t = state[name]
        assert t["type"] == "EXTERNAL_TABLE" and t["params"]["EXTERNAL"] == "TRUE"
        assert (t["input"], t["output"], t["serde"]) == (input_format, OUTPUT_FORMAT, SERDE)
        assert t["serde_params"] == {"path": location, "hoodie.query.as.ro.table": as_ro, "serialization.format": "1"}
        assert t["location"].replace("file:///", "file:/") == location
        # Hudi's meta columns first, the data columns, the partition field as a partition key only
        assert t["cols"] == [(m, "string") for m in META] + [("id", "string"), ("seq", "bigint"), ("ts", "timestamp")]
        assert t["keys"] == [("day", "string")]
        assert [(p[0], p[1].replace("file:///", "file:/")) for p in t["partitions"]] == [
            (("01",), f"{location}/day=01"), (("02",), f"{location}/day=02"), (("03",), f"{location}/day=03")]
        params = t["params"]
        assert params["spark.sql.sources.provider"] == "hudi"
        assert params["spark.sql.sources.schema.numParts"] == "1"
        assert params["spark.sql.sources.schema.numPartCols"] == "1"
        assert params["spark.sql.sources.schema.partCol.0"] == "day"
        spark_schema = json.loads(params["spark.sql.sources.schema.part.0"])
        assert [(f["name"], f["type"]) for f in spark_schema["fields"]] == \
            [(m, "string") for m in META] + [("id", "string"), ("seq", "long"), ("ts", "timestamp"), ("day", "string")]
        assert params["last_commit_time_sync"] == steps["writes"]["result"][-1].instant
        assert "tidemark.ro.completion.time" not in params   # no compaction yet


def test_every_step_reports_its_sync_and_writes_sync_only_what_the_catalog_shows(flow):
    steps = flow["steps"]
    created = steps["create"]["result"]
    assert [(s.target, s.ok, s.skipped) for s in created] == [
        ("hive_metastore", True, "the table has no schema until its first write"),
        ("glue", True, "the table has no schema until its first write")]
    for w in steps["writes"]["result"]:   # each write added a partition
        assert [(s.target, s.ok, s.reason, s.error) for s in w.catalog_sync] == [
            ("hive_metastore", True, "write", None), ("glue", True, "write", None)]
    assert steps["same"]["result"].catalog_sync is None
    for step in ("evolved", "c1", "c2", "rolled_back", "cleaned"):
        result = steps[step]["result"]
        assert result.catalog_sync and all(s.ok and s.attempts == 1 for s in result.catalog_sync), step
    assert steps["cleaned"]["result"].catalog_sync[0].reason == "clean"
    state = last_sync(flow["path"])
    assert state["ok"] and [t["target"] for t in state["targets"]] == ["hive_metastore", "glue"]


@pytest.mark.parametrize("catalog", ["hms", "glue"])
def test_a_new_column_reaches_both_tables_and_their_partitions(flow, catalog):
    for name in ("flights_ro", "flights_rt"):
        t = flow["steps"]["evolved"][catalog][name]
        assert t["cols"][-1] == ("gate", "string")
        assert t["params"]["last_commit_time_sync"] == flow["steps"]["evolved"]["result"].instant
        if catalog == "hms":   # CASCADE: the metastore's partitions keep column lists of their own
            assert all(p[2][-1] == "gate" for p in t["partitions"])


@pytest.mark.parametrize("catalog", ["hms", "glue"])
def test_ro_completion_time_moves_after_a_compaction_and_back_after_its_rollback(flow, catalog):
    steps = flow["steps"]
    c1, c2 = steps["c1"]["result"], steps["c2"]["result"]
    assert c1.ro_completion_time < c2.ro_completion_time

    def ro(step: str) -> tuple[str | None, str | None]:
        params = steps[step][catalog]["flights_ro"]["params"]
        return params.get("tidemark.ro.completion.time"), params.get("tidemark.ro.completion.instant")

    assert ro("evolved") == (None, None)
    assert ro("c1") == (iso(c1.ro_completion_time), c1.instant)
    assert ro("c2") == (iso(c2.ro_completion_time), c2.instant)
    assert ro("rolled_back") == (iso(c1.ro_completion_time), c1.instant)
    assert ro("cleaned") == ro("rolled_back")
    assert steps["c2"][catalog]["flights_ro"]["params"]["last_commit_time_sync"] == c2.instant
    assert steps["rolled_back"][catalog]["flights_ro"]["params"]["last_commit_time_sync"] == c1.instant
    for step in ("c1", "c2", "rolled_back"):   # the guarantee is about base files: _ro only
        assert not any(k.startswith("tidemark.") for k in steps[step][catalog]["flights_rt"]["params"])
    assert ro("c1")[0].endswith("Z")


def test_cli_sync_reports_each_catalog_and_fails_in_one_line_when_one_is_down(flow, capsys, monkeypatch):
    glue = boto3.client("glue", region_name="us-east-1", endpoint_url=flow["glue"])
    versions = len(glue.get_table_versions(DatabaseName=DB, TableName="flights_ro")["TableVersions"])
    assert main(["sync", flow["path"], "--json"]) == 0
    # nothing changed since the clean's sync: no update (each one would be a new Glue table version)
    assert len(glue.get_table_versions(DatabaseName=DB, TableName="flights_ro")["TableVersions"]) == versions
    out = json.loads(capsys.readouterr().out)
    assert [(x["target"], x["ok"], x["partitions"]) for x in out] == [("hive_metastore", True, 3), ("glue", True, 3)]
    assert out[0]["ro_completion_time"].endswith("Z") and out[0]["last_commit_time_sync"]

    monkeypatch.setattr(catalog_sync, "BACKOFF_S", 0.0)
    dead = f"thrift://127.0.0.1:{free_port()}"
    assert main(["sync", flow["path"], "--metastore", dead]) == 1
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line]
    assert len(errors) == 1 and errors[0].startswith(f"tidemark: error: catalog sync to {dead} failed after 3 attempt(s)")
    assert "synced lake.{flights_ro,flights_rt} in glue:us-east-1" in captured.out
    assert main(["sync", flow["path"], "--metastore", "http://nowhere"]) == 1
    assert "malformed metastore URI 'http://nowhere'" in capsys.readouterr().err


def test_a_catalog_that_is_down_never_fails_the_compaction_and_the_next_operation_syncs(
        tmp_path, hive_metastore, spark, monkeypatch):
    monkeypatch.setattr(catalog_sync, "BACKOFF_S", 0.0)
    dead = f"thrift://127.0.0.1:{free_port()}"
    monkeypatch.setenv("TIDEMARK_HIVE_METASTORE_URIS", dead)   # the table names no metastore of its own
    table = Table.create(str(tmp_path / "down"), name="down", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts", partition_fields=["day"], settings={
                             "hoodie.bucket.index.num.buckets": "1", "hoodie.datasource.hive_sync.enable": "true",
                             "hoodie.datasource.hive_sync.database": DB})
    with pytest.warns(CatalogSyncWarning):
        first = table.write(batch(tmp_path, 0, "01"))
    assert not first.catalog_sync[0].ok
    plan = table.schedule_compaction(threshold="2024-01-01T12:00:00Z")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = table.run_compaction(plan.instant)
    [failed] = done.catalog_sync
    assert (failed.ok, failed.attempts, failed.reason) == (False, 3, "compaction")
    assert dead in failed.error and "unreachable" in failed.error
    assert [str(w.message) for w in caught if issubclass(w.category, CatalogSyncWarning)] == [
        f"catalog sync to {dead} after compaction failed ({failed.error}); the compaction is committed, the next "
        f"operation or `tidemark sync {table.path}` retries"]
    # committed all the same, and the failure is recorded for callers to show
    assert Timeline.load(table.path).is_completed(plan.instant)
    assert done.ro_completion_time is not None
    state = last_sync(table.path)
    assert state["ok"] is False and dead in state["error"] and state["last_ok_at"] is None
    assert hms.read_table(hive_metastore, DB, "down_ro") is None

    # the metastore is back: the next write syncs although it adds nothing the catalog shows
    monkeypatch.setenv("TIDEMARK_HIVE_METASTORE_URIS", hive_metastore)
    again = table.write(batch(tmp_path, 1, "01"))
    assert [(s.ok, s.catalog) for s in again.catalog_sync] == [(True, hive_metastore)]
    params = hms.read_table(hive_metastore, DB, "down_ro").parameters
    # that write was late (event times on 2024-01-01, at or before the completion time): the catalog publishes
    # the guarantee as it stands, up to just before the earliest late event
    assert done.ro_completion_time > dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert (params["tidemark.ro.completion.time"], params["tidemark.ro.guarantee"]) == (
        "2023-12-31T23:59:59.999Z", "broken")
    assert params["tidemark.ro.completion.instant"] == plan.instant
    assert last_sync(table.path)["ok"] is True
