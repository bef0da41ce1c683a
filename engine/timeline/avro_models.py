"""Avro models of Hudi timeline instant files, and byte-level read/write helpers.

Hudi serialises plans and metadata (compaction plan, rollback plan/metadata, cleaner plan/metadata)
as Avro object-container files holding exactly one record (TimelineMetadataUtils.serializeAvroMetadata).
Java writes them with the null codec and only the ``avro.schema`` header entry (seen in the v8 fixture's
``.compaction.requested``); we produce the same bytes layout so Java and hudi-rs read ours unchanged.

Each record is declared once in ``engine.timeline.avro_records``; its schema here and its typed value
(``write_record`` / ``read_record``) both come from that declaration (``engine.timeline.avro_defs``).
Schemas are written in Java's ``Schema.toString()`` form: namespace on the top record, and
``"avro.java.string": "String"`` on strings as Hudi's generated classes carry it.
Java reads these files with its own generated class as reader schema, so Avro schema resolution
drops writer fields it doesn't know (our ``symlinkOperations``) and fills missing ones from defaults.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from typing import TYPE_CHECKING, Any, TypeVar

import fastavro

from engine.errors import TidemarkError
from engine.timeline import avro_defs
from engine.timeline import avro_records as records
from engine.timeline.avro_defs import NAMESPACE

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R", bound="DataclassInstance")

__all__ = ["NAMESPACE"]   # re-exported: callers and tests name the namespace through this module


class AvroInstantError(TidemarkError):
    """An instant file is not a readable Hudi Avro container."""


# ---------------------------------------------------------------------------------------------
# Schemas: derived from the record declarations in engine.timeline.avro_records (one definition each)

COMPACTION_PLAN_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieCompactionPlan)
# Java 1.x's own schema (no RFC symlinkOperations): used by tests to prove our files resolve against it.
JAVA_COMPACTION_PLAN_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieCompactionPlan, java=True)
# Plan version 2: paths in deltaFilePaths/dataFilePath are file NAMES relative to the partition.
COMPACTION_PLAN_VERSION = 2

ROLLBACK_PLAN_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieRollbackPlan)
ROLLBACK_PLAN_VERSION = 1
ROLLBACK_METADATA_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieRollbackMetadata)
ROLLBACK_METADATA_VERSION = 1

CLEANER_PLAN_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieCleanerPlan)
# CleanPlanner's latest plan version (uses filePathsToBeDeletedPerPartition).
CLEANER_PLAN_VERSION = 2
CLEAN_METADATA_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieCleanMetadata)
CLEAN_METADATA_VERSION = 2

REQUESTED_REPLACE_METADATA_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieRequestedReplaceMetadata)

COMMIT_METADATA_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieCommitMetadata)
REPLACE_COMMIT_METADATA_SCHEMA: dict[str, Any] = avro_defs.schema(records.HoodieReplaceCommitMetadata)

_WRITE_STAT_FIELDS = tuple(f.name for f in dataclasses.fields(records.HoodieWriteStat))
_RUNTIME_STATS_FIELDS = tuple(f.name for f in dataclasses.fields(records.HoodieRuntimeStats))


def commit_metadata_avro(doc: dict[str, Any]) -> bytes:
    """A v6 JSON commit-metadata document as the Avro container a v8 timeline holds (same field names; keys the
    Avro record lacks, e.g. v6's `recordsStats`, are dropped; a replacecommit keeps partitionToReplaceFileIds)."""
    schema = REPLACE_COMMIT_METADATA_SCHEMA if "partitionToReplaceFileIds" in doc else COMMIT_METADATA_SCHEMA
    stats = {p: [{n: _coerce_stat(n, s.get(n)) for n in _WRITE_STAT_FIELDS} for s in per or ()]
             for p, per in (doc.get("partitionToWriteStats") or {}).items()}
    record = {**{k: v for k, v in doc.items() if k != "partitionToWriteStats"}, "partitionToWriteStats": stats}
    record.setdefault("version", 1)
    return write_avro_instant(schema, record)


def _coerce_stat(name: str, value: Any) -> Any:
    """A stat value in the Avro record's shape (runtimeStats has exactly its three counters)."""
    if name == "runtimeStats" and isinstance(value, dict):
        return {k: value.get(k) for k in _RUNTIME_STATS_FIELDS}
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


def write_record(record: DataclassInstance) -> bytes:
    """One declared record (engine.timeline.avro_records) as its Avro container, with its declaration's schema."""
    return write_avro_instant(avro_defs.schema(type(record)), avro_defs.to_avro(record))


def read_record(cls: type[R], data: bytes) -> R:
    """The typed record of an Avro instant file, read through the declaration's schema (absent fields: defaults)."""
    return avro_defs.from_avro(cls, read_avro_instant(data, reader_schema=avro_defs.schema(cls)))


# ---------------------------------------------------------------------------------------------
# Dict helpers (the writers' and readers' form until each moves to the typed records)


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
