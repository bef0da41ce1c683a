"""Avro models of Hudi timeline instant files, and byte-level read/write helpers.

Hudi serialises plans and metadata (compaction plan, rollback plan/metadata, cleaner plan/metadata)
as Avro object-container files holding exactly one record (TimelineMetadataUtils.serializeAvroMetadata).
Java writes them with the null codec and only the ``avro.schema`` header entry (seen in the v8 fixture's
``.compaction.requested``); we produce the same bytes layout so Java and hudi-rs read ours unchanged.

Schemas are written in Java's ``Schema.toString()`` form: namespace on the top record, and
``"avro.java.string": "String"`` on strings as Hudi's generated classes carry it.
Java reads these files with its own generated class as reader schema, so Avro schema resolution
drops writer fields it doesn't know (our ``symlinkOperations``) and fills missing ones from defaults.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import fastavro

from engine.errors import TidemarkError

NAMESPACE = "org.apache.hudi.avro.model"


class AvroInstantError(TidemarkError):
    """An instant file is not a readable Hudi Avro container."""


# ---------------------------------------------------------------------------------------------
# Schema building blocks (Java form)

_STR: dict[str, Any] = {"type": "string", "avro.java.string": "String"}


def _opt(t: Any) -> list[Any]:
    return ["null", t]


def _field(name: str, t: Any, default: Any = "__none__", doc: str | None = None) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name, "type": t}
    if doc is not None:
        f["doc"] = doc
    if default != "__none__":
        f["default"] = default
    return f


def _arr(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _map(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values, "avro.java.string": "String"}


def _opt_str(name: str, default: Any = "__none__") -> dict[str, Any]:
    return _field(name, _opt(_STR), default)


_VERSION_FIELD = _field("version", ["int", "null"], 1)

# ---------------------------------------------------------------------------------------------
# Compaction plan (docs/HUDI-FORMAT.md §3.3: the Hudi 1.x writer schema dumped from the v8 fixture)

HOODIE_SYMLINK_OPERATION: dict[str, Any] = {
    "type": "record",
    "name": "HoodieSymlinkOperation",
    "fields": [
        _opt_str("symlink", None),  # new log file name (with the compaction instant)
        _opt_str("target", None),  # the original log file name it carries over
    ],
}

# Java's HoodieCompactionOperation exactly as in the Hudi 1.x fixture (no RFC extension).
_JAVA_COMPACTION_OPERATION_FIELDS: list[dict[str, Any]] = [
    _opt_str("baseInstantTime"),
    _field("deltaFilePaths", _opt(_arr(_STR)), None),
    _opt_str("dataFilePath", None),
    _opt_str("fileId"),
    _opt_str("partitionPath", None),
    _field("metrics", _opt({"type": "map", "values": "double", "avro.java.string": "String"}), None),
    _opt_str("bootstrapFilePath", None),
]

HOODIE_COMPACTION_STRATEGY: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionStrategy",
    "fields": [
        _field(
            "compactorClassName",
            _opt(_STR),
            None,
            doc="The class name that is provided here should extend CompactionExecutionStrategy abstract "
            "class, idea is that the plan generator will also provide the execution strategy to use.",
        ),
        _field(
            "strategyParams",
            _opt(_map(_STR)),
            None,
            doc="These parameters play a key role in determining which action type it is i.e. compaction or "
            "logcompaction and it will also include configs that determine how compaction needs to be executed.",
        ),
        _VERSION_FIELD,
    ],
}


def _compaction_plan_schema(with_symlinks: bool) -> dict[str, Any]:
    op_fields = list(_JAVA_COMPACTION_OPERATION_FIELDS)
    if with_symlinks:
        # RFC extension, appended LAST with a null default so Java's schema still resolves our files.
        op_fields.append(_field("symlinkOperations", _opt(_arr(HOODIE_SYMLINK_OPERATION)), None))
    operation = {"type": "record", "name": "HoodieCompactionOperation", "fields": op_fields}
    return {
        "type": "record",
        "name": "HoodieCompactionPlan",
        "namespace": NAMESPACE,
        "fields": [
            _field("operations", _opt(_arr(operation)), None),
            _field("extraMetadata", _opt(_map(_STR)), None),
            _VERSION_FIELD,
            _field("strategy", _opt(HOODIE_COMPACTION_STRATEGY), None),
            _field("preserveHoodieMetadata", ["boolean", "null"], False),
            _field("missingSchedulePartitions", _opt(_arr(_STR)), None),
        ],
    }


COMPACTION_PLAN_SCHEMA: dict[str, Any] = _compaction_plan_schema(with_symlinks=True)
# Java 1.x's own schema: used by tests to prove our files resolve against it.
JAVA_COMPACTION_PLAN_SCHEMA: dict[str, Any] = _compaction_plan_schema(with_symlinks=False)

# Plan version 2: paths in deltaFilePaths/dataFilePath are file NAMES relative to the partition.
COMPACTION_PLAN_VERSION = 2

# ---------------------------------------------------------------------------------------------
# Rollback plan / metadata (apache/hudi hudi-common/src/main/avro, 0.14/0.15 field set)

_INSTANT_INFO: dict[str, Any] = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "fields": [_field("commitTime", _STR), _field("action", _STR)],
}

ROLLBACK_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": NAMESPACE,
    "fields": [
        _field("instantToRollback", _opt(_INSTANT_INFO), None, doc="Hoodie instant that needs to be rolled back"),
        _field(
            "RollbackRequests",
            _opt(
                _arr(
                    {
                        "type": "record",
                        "name": "HoodieRollbackRequest",
                        "fields": [
                            _field("partitionPath", _STR),
                            _opt_str("fileId", None),
                            _opt_str("latestBaseInstant", None),
                            _field("filesToBeDeleted", {"type": "array", "items": _STR, "default": []}, []),
                            _field("logBlocksToBeDeleted", _opt({"type": "map", "values": "long",
                                                                 "avro.java.string": "String"}), None),
                        ],
                    }
                )
            ),
            None,
        ),
        _VERSION_FIELD,
    ],
}
ROLLBACK_PLAN_VERSION = 1

_LONG_MAP: dict[str, Any] = {"type": "map", "values": "long", "avro.java.string": "String"}

ROLLBACK_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": NAMESPACE,
    "fields": [
        _field("startRollbackTime", _STR),
        _field("timeTakenInMillis", "long"),
        _field("totalFilesDeleted", "int"),
        _field("commitsRollback", _arr(_STR)),
        _field(
            "partitionMetadata",
            _map(
                {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        _field("partitionPath", _STR),
                        _field("successDeleteFiles", _arr(_STR)),
                        _field("failedDeleteFiles", _arr(_STR)),
                        _field("rollbackLogFiles", _opt(_LONG_MAP), None),
                        _field("logFilesFromFailedCommit", _opt(_LONG_MAP), None),
                    ],
                }
            ),
        ),
        _VERSION_FIELD,
        _field("instantsRollback", {"type": "array", "items": _INSTANT_INFO, "default": []}, []),
    ],
}
ROLLBACK_METADATA_VERSION = 1

# ---------------------------------------------------------------------------------------------
# Cleaner plan / clean metadata

CLEANER_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": NAMESPACE,
    "fields": [
        _field(
            "earliestInstantToRetain",
            _opt(
                {
                    "type": "record",
                    "name": "HoodieActionInstant",
                    "fields": [_field("timestamp", _STR), _field("action", _STR), _field("state", _STR)],
                }
            ),
            None,
        ),
        _field("lastCompletedCommitTimestamp", _STR, ""),
        _field("policy", _STR),
        # Deprecated by filePathsToBeDeletedPerPartition; Java still declares it.
        _field("filesToBeDeletedPerPartition", _opt(_map(_arr(_STR))), None),
        _VERSION_FIELD,
        _field(
            "filePathsToBeDeletedPerPartition",
            _opt(
                _map(
                    _arr(
                        {
                            "type": "record",
                            "name": "HoodieCleanFileInfo",
                            "fields": [
                                _opt_str("filePath", None),
                                _field("isBootstrapBaseFile", _opt("boolean"), None),
                            ],
                        }
                    )
                )
            ),
            None,
            doc="This field replaces the field filesToBeDeletedPerPartition",
        ),
        _field("partitionsToBeDeleted", _opt(_arr(_STR)), None, doc="partitions to be deleted"),
        _field("extraMetadata", _opt(_map(_STR)), None),
    ],
}
# CleanPlanner's latest plan version (uses filePathsToBeDeletedPerPartition).
CLEANER_PLAN_VERSION = 2

_CLEAN_PARTITION_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "fields": [
        _field("partitionPath", _STR),
        _field("policy", _STR),
        _field("deletePathPatterns", _arr(_STR)),
        _field("successDeleteFiles", _arr(_STR)),
        _field("failedDeleteFiles", _arr(_STR)),
        _field("isPartitionDeleted", _opt("boolean"), None),
    ],
}

CLEAN_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": NAMESPACE,
    "fields": [
        _field("policy", _STR, ""),
        _field("startCleanTime", _STR),
        _field("timeTakenInMillis", "long"),
        _field("totalFilesDeleted", "int"),
        _field("earliestCommitToRetain", _STR),
        _field("lastCompletedCommitTimestamp", _STR, ""),
        _field("partitionMetadata", _map(_CLEAN_PARTITION_METADATA)),
        _VERSION_FIELD,
        _field("bootstrapPartitionMetadata", _opt(_map("HoodieCleanPartitionMetadata")), None),
    ],
}
CLEAN_METADATA_VERSION = 2

# ---------------------------------------------------------------------------------------------
# Requested replace metadata (`<ts>.replacecommit.requested`): the writer schema of the Java 0.14/0.15
# fixture `v6_simplekeygen_nonhivestyle_overwritetable` (hudi-rs test data), field for field.

_CLUSTERING_SLICE: dict[str, Any] = {
    "type": "record",
    "name": "HoodieSliceInfo",
    "fields": [
        _opt_str("dataFilePath", None),
        _field("deltaFilePaths", _opt(_arr(_STR)), None),
        _opt_str("fileId"),
        _opt_str("partitionPath", None),
        _opt_str("bootstrapFilePath", None),
        _VERSION_FIELD,
    ],
}

_CLUSTERING_PLAN: dict[str, Any] = {
    "type": "record",
    "name": "HoodieClusteringPlan",
    "fields": [
        _field("inputGroups", _opt(_arr({
            "type": "record",
            "name": "HoodieClusteringGroup",
            "fields": [
                _field("slices", _opt(_arr(_CLUSTERING_SLICE)), None),
                _field("metrics", _opt({"type": "map", "values": "double", "avro.java.string": "String"}), None),
                _field("numOutputFileGroups", ["int", "null"], 1),
                _field("extraMetadata", _opt(_map(_STR)), None),
                _VERSION_FIELD,
            ],
        })), None),
        _field("strategy", _opt({
            "type": "record",
            "name": "HoodieClusteringStrategy",
            "fields": [
                _opt_str("strategyClassName", None),
                _field("strategyParams", _opt(_map(_STR)), None),
                _VERSION_FIELD,
            ],
        }), None),
        _field("extraMetadata", _opt(_map(_STR)), None),
        _VERSION_FIELD,
        _field("preserveHoodieMetadata", _opt("boolean"), None),
    ],
}

REQUESTED_REPLACE_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRequestedReplaceMetadata",
    "namespace": NAMESPACE,
    "fields": [
        _opt_str("operationType", None),
        _field("clusteringPlan", _opt(_CLUSTERING_PLAN), None),
        _field("extraMetadata", _opt(_map(_STR)), None),
        _VERSION_FIELD,
    ],
}

# ---------------------------------------------------------------------------------------------
# Commit metadata of table version 8 (Hudi 1.x writes every completed commit as Avro; docs/HUDI-FORMAT.md §3.1:
# the writer schema of the v8 fixture's deltacommits and compaction commit, field order kept)

_LONG_STATS = ("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes", "totalWriteErrors")
_LONG_LOG_STATS = ("totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted", "numInserts",
                   "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes")

_RUNTIME_STATS: dict[str, Any] = {
    "type": "record", "name": "HoodieRuntimeStats",
    "fields": [_field(n, _opt("long"), None) for n in ("totalScanTime", "totalCreateTime", "totalUpsertTime")],
}

_WRITE_STAT: dict[str, Any] = {
    "type": "record", "name": "HoodieWriteStat",
    "fields": [
        _opt_str("fileId", None), _opt_str("path", None), _opt_str("prevCommit", None),
        *(_field(n, _opt("long"), None) for n in _LONG_STATS),
        _opt_str("partitionPath", None),
        *(_field(n, _opt("long"), None) for n in _LONG_LOG_STATS),
        _field("logVersion", _opt("int"), None), _field("logOffset", _opt("long"), None),
        _opt_str("baseFile", None),
        _field("logFiles", _opt(_arr(_STR)), None),
        _field("cdcStats", _opt({"type": "map", "values": "long", "avro.java.string": "String"}), None),
        _opt_str("prevBaseFile", None),
        _field("minEventTime", _opt("long"), None), _field("maxEventTime", _opt("long"), None),
        _field("runtimeStats", _opt(_RUNTIME_STATS), None),
        *(_field(n, _opt("long"), None) for n in ("totalLogFilesCompacted", "totalLogReadTimeMs",
                                                   "totalLogSizeCompacted")),
        _opt_str("tempPath", None),
        _field("numUpdates", _opt("long"), None),
    ],
}

COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "namespace": NAMESPACE,
    "fields": [
        _field("partitionToWriteStats", _opt(_map(_arr(_WRITE_STAT))), None),
        _field("compacted", _opt("boolean"), None),
        _field("extraMetadata", _opt(_map(_STR)), None),
        _VERSION_FIELD,
        _opt_str("operationType", None),
    ],
}

REPLACE_COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieReplaceCommitMetadata",
    "namespace": NAMESPACE,
    "fields": [
        *COMMIT_METADATA_SCHEMA["fields"][:3],
        _field("partitionToReplaceFileIds", _opt(_map(_arr(_STR))), None),
        *COMMIT_METADATA_SCHEMA["fields"][3:],
    ],
}


def commit_metadata_avro(doc: dict[str, Any]) -> bytes:
    """A v6 JSON commit-metadata document as the Avro container a v8 timeline holds (same field names; keys the
    Avro record lacks, e.g. v6's `recordsStats`, are dropped; a replacecommit keeps partitionToReplaceFileIds)."""
    schema = REPLACE_COMMIT_METADATA_SCHEMA if "partitionToReplaceFileIds" in doc else COMMIT_METADATA_SCHEMA
    names = [f["name"] for f in _WRITE_STAT["fields"]]
    stats = {p: [{n: _coerce_stat(n, s.get(n)) for n in names} for s in per or ()]
             for p, per in (doc.get("partitionToWriteStats") or {}).items()}
    record = {**{k: v for k, v in doc.items() if k != "partitionToWriteStats"}, "partitionToWriteStats": stats}
    record.setdefault("version", 1)
    return write_avro_instant(schema, record)


def _coerce_stat(name: str, value: Any) -> Any:
    """A stat value in the Avro record's shape (runtimeStats has exactly its three counters)."""
    if name == "runtimeStats" and isinstance(value, dict):
        return {k: value.get(k) for k in ("totalScanTime", "totalCreateTime", "totalUpsertTime")}
    return value


# ---------------------------------------------------------------------------------------------
# Container encoding


def _zigzag(n: int) -> bytes:
    """Avro `long` encoding (zig-zag varint)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _avro_bytes(b: bytes) -> bytes:
    return _zigzag(len(b)) + b


def write_avro_instant(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """Encode one record as an Avro container file laid out like Java's DataFileWriter output."""
    parsed = fastavro.parse_schema(schema)
    body = io.BytesIO()
    try:
        fastavro.schemaless_writer(body, parsed, record)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise AvroInstantError(f"cannot encode {schema['name']}: {exc}") from exc
    data = body.getvalue()
    schema_json = json.dumps(schema, separators=(",", ":")).encode()
    sync = os.urandom(16)
    header = b"Obj\x01" + _zigzag(1) + _avro_bytes(b"avro.schema") + _avro_bytes(schema_json) + _zigzag(0) + sync
    block = _zigzag(1) + _zigzag(len(data)) + data + sync
    return header + block


def read_avro_instant(data: bytes, reader_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Decode the single record of any Hudi Avro instant file (with its embedded writer schema)."""
    if not data.startswith(b"Obj\x01"):
        raise AvroInstantError("not an Avro container file (missing 'Obj\\x01' magic)")
    try:
        records = list(fastavro.reader(io.BytesIO(data), reader_schema=reader_schema))
    except Exception as exc:  # fastavro raises many types on corrupt/unresolvable input
        raise AvroInstantError(f"cannot decode Avro instant file: {exc}") from exc
    if not records:
        raise AvroInstantError("Avro instant file holds no record")
    record = records[0]
    if not isinstance(record, dict):
        raise AvroInstantError(f"Avro instant file holds a {type(record).__name__}, not a record")
    return record


def avro_writer_schema(data: bytes) -> dict[str, Any]:
    """The writer schema embedded in an Avro instant file."""
    try:
        schema = fastavro.reader(io.BytesIO(data)).writer_schema
    except Exception as exc:
        raise AvroInstantError(f"cannot decode Avro instant file header: {exc}") from exc
    if not isinstance(schema, dict):
        raise AvroInstantError(f"Avro instant file's schema is a {type(schema).__name__}, not a record schema")
    return schema


# ---------------------------------------------------------------------------------------------
# Typed helpers


def _with_version(record: dict[str, Any], version: int) -> dict[str, Any]:
    out = dict(record)
    out.setdefault("version", version)
    return out


def write_compaction_plan(plan: dict[str, Any]) -> bytes:
    """Serialise a HoodieCompactionPlan (version defaults to 2: file names relative to the partition)."""
    return write_avro_instant(COMPACTION_PLAN_SCHEMA, _with_version(plan, COMPACTION_PLAN_VERSION))


def read_compaction_plan(data: bytes) -> dict[str, Any]:
    """Read a compaction plan written by Java (any version with these names) or by us.

    Reading through our schema fills absent fields (e.g. symlinkOperations) with their defaults.
    """
    return read_avro_instant(data, reader_schema=COMPACTION_PLAN_SCHEMA)


def write_rollback_plan(plan: dict[str, Any]) -> bytes:
    return write_avro_instant(ROLLBACK_PLAN_SCHEMA, _with_version(plan, ROLLBACK_PLAN_VERSION))


def read_rollback_plan(data: bytes) -> dict[str, Any]:
    return read_avro_instant(data, reader_schema=ROLLBACK_PLAN_SCHEMA)


def write_rollback_metadata(metadata: dict[str, Any]) -> bytes:
    return write_avro_instant(ROLLBACK_METADATA_SCHEMA, _with_version(metadata, ROLLBACK_METADATA_VERSION))


def read_rollback_metadata(data: bytes) -> dict[str, Any]:
    return read_avro_instant(data, reader_schema=ROLLBACK_METADATA_SCHEMA)


def write_clean_plan(plan: dict[str, Any]) -> bytes:
    return write_avro_instant(CLEANER_PLAN_SCHEMA, _with_version(plan, CLEANER_PLAN_VERSION))


def read_clean_plan(data: bytes) -> dict[str, Any]:
    return read_avro_instant(data, reader_schema=CLEANER_PLAN_SCHEMA)


def write_clean_metadata(metadata: dict[str, Any]) -> bytes:
    return write_avro_instant(CLEAN_METADATA_SCHEMA, _with_version(metadata, CLEAN_METADATA_VERSION))


def read_clean_metadata(data: bytes) -> dict[str, Any]:
    return read_avro_instant(data, reader_schema=CLEAN_METADATA_SCHEMA)


def write_requested_replace(metadata: dict[str, Any]) -> bytes:
    """A HoodieRequestedReplaceMetadata exactly as given (Java's insert_overwrite writes every field null)."""
    return write_avro_instant(REQUESTED_REPLACE_METADATA_SCHEMA, metadata)


def read_requested_replace(data: bytes) -> dict[str, Any]:
    return read_avro_instant(data, reader_schema=REQUESTED_REPLACE_METADATA_SCHEMA)


def compaction_operation(
    *,
    base_instant: str,
    file_id: str,
    partition_path: str,
    delta_file_names: list[str],
    data_file_name: str | None,
    metrics: dict[str, float] | None = None,
    symlink_operations: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Build one HoodieCompactionOperation dict; symlink_operations are (new_name, original_name) pairs."""
    return {
        "baseInstantTime": base_instant,
        "deltaFilePaths": list(delta_file_names),
        "dataFilePath": data_file_name,
        "fileId": file_id,
        "partitionPath": partition_path,
        "metrics": dict(metrics) if metrics is not None else None,
        "bootstrapFilePath": None,
        "symlinkOperations": (
            [{"symlink": s, "target": t} for s, t in symlink_operations] if symlink_operations is not None else None
        ),
    }
