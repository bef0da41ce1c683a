"""The record declarations: the schemas they yield are today's, byte for byte (the fixture was captured from the
hand-written schemas they replaced), and every record survives dataclass -> Avro bytes -> dataclass."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import pytest

from engine.timeline import avro_defs, avro_models
from engine.timeline import avro_records as r
from tests.support.fixtures import fixture_zip

SCHEMAS = json.loads((Path(__file__).parent / "data" / "avro_schemas.json").read_text())

# The schema constant of avro_models -> the declaration (and whether Java's variant) it now comes from.
DECLARED = {
    "COMPACTION_PLAN_SCHEMA": (r.HoodieCompactionPlan, False),
    "JAVA_COMPACTION_PLAN_SCHEMA": (r.HoodieCompactionPlan, True),
    "ROLLBACK_PLAN_SCHEMA": (r.HoodieRollbackPlan, False),
    "ROLLBACK_METADATA_SCHEMA": (r.HoodieRollbackMetadata, False),
    "CLEANER_PLAN_SCHEMA": (r.HoodieCleanerPlan, False),
    "CLEAN_METADATA_SCHEMA": (r.HoodieCleanMetadata, False),
    "REQUESTED_REPLACE_METADATA_SCHEMA": (r.HoodieRequestedReplaceMetadata, False),
    "COMMIT_METADATA_SCHEMA": (r.HoodieCommitMetadata, False),
    "REPLACE_COMMIT_METADATA_SCHEMA": (r.HoodieReplaceCommitMetadata, False),
}


def _compact(schema: object) -> str:
    # The text the container's avro.schema header holds: key order counts, not only equality.
    return json.dumps(schema, separators=(",", ":"))


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_declared_schema_is_todays_byte_for_byte(name: str) -> None:
    cls, java = DECLARED[name]
    assert _compact(avro_defs.schema(cls, java=java)) == _compact(SCHEMAS[name])
    assert _compact(getattr(avro_models, name)) == _compact(SCHEMAS[name])


def test_fixture_names_every_schema_constant() -> None:
    assert set(SCHEMAS) == set(DECLARED)


_STAT = r.HoodieWriteStat(fileId="f1-0", path="p=1/.f1-0_001.log.1_0-1-1", prevCommit="null", numWrites=3, numDeletes=1,
                          partitionPath="p=1", logVersion=1, logOffset=0, baseFile="", logFiles=[".f1-0_001.log.1_0-1-1"],
                          cdcStats={"x": 2}, minEventTime=-5, maxEventTime=2**40,
                          runtimeStats=r.HoodieRuntimeStats(totalScanTime=1, totalCreateTime=2, totalUpsertTime=3))

SAMPLES: list[object] = [
    r.HoodieCompactionPlan(
        operations=[r.HoodieCompactionOperation(
            baseInstantTime="20250101000000000", fileId="f1-0", partitionPath="city=sf",
            deltaFilePaths=[".f1-0_20250101000000000.log.1_0-1-1"], dataFilePath="f1-0_0-1-1_20250101000000000.parquet",
            metrics={"TOTAL_LOG_FILES": 1.0, "tidemark.carriedMinEventTime.0": 1.5e12},
            symlinkOperations=[r.HoodieSymlinkOperation(symlink=".f1-0_20250102000000000.log.1_0-1-1",
                                                        target=".f1-0_20250101000000000.log.2_0-1-1")])],
        extraMetadata={"tidemark.threshold": "1700000000000"}, version=2,
        strategy=r.HoodieCompactionStrategy(compactorClassName=None, strategyParams={"a": "b"}),
        preserveHoodieMetadata=True),
    r.HoodieCompactionPlan(),
    r.HoodieRollbackPlan(
        instantToRollback=r.HoodieInstantInfo(commitTime="20250101000000000", action="deltacommit"),
        RollbackRequests=[r.HoodieRollbackRequest(partitionPath="p=1", fileId="f1-0", latestBaseInstant="001",
                                                  filesToBeDeleted=["a.parquet"], logBlocksToBeDeleted={".l": 10})]),
    r.HoodieRollbackMetadata(
        startRollbackTime="20250101000000001", timeTakenInMillis=12, totalFilesDeleted=1, commitsRollback=["001"],
        partitionMetadata={"p=1": r.HoodieRollbackPartitionMetadata(
            partitionPath="p=1", successDeleteFiles=["a"], failedDeleteFiles=[], rollbackLogFiles={".l": 3})},
        instantsRollback=[r.HoodieInstantInfo(commitTime="001", action="deltacommit")]),
    r.HoodieCleanerPlan(
        earliestInstantToRetain=r.HoodieActionInstant(timestamp="001", action="commit", state="COMPLETED"),
        lastCompletedCommitTimestamp="002", policy="KEEP_LATEST_COMMITS", filesToBeDeletedPerPartition={},
        version=2, filePathsToBeDeletedPerPartition={"p=1": [r.HoodieCleanFileInfo(filePath="/t/p=1/a.parquet",
                                                                                       isBootstrapBaseFile=False)]},
        partitionsToBeDeleted=[], extraMetadata={"tidemark.retained": "3"}),
    r.HoodieCleanMetadata(
        policy="KEEP_LATEST_COMMITS", startCleanTime="003", timeTakenInMillis=5, totalFilesDeleted=1,
        earliestCommitToRetain="001", partitionMetadata={"p=1": r.HoodieCleanPartitionMetadata(
            partitionPath="p=1", policy="KEEP_LATEST_COMMITS", deletePathPatterns=["a"], successDeleteFiles=["a"],
            failedDeleteFiles=[], isPartitionDeleted=False)},
        version=2, bootstrapPartitionMetadata={}),
    r.HoodieRequestedReplaceMetadata(operationType=None, version=None),
    r.HoodieRequestedReplaceMetadata(
        operationType="cluster", clusteringPlan=r.HoodieClusteringPlan(
            inputGroups=[r.HoodieClusteringGroup(slices=[r.HoodieSliceInfo(fileId="f1-0", dataFilePath="a.parquet",
                                                                          deltaFilePaths=[".l"])],
                                                 metrics={"m": 1.0})],
            strategy=r.HoodieClusteringStrategy(strategyClassName="S"), preserveHoodieMetadata=True)),
    r.HoodieCommitMetadata(partitionToWriteStats={"p=1": [_STAT]}, compacted=False, extraMetadata={"schema": "{}"},
                           operationType="UPSERT"),
    r.HoodieReplaceCommitMetadata(partitionToWriteStats={"p=1": [_STAT]}, partitionToReplaceFileIds={"p=1": ["f0-0"]},
                                  operationType="INSERT_OVERWRITE"),
]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda rec: type(rec).__name__)
def test_record_round_trips_through_avro_bytes(record: object) -> None:
    assert dataclasses.is_dataclass(record) and not isinstance(record, type)
    data = avro_models.write_record(record)
    assert avro_models.read_record(type(record), data) == record
    # The bytes are what the dict writers produce: the same record through the untyped path reads back equal.
    assert avro_models.read_avro_instant(data) == avro_defs.to_avro(record)


def test_java_plan_reads_as_typed_record_and_back() -> None:
    member = "v8_trips_8i3u1d/.hoodie/timeline/20251220210129235.compaction.requested"
    with zipfile.ZipFile(fixture_zip("v8_trips_8i3u1d")) as zf:
        data = zf.read(member)
    plan = avro_models.read_record(r.HoodieCompactionPlan, data)
    assert plan.version == 2 and plan.operations and len(plan.operations) == 3
    assert all(op.symlinkOperations is None for op in plan.operations)   # Java's plan lacks the extension
    assert avro_defs.to_avro(plan) == avro_models.read_compaction_plan(data)
    assert avro_models.read_record(r.HoodieCompactionPlan, avro_models.write_record(plan)) == plan
