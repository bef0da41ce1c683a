"""Avro instant files: round trips, Java-schema compatibility of the RFC extension, the real v8 plan."""

from __future__ import annotations

import io
import zipfile

import fastavro
import pytest

from engine.timeline import avro_models as am
from tests.support.fixtures import fixture_zip

PLAN_MEMBER = "v8_trips_8i3u1d/.hoodie/timeline/20251220210129235.compaction.requested"
MDT_PLAN_MEMBER = "v8_trips_8i3u1d/.hoodie/metadata/.hoodie/timeline/20251220210130942.compaction.requested"


def _member(name: str) -> bytes:
    with zipfile.ZipFile(fixture_zip("v8_trips_8i3u1d")) as zf:
        return zf.read(name)


def _plan() -> dict:
    op = am.compaction_operation(
        base_instant="20250101000000000",
        file_id="d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0",
        partition_path="city=sf",
        delta_file_names=[".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250101000000000.log.1_0-1-1"],
        data_file_name="d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-1-1_20250101000000000.parquet",
        metrics={"TOTAL_LOG_FILES": 1.0, "TOTAL_IO_MB": 0.5},
        symlink_operations=[
            (
                ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250102000000000.log.1_0-1-1",
                ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250101000000000.log.2_0-1-1",
            )
        ],
    )
    return {"operations": [op], "extraMetadata": {"tidemark.event.time.threshold": "1700000000000"}}


def test_v8_fixture_plan_reads() -> None:
    plan = am.read_compaction_plan(_member(PLAN_MEMBER))
    assert plan["version"] == 2
    assert plan["preserveHoodieMetadata"] is False
    ops = {op["fileId"]: op for op in plan["operations"]}
    chennai = ops["6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0"]
    assert chennai["baseInstantTime"] == "20251220210108078"
    assert chennai["partitionPath"] == "city=chennai"
    assert chennai["deltaFilePaths"] == [
        ".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_20251220210127080.log.1_0-1072-3078",
        ".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_20251220210128625.log.1_0-1097-3150",
    ]
    assert chennai["metrics"]["TOTAL_LOG_FILES"] == 2.0
    assert chennai["symlinkOperations"] is None  # absent in Java's plan, filled from our default
    assert len(ops) == 3
    assert am.read_compaction_plan(_member(MDT_PLAN_MEMBER))["operations"]


def test_java_schema_matches_fixture_byte_for_byte() -> None:
    # Our copy of Java's 1.x schema serialises to exactly the text Java embedded in the fixture.
    schema = am.avro_writer_schema(_member(PLAN_MEMBER))
    assert schema["name"] == "org.apache.hudi.avro.model.HoodieCompactionPlan"
    import json

    assert json.dumps(am.JAVA_COMPACTION_PLAN_SCHEMA, separators=(",", ":")).encode() in _member(PLAN_MEMBER)


def test_container_layout_like_java() -> None:
    data = am.write_compaction_plan(_plan())
    assert data.startswith(b"Obj\x01\x02\x16avro.schema")  # one metadata entry, like the fixture
    reader = fastavro.reader(io.BytesIO(data))
    assert set(reader.metadata) == {"avro.schema"}
    assert reader.codec == "null"
    assert len(list(reader)) == 1


def test_compaction_plan_round_trip() -> None:
    plan = _plan()
    back = am.read_compaction_plan(am.write_compaction_plan(plan))
    assert back["version"] == 2
    assert back["extraMetadata"] == plan["extraMetadata"]
    op = back["operations"][0]
    assert op == plan["operations"][0]
    assert op["symlinkOperations"][0]["target"].endswith(".log.2_0-1-1")


def test_fixture_plan_rewrite_is_lossless() -> None:
    plan = am.read_compaction_plan(_member(PLAN_MEMBER))
    assert am.read_compaction_plan(am.write_compaction_plan(plan)) == plan


def test_java_reader_schema_resolves_symlink_plan() -> None:
    # Java deserialises with its generated class as reader schema: our extra field must be skipped.
    data = am.write_compaction_plan(_plan())
    records = list(fastavro.reader(io.BytesIO(data), reader_schema=am.JAVA_COMPACTION_PLAN_SCHEMA))
    op = records[0]["operations"][0]
    assert "symlinkOperations" not in op
    assert op["fileId"] == "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    assert op["deltaFilePaths"] == _plan()["operations"][0]["deltaFilePaths"]
    assert records[0]["version"] == 2


def test_old_java_reader_schema_resolves() -> None:
    # A 0.x reader without strategy/preserveHoodieMetadata/missingSchedulePartitions also resolves.
    old = {
        "type": "record",
        "name": "HoodieCompactionPlan",
        "namespace": am.NAMESPACE,
        "fields": [
            f for f in am.JAVA_COMPACTION_PLAN_SCHEMA["fields"]
            if f["name"] in ("operations", "extraMetadata", "version")
        ],
    }
    rec = next(fastavro.reader(io.BytesIO(am.write_compaction_plan(_plan())), reader_schema=old))
    assert set(rec) == {"operations", "extraMetadata", "version"}


def test_minimal_plan_gets_defaults() -> None:
    back = am.read_compaction_plan(am.write_compaction_plan({"operations": []}))
    assert back == {
        "operations": [],
        "extraMetadata": None,
        "version": 2,
        "strategy": None,
        "preserveHoodieMetadata": False,
        "missingSchedulePartitions": None,
    }


def test_rollback_plan_round_trip() -> None:
    plan = {
        "instantToRollback": {"commitTime": "20250101000000000", "action": "compaction"},
        "RollbackRequests": [
            {
                "partitionPath": "city=sf",
                "fileId": "abc-0",
                "latestBaseInstant": "20241231000000000",
                "filesToBeDeleted": ["city=sf/abc-0_0-1-1_20250101000000000.parquet"],
                "logBlocksToBeDeleted": {},
            }
        ],
    }
    back = am.read_rollback_plan(am.write_rollback_plan(plan))
    assert back["version"] == 1
    assert back["instantToRollback"] == plan["instantToRollback"]
    assert back["RollbackRequests"] == plan["RollbackRequests"]


def test_rollback_metadata_round_trip() -> None:
    meta = {
        "startRollbackTime": "20250102000000000",
        "timeTakenInMillis": 12,
        "totalFilesDeleted": 1,
        "commitsRollback": ["20250101000000000"],
        "partitionMetadata": {
            "city=sf": {
                "partitionPath": "city=sf",
                "successDeleteFiles": ["abc-0_0-1-1_20250101000000000.parquet"],
                "failedDeleteFiles": [],
                "rollbackLogFiles": None,
                "logFilesFromFailedCommit": None,
            }
        },
        "instantsRollback": [{"commitTime": "20250101000000000", "action": "compaction"}],
    }
    back = am.read_rollback_metadata(am.write_rollback_metadata(meta))
    assert back == {**meta, "version": 1}


def test_clean_plan_and_metadata_round_trip() -> None:
    plan = {
        "earliestInstantToRetain": {"timestamp": "20250101000000000", "action": "deltacommit", "state": "COMPLETED"},
        "policy": "KEEP_LATEST_COMMITS",
        "filePathsToBeDeletedPerPartition": {
            "city=sf": [{"filePath": "/t/city=sf/old.parquet", "isBootstrapBaseFile": False}]
        },
        "partitionsToBeDeleted": [],
    }
    back = am.read_clean_plan(am.write_clean_plan(plan))
    assert back["version"] == 2 and back["lastCompletedCommitTimestamp"] == ""
    assert back["filePathsToBeDeletedPerPartition"] == plan["filePathsToBeDeletedPerPartition"]
    assert back["filesToBeDeletedPerPartition"] is None

    meta = {
        "startCleanTime": "20250103000000000",
        "timeTakenInMillis": 5,
        "totalFilesDeleted": 1,
        "earliestCommitToRetain": "20250101000000000",
        "partitionMetadata": {
            "city=sf": {
                "partitionPath": "city=sf",
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": ["old.parquet"],
                "successDeleteFiles": ["old.parquet"],
                "failedDeleteFiles": [],
                "isPartitionDeleted": False,
            }
        },
    }
    mb = am.read_clean_metadata(am.write_clean_metadata(meta))
    assert mb["version"] == 2 and mb["policy"] == "" and mb["bootstrapPartitionMetadata"] is None
    assert mb["partitionMetadata"] == meta["partitionMetadata"]


def test_generic_reader_and_errors() -> None:
    rec = am.read_avro_instant(_member(PLAN_MEMBER))
    assert "symlinkOperations" not in rec["operations"][0]  # writer schema only
    with pytest.raises(am.AvroInstantError):
        am.read_avro_instant(b'{"json": true}')
    with pytest.raises(am.AvroInstantError):
        am.read_avro_instant(b"Obj\x01garbage")
    with pytest.raises(am.AvroInstantError):
        am.write_rollback_metadata({"startRollbackTime": "x"})  # required fields missing
