"""The Avro records of Hudi's timeline instant files, each declared once (engine.timeline.avro_defs turns a
declaration into its schema and its typed value).

Field for field as Java writes them (docs/HUDI-FORMAT.md §3): names, order, types, defaults and docs are
what Hudi's readers resolve our files against, and tests/engine/timeline/data/avro_schemas.json holds the
schemas these must yield. Classes carry the Avro record names; fields the Avro field names.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.timeline.avro_defs import Double, Int, Long, avro_field

# ---------------------------------------------------------------------------------------------
# Compaction plan (docs/HUDI-FORMAT.md §3.3: the Hudi 1.x writer schema dumped from the v8 fixture)


@dataclass(frozen=True, kw_only=True)
class HoodieSymlinkOperation:
    symlink: str | None = None   # new log file name (with the compaction instant)
    target: str | None = None    # the original log file name it carries over


@dataclass(frozen=True, kw_only=True)
class HoodieCompactionOperation:
    """Java's HoodieCompactionOperation as in the Hudi 1.x fixture, plus the RFC's symlinkOperations."""

    baseInstantTime: str | None
    deltaFilePaths: list[str] | None = None
    dataFilePath: str | None = None
    fileId: str | None
    partitionPath: str | None = None
    metrics: dict[str, Double] | None = None
    bootstrapFilePath: str | None = None
    # RFC extension, LAST with a null default so Java's schema still resolves our files (and drops it).
    symlinkOperations: list[HoodieSymlinkOperation] | None = avro_field(default=None, extension=True)


@dataclass(frozen=True, kw_only=True)
class HoodieCompactionStrategy:
    compactorClassName: str | None = avro_field(
        default=None,
        doc="The class name that is provided here should extend CompactionExecutionStrategy abstract "
        "class, idea is that the plan generator will also provide the execution strategy to use.")
    strategyParams: dict[str, str] | None = avro_field(
        default=None,
        doc="These parameters play a key role in determining which action type it is i.e. compaction or "
        "logcompaction and it will also include configs that determine how compaction needs to be executed.")
    version: Int | None = 1


@dataclass(frozen=True, kw_only=True)
class HoodieCompactionPlan:
    operations: list[HoodieCompactionOperation] | None = None
    extraMetadata: dict[str, str] | None = None
    version: Int | None = 1
    strategy: HoodieCompactionStrategy | None = None
    preserveHoodieMetadata: bool | None = False
    missingSchedulePartitions: list[str] | None = None


# ---------------------------------------------------------------------------------------------
# Rollback plan / metadata (apache/hudi hudi-common/src/main/avro, 0.14/0.15 field set)


@dataclass(frozen=True, kw_only=True)
class HoodieInstantInfo:
    commitTime: str
    action: str


@dataclass(frozen=True, kw_only=True)
class HoodieRollbackRequest:
    partitionPath: str
    fileId: str | None = None
    latestBaseInstant: str | None = None
    filesToBeDeleted: list[str] = avro_field(default=[], default_in_type=True)
    logBlocksToBeDeleted: dict[str, Long] | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieRollbackPlan:
    instantToRollback: HoodieInstantInfo | None = avro_field(default=None, doc="Hoodie instant that needs to be rolled back")
    RollbackRequests: list[HoodieRollbackRequest] | None = None
    version: Int | None = 1


@dataclass(frozen=True, kw_only=True)
class HoodieRollbackPartitionMetadata:
    partitionPath: str
    successDeleteFiles: list[str]
    failedDeleteFiles: list[str]
    rollbackLogFiles: dict[str, Long] | None = None
    logFilesFromFailedCommit: dict[str, Long] | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieRollbackMetadata:
    startRollbackTime: str
    timeTakenInMillis: Long
    totalFilesDeleted: Int
    commitsRollback: list[str]
    partitionMetadata: dict[str, HoodieRollbackPartitionMetadata]
    version: Int | None = 1
    instantsRollback: list[HoodieInstantInfo] = avro_field(default=[], default_in_type=True)


# ---------------------------------------------------------------------------------------------
# Cleaner plan / clean metadata


@dataclass(frozen=True, kw_only=True)
class HoodieActionInstant:
    timestamp: str
    action: str
    state: str


@dataclass(frozen=True, kw_only=True)
class HoodieCleanFileInfo:
    filePath: str | None = None
    isBootstrapBaseFile: bool | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieCleanerPlan:
    earliestInstantToRetain: HoodieActionInstant | None = None
    lastCompletedCommitTimestamp: str = ""
    policy: str
    # Deprecated by filePathsToBeDeletedPerPartition; Java still declares it.
    filesToBeDeletedPerPartition: dict[str, list[str]] | None = None
    version: Int | None = 1
    filePathsToBeDeletedPerPartition: dict[str, list[HoodieCleanFileInfo]] | None = avro_field(
        default=None, doc="This field replaces the field filesToBeDeletedPerPartition")
    partitionsToBeDeleted: list[str] | None = avro_field(default=None, doc="partitions to be deleted")
    extraMetadata: dict[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieCleanPartitionMetadata:
    partitionPath: str
    policy: str
    deletePathPatterns: list[str]
    successDeleteFiles: list[str]
    failedDeleteFiles: list[str]
    isPartitionDeleted: bool | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieCleanMetadata:
    policy: str = ""
    startCleanTime: str
    timeTakenInMillis: Long
    totalFilesDeleted: Int
    earliestCommitToRetain: str
    lastCompletedCommitTimestamp: str = ""
    partitionMetadata: dict[str, HoodieCleanPartitionMetadata]
    version: Int | None = 1
    bootstrapPartitionMetadata: dict[str, HoodieCleanPartitionMetadata] | None = None


# ---------------------------------------------------------------------------------------------
# Requested replace metadata (`<ts>.replacecommit.requested`): the writer schema of the Java 0.14/0.15
# fixture `v6_simplekeygen_nonhivestyle_overwritetable` (hudi-rs test data), field for field.


@dataclass(frozen=True, kw_only=True)
class HoodieSliceInfo:
    dataFilePath: str | None = None
    deltaFilePaths: list[str] | None = None
    fileId: str | None
    partitionPath: str | None = None
    bootstrapFilePath: str | None = None
    version: Int | None = 1


@dataclass(frozen=True, kw_only=True)
class HoodieClusteringGroup:
    slices: list[HoodieSliceInfo] | None = None
    metrics: dict[str, Double] | None = None
    numOutputFileGroups: Int | None = 1
    extraMetadata: dict[str, str] | None = None
    version: Int | None = 1


@dataclass(frozen=True, kw_only=True)
class HoodieClusteringStrategy:
    strategyClassName: str | None = None
    strategyParams: dict[str, str] | None = None
    version: Int | None = 1


@dataclass(frozen=True, kw_only=True)
class HoodieClusteringPlan:
    inputGroups: list[HoodieClusteringGroup] | None = None
    strategy: HoodieClusteringStrategy | None = None
    extraMetadata: dict[str, str] | None = None
    version: Int | None = 1
    preserveHoodieMetadata: bool | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieRequestedReplaceMetadata:
    operationType: str | None = None
    clusteringPlan: HoodieClusteringPlan | None = None
    extraMetadata: dict[str, str] | None = None
    version: Int | None = 1


# ---------------------------------------------------------------------------------------------
# Commit metadata of table version 8 (Hudi 1.x writes every completed commit as Avro; docs/HUDI-FORMAT.md §3.1:
# the writer schema of the v8 fixture's deltacommits and compaction commit, field order kept)


@dataclass(frozen=True, kw_only=True)
class HoodieRuntimeStats:
    totalScanTime: Long | None = None
    totalCreateTime: Long | None = None
    totalUpsertTime: Long | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieWriteStat:
    fileId: str | None = None
    path: str | None = None
    prevCommit: str | None = None
    numWrites: Long | None = None
    numDeletes: Long | None = None
    numUpdateWrites: Long | None = None
    totalWriteBytes: Long | None = None
    totalWriteErrors: Long | None = None
    partitionPath: str | None = None
    totalLogRecords: Long | None = None
    totalLogFiles: Long | None = None
    totalUpdatedRecordsCompacted: Long | None = None
    numInserts: Long | None = None
    totalLogBlocks: Long | None = None
    totalCorruptLogBlock: Long | None = None
    totalRollbackBlocks: Long | None = None
    fileSizeInBytes: Long | None = None
    logVersion: Int | None = None
    logOffset: Long | None = None
    baseFile: str | None = None
    logFiles: list[str] | None = None
    cdcStats: dict[str, Long] | None = None
    prevBaseFile: str | None = None
    minEventTime: Long | None = None
    maxEventTime: Long | None = None
    runtimeStats: HoodieRuntimeStats | None = None
    totalLogFilesCompacted: Long | None = None
    totalLogReadTimeMs: Long | None = None
    totalLogSizeCompacted: Long | None = None
    tempPath: str | None = None
    numUpdates: Long | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieCommitMetadata:
    partitionToWriteStats: dict[str, list[HoodieWriteStat]] | None = None
    compacted: bool | None = None
    extraMetadata: dict[str, str] | None = None
    version: Int | None = 1
    operationType: str | None = None


@dataclass(frozen=True, kw_only=True)
class HoodieReplaceCommitMetadata:
    """HoodieCommitMetadata's fields with partitionToReplaceFileIds after extraMetadata, as Java declares it."""

    partitionToWriteStats: dict[str, list[HoodieWriteStat]] | None = None
    compacted: bool | None = None
    extraMetadata: dict[str, str] | None = None
    partitionToReplaceFileIds: dict[str, list[str]] | None = None
    version: Int | None = 1
    operationType: str | None = None
