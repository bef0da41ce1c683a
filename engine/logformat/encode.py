"""Writing log blocks: the HoodieLogFormat v1 framing (docs/HUDI-FORMAT.md §1.1) and the data/rollback payloads."""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import TidemarkError
from engine.io.parquet_encoding import dictionary_columns
from engine.logformat.avro_codec import encode_data_block_parts
from engine.logformat.blocks import (
    EVENT_TIMES_ATTR,
    LOG_FORMAT_VERSION,
    MAGIC,
    MAX_EVENT_TIME_ATTR,
    MIN_EVENT_TIME_ATTR,
    ROLLBACK_COMMAND,
    BlockType,
    HeaderKey,
)
from engine.logformat.deletes import encode_delete_content, encode_event_times, has_event_times

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


def encode_metadata_map(entries: Mapping[int, str]) -> bytes:
    """Header/footer map: int32 count, then {int32 key ordinal, int32 len, UTF-8 bytes} in insertion order."""
    parts = [_INT.pack(len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        parts.append(struct.pack(">ii", int(key), len(raw)))
        parts.append(raw)
    return b"".join(parts)


def frame_block(block_type: BlockType, headers: Mapping[int, str],
                content: bytes | Sequence[bytes | memoryview]) -> bytes:
    """Wrap content (bytes, or its consecutive pieces) in MAGIC, blockLength, version, type, headers, content,
    empty footer and the size trailer."""
    return b"".join(frame_block_pieces(block_type, headers, content))


def frame_block_pieces(block_type: BlockType, headers: Mapping[int, str],
                       content: bytes | Sequence[bytes | memoryview]) -> list[bytes | memoryview]:
    """`frame_block`'s bytes as consecutive pieces, the content's left as they are (not copied): the framing
    before it is one piece and the footer and trailer another, both sized from the content's pieces."""
    parts = [content] if isinstance(content, (bytes, bytearray, memoryview)) else list(content)
    content_length = sum(len(p) for p in parts)
    header_bytes = encode_metadata_map(headers)
    footer_bytes = encode_metadata_map({})  # FooterMetadataType is empty: any entry would break Java readers
    block_length = 4 + 4 + len(header_bytes) + 8 + content_length + len(footer_bytes) + 8
    head = b"".join((
        MAGIC,
        _LONG.pack(block_length),
        struct.pack(">ii", LOG_FORMAT_VERSION, int(block_type)),
        header_bytes,
        _LONG.pack(content_length),
    ))
    # reverse pointer: total size up to (not incl.) this field
    tail = footer_bytes + _LONG.pack(block_length + len(MAGIC))
    return [head, *parts, tail]


def schema_header(avro_schema: dict[str, Any], min_event_time: int | None = None, max_event_time: int | None = None) -> str:
    """SCHEMA header text: compact JSON like Java's Schema.toString(), event-time attributes first.

    Putting the attributes first lets BlockInfo.min_event_time read them without parsing the whole schema;
    key order is irrelevant to Avro parsers.
    """
    doc: dict[str, Any] = {}
    if min_event_time is not None:
        doc[MIN_EVENT_TIME_ATTR] = str(int(min_event_time))
    if max_event_time is not None:
        doc[MAX_EVENT_TIME_ATTR] = str(int(max_event_time))
    for key, value in avro_schema.items():
        if key not in (MIN_EVENT_TIME_ATTR, MAX_EVENT_TIME_ATTR):
            doc[key] = value
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def encode_data_block(
    table: pa.Table,
    avro_schema: dict[str, Any],
    instant_time: str,
    fmt: str = "avro",
    min_event_time: int | None = None,
    max_event_time: int | None = None,
    *,
    partial: bool = False,
) -> bytes:
    """One AVRO_DATA (fmt="avro") or PARQUET_DATA (fmt="parquet") block holding `table` (meta columns included).

    `partial`: a Hudi 1.x partial-update block (IS_PARTIAL "true"): `avro_schema` lists only the columns the rows
    carry, and readers keep the older values of the others."""
    return b"".join(encode_data_block_pieces(table, avro_schema, instant_time, fmt, min_event_time, max_event_time,
                                             partial=partial))


def encode_data_block_pieces(
    table: pa.Table,
    avro_schema: dict[str, Any],
    instant_time: str,
    fmt: str = "avro",
    min_event_time: int | None = None,
    max_event_time: int | None = None,
    *,
    partial: bool = False,
) -> list[bytes | memoryview]:
    """`encode_data_block`'s bytes as consecutive pieces, not joined: a log writer writes them to the file where
    they lie (an Avro block's records are one piece of ~150 bytes a record, which a join would copy whole)."""
    headers: dict[int, str] = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.SCHEMA: schema_header(avro_schema, min_event_time, max_event_time),
    }
    if partial:
        headers[HeaderKey.IS_PARTIAL] = "true"
    if fmt == "avro":
        return frame_block_pieces(BlockType.AVRO_DATA, headers, encode_data_block_parts(table, avro_schema))
    if fmt == "parquet":
        return frame_block_pieces(BlockType.PARQUET_DATA, headers, _parquet_bytes(table))
    raise TidemarkError(f"unknown data block format {fmt!r}: expected 'avro' or 'parquet'")


def _parquet_bytes(table: pa.Table) -> bytes:
    """A complete parquet file (PAR1...PAR1, no version prefix), as HoodieParquetDataBlock stores it."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy", use_dictionary=dictionary_columns(table))
    return sink.getvalue()


def encode_delete_block(
    record_keys: Sequence[str],
    partition_paths: Sequence[str],
    instant_time: str,
    ordering_values: Sequence[int | float | str | None] | None = None,
    *,
    avro_schema: dict[str, Any] | None = None,
    event_times: pa.Array | Sequence[int | None] | None = None,
) -> bytes:
    """DELETE block. ordering_values None => IntWrapper 0 for every key ("always wins", as Spark SQL DELETE).

    Java writes the table schema as a SCHEMA header on delete blocks too; pass `avro_schema` to match it.
    `event_times` (epoch ms per delete, None unknown) go into that header as EVENT_TIMES_ATTR (it needs
    `avro_schema`): an unknown schema attribute every Avro parser ignores, so Java and hudi-rs read the block
    as before, while exact-mode compaction learns on which side of T each delete falls.
    """
    headers: dict[int, str] = {HeaderKey.INSTANT_TIME: instant_time}
    if avro_schema is not None:
        schema = dict(avro_schema)
        if has_event_times(event_times):
            assert event_times is not None
            if len(event_times) != len(record_keys):
                raise TidemarkError(f"delete block: {len(record_keys)} record keys but {len(event_times)} event times")
            schema[EVENT_TIMES_ATTR] = encode_event_times(event_times)
        headers[HeaderKey.SCHEMA] = schema_header(schema)
    elif has_event_times(event_times):
        raise TidemarkError("delete block: event times need the table schema (avro_schema) to travel in")
    content = encode_delete_content(record_keys, partition_paths, ordering_values)
    return frame_block(BlockType.DELETE, headers, content)


def encode_rollback_block(instant_time: str, target_instant_time: str) -> bytes:
    """COMMAND block rolling back `target_instant_time`; header order 0,3,1 as observed in Java-written logs."""
    headers: dict[int, str] = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
        HeaderKey.TARGET_INSTANT_TIME: target_instant_time,
    }
    return frame_block(BlockType.COMMAND, headers, b"")


def append_blocks(path: str, blocks: Sequence[bytes]) -> int:
    """Create-or-append whole blocks to a log file, fsync, and return the new file size.

    One write call per batch keeps a crash from interleaving partial blocks; a torn tail is still detected by
    the reader's trailer check.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        payload = b"".join(blocks)
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)
