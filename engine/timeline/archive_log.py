"""Layout 1's archived timeline: `.hoodie/archived/.commits_.archive.<N>_1-0-1`, Hudi log files of Avro data blocks
of `HoodieArchivedMetaEntry` records, as Java's HoodieTimelineArchiver (0.x) writes and reads them.

One entry per state file of an archived instant (commitTime, actionType, actionState and the state's metadata as
the Avro record Java's MetadataConversionUtils builds: HoodieCommitMetadata for a commit/deltacommit,
HoodieReplaceCommitMetadata, HoodieCleanMetadata, HoodieRollbackMetadata, the compaction and cleaner plans,
HoodieRequestedReplaceMetadata); metadata that does not convert is left null, as Java leaves what it cannot read.
The block's schema holds the entry's fields we fill: Java reads it with its full schema, whose other fields are
unions with null defaults. Blocks go in batches of `hoodie.commits.archival.batch` records, appended to the
newest archive file, a new version once it passes `_ROLL_OVER_BYTES`. A re-run after a crash may append an
instant twice: `read_entries` keeps one (the active timeline, if it still holds the instant, wins over both).
"""
from __future__ import annotations

import io
import json
import logging
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import fastavro

from engine.io import storage
from engine.logformat import scan
from engine.logformat.avro_framing import BLOCK_CONTENT_VERSION
from engine.logformat.blocks import BlockType, HeaderKey
from engine.logformat.encode import append_blocks, frame_block
from engine.timeline import avro_models
from engine.timeline.avro_models import AvroInstantError
from engine.timeline.instants import (
    ARCHIVE_FILE_PREFIX,
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTACOMMIT,
    REPLACECOMMIT,
    ROLLBACK,
    Instant,
    State,
    Timeline,
)

log = logging.getLogger(__name__)

_ROLL_OVER_BYTES = 64 * 1024 * 1024
_NAME_RE = re.compile(r"^\.commits_\.archive\.(\d+)_1-0-1$")
_HEADER = struct.Struct(">ii")
_INT32 = struct.Struct(">i")

# Java archives HoodieInstant.State names (upper case), the enum's member names.
_STATE_NAMES = {state: state.name for state in State}


def _named_once(schema: Any, seen: set[str]) -> Any:
    """`schema` with every named type after its first definition replaced by its name (Avro allows one
    definition per name; Hudi's models share HoodieWriteStat, HoodieActionInstant, ...)."""
    if isinstance(schema, list):
        return [_named_once(s, seen) for s in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in ("record", "enum", "fixed"):
        if schema["name"] in seen:
            return schema["name"]
        seen.add(schema["name"])
        if kind == "record":
            return {**schema, "fields": [{**f, "type": _named_once(f["type"], seen)} for f in schema["fields"]]}
        return schema
    if kind == "array":
        return {**schema, "items": _named_once(schema["items"], seen)}
    if kind == "map":
        return {**schema, "values": _named_once(schema["values"], seen)}
    return schema


def _entry_schema() -> dict[str, Any]:
    def opt(name: str, record: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "type": ["null", record], "default": None}

    fields = [
        opt("hoodieCommitMetadata", avro_models.COMMIT_METADATA_SCHEMA),
        opt("hoodieCleanMetadata", avro_models.CLEAN_METADATA_SCHEMA),
        opt("hoodieRollbackMetadata", avro_models.ROLLBACK_METADATA_SCHEMA),
        {"name": "commitTime", "type": ["null", "string"], "default": None},
        {"name": "actionType", "type": ["null", "string"], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        opt("hoodieCompactionPlan", avro_models.COMPACTION_PLAN_SCHEMA),
        opt("hoodieCleanerPlan", avro_models.CLEANER_PLAN_SCHEMA),
        {"name": "actionState", "type": ["null", "string"], "default": None},
        opt("hoodieReplaceCommitMetadata", avro_models.REPLACE_COMMIT_METADATA_SCHEMA),
        opt("hoodieRequestedReplaceMetadata", avro_models.REQUESTED_REPLACE_METADATA_SCHEMA),
    ]
    schema = {"type": "record", "name": "HoodieArchivedMetaEntry", "namespace": "org.apache.hudi.avro.model",
              "fields": fields}
    return _named_once(schema, set())  # type: ignore[no-any-return]


ENTRY_SCHEMA: dict[str, Any] = _entry_schema()
_PARSED = fastavro.parse_schema(ENTRY_SCHEMA)


@dataclass(frozen=True)
class ArchivedEntry:
    """One archived state of an instant, as its entry records it."""

    timestamp: str
    action: str
    state: str            # REQUESTED / INFLIGHT / COMPLETED


# ------------------------------------------------------------------------------------------ writing


def entries_for(timeline: Timeline, instant: Instant, names: Iterable[str]) -> list[dict[str, Any]]:
    """The HoodieArchivedMetaEntry records of an archived instant: one per state file in `names`."""
    out = []
    for name in names:
        state = _state_of(name)
        record: dict[str, Any] = {"commitTime": instant.timestamp, "actionType": _action_of(instant, name),
                                  "actionState": _STATE_NAMES[state], "version": 1}
        data = storage.read_optional(storage.join(timeline.timeline_path, name))
        if data:
            try:
                record.update(_metadata(record["actionType"], state, data))
            except (AvroInstantError, ValueError, KeyError, TypeError) as exc:
                log.warning("archiving %s: its metadata does not convert (%s); archived without it", name, exc)
        out.append(record)
    return out


def _state_of(name: str) -> State:
    if name.endswith(".requested"):
        return State.REQUESTED
    if name.endswith(".inflight"):
        return State.INFLIGHT
    return State.COMPLETED


def _action_of(instant: Instant, name: str) -> str:
    """The action a state file names: `<ts>.<action>[.requested|.inflight]`; `<ts>.inflight` is a commit's."""
    parts = name.split(".")
    if parts[1:] == [State.INFLIGHT]:
        return COMMIT
    return parts[1] if len(parts) > 1 else instant.action


def _metadata(action: str, state: State, data: bytes) -> dict[str, Any]:
    """The entry's metadata field for one state file (Java's MetadataConversionUtils.createMetaWrapper)."""
    if state is State.COMPLETED:
        if action in (COMMIT, DELTACOMMIT, REPLACECOMMIT):
            doc = json.loads(data) if not data.startswith(b"Obj\x01") else avro_models.read_avro_instant(data)
            record = avro_models.read_avro_instant(avro_models.commit_metadata_avro(doc))
            field = "hoodieReplaceCommitMetadata" if action == REPLACECOMMIT else "hoodieCommitMetadata"
            return {field: record}
        if action == CLEAN:
            return {"hoodieCleanMetadata": avro_models.read_clean_metadata(data)}
        if action == ROLLBACK:
            return {"hoodieRollbackMetadata": avro_models.read_rollback_metadata(data)}
        return {}
    if state is State.REQUESTED:
        if action == COMPACTION:
            return {"hoodieCompactionPlan": avro_models.read_compaction_plan(data)}
        if action == CLEAN:
            return {"hoodieCleanerPlan": avro_models.read_clean_plan(data)}
        if action == REPLACECOMMIT:
            return {"hoodieRequestedReplaceMetadata": avro_models.read_requested_replace(data)}
    return {}


def append_entries(folder: str, records: list[dict[str, Any]], batch: int) -> str:
    """Append `records` to the newest archive log in `folder` (a new version past the roll-over size) as Avro
    data blocks of `batch` records; returns the file written."""
    path = _current_file(folder)
    blocks = [_block(records[i:i + batch]) for i in range(0, len(records), max(batch, 1))]
    if storage.is_remote(path):   # an object store has no append: the file is written whole, once
        storage.write_bytes(path, (storage.read_optional(path) or b"") + b"".join(blocks))
    else:
        storage.make_dirs(folder)
        append_blocks(path, blocks)
    return path


def _current_file(folder: str) -> str:
    versions = sorted(int(m.group(1)) for n in storage.list_names_if_dir(folder) if (m := _NAME_RE.match(n)))
    if not versions:
        return storage.join(folder, _file_name(1))
    newest = storage.join(folder, _file_name(versions[-1]))
    if storage.size(newest) >= _ROLL_OVER_BYTES:
        return storage.join(folder, _file_name(versions[-1] + 1))
    return newest


def _file_name(version: int) -> str:
    return f"{ARCHIVE_FILE_PREFIX}{version}_1-0-1"


def _block(records: list[dict[str, Any]]) -> bytes:
    out = io.BytesIO()
    out.write(_HEADER.pack(BLOCK_CONTENT_VERSION, len(records)))
    datum = io.BytesIO()
    for record in records:
        datum.seek(0)
        datum.truncate()
        fastavro.schemaless_writer(datum, _PARSED, record)
        out.write(_INT32.pack(datum.tell()))
        out.write(datum.getbuffer())
    headers: dict[int, str] = {HeaderKey.SCHEMA: json.dumps(ENTRY_SCHEMA, separators=(",", ":"))}
    return frame_block(BlockType.AVRO_DATA, headers, out.getvalue())


# ------------------------------------------------------------------------------------------ reading


def read_entries(folder: str) -> Iterator[dict[str, Any]]:
    """Every HoodieArchivedMetaEntry in the archive logs of `folder`, oldest file first (each with its block's own
    writer schema, so archives Java wrote read too). A torn tail (a crash mid-append) is skipped."""
    names = sorted((n for n in storage.list_names_if_dir(folder) if _NAME_RE.match(n)),
                   key=lambda n: int(_NAME_RE.match(n).group(1)))   # type: ignore[union-attr]
    for name in names:
        path = storage.join(folder, name)
        data = storage.read_bytes(path)
        for info in scan.scan_log_bytes(path, data).blocks:
            if info.block_type is not BlockType.AVRO_DATA:
                continue
            writer = fastavro.parse_schema(json.loads(info.headers[HeaderKey.SCHEMA]))
            yield from _records(memoryview(data)[info.content_offset:info.content_offset + info.content_length],
                                writer)


def _records(content: memoryview, writer: Any) -> Iterator[dict[str, Any]]:
    _, count = _HEADER.unpack_from(content, 0)
    pos = _HEADER.size
    for _ in range(count):
        (size,) = _INT32.unpack_from(content, pos)
        pos += _INT32.size
        record = fastavro.schemaless_reader(io.BytesIO(content[pos:pos + size]), writer, _PARSED)
        if isinstance(record, dict):
            yield record
        pos += size


def archived_instants(folder: str) -> list[ArchivedEntry]:
    """The archived (completed) instants, one per time and action, oldest first."""
    seen: dict[tuple[str, str], ArchivedEntry] = {}
    for record in read_entries(folder):
        if record.get("actionState") in (None, _STATE_NAMES[State.COMPLETED]) and record.get("commitTime"):
            entry = ArchivedEntry(record["commitTime"], record.get("actionType") or "", _STATE_NAMES[State.COMPLETED])
            seen[(entry.timestamp, entry.action)] = entry
    return sorted(seen.values(), key=lambda e: (e.timestamp, e.action))
