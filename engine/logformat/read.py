"""Full decode of a log file: scan the framing, then decode each block's content."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import TidemarkError
from engine.io import storage
from engine.logformat.avro_codec import decode_data_block_content
from engine.logformat.blocks import (
    EVENT_TIME_COLUMN,
    EVENT_TIMES_ATTR,
    MAX_EVENT_TIME_ATTR,
    MIN_EVENT_TIME_ATTR,
    ROLLBACK_COMMAND,
    BlockInfo,
    BlockType,
    CommandBlock,
    CorruptBlock,
    DataBlock,
    DeleteBlock,
    HeaderKey,
    LogFileContents,
)
from engine.logformat.deletes import decode_delete_content, decode_event_times
from engine.logformat.hfile_block import decode_hfile_block_content
from engine.logformat.scan import scan_log_bytes, scan_log_file

_UNSUPPORTED = {BlockType.CDC_DATA}


def read_log_file(path: str, *, columns: list[str] | None = None) -> LogFileContents:
    """Every block decoded, in file order. Framing failures and undecodable content become CorruptBlocks.

    `columns` projects data blocks; names a block lacks (older schema) are skipped rather than invented.
    A partial-update block (IS_PARTIAL) decodes at its own schema, so its records hold only the columns it wrote
    (`DataBlock.partial`): the merge keeps the older values of the others.
    CDC blocks raise TidemarkError: they belong to CDC logs, not to data logs.
    """
    # An object store is read once, whole (one GET), and scanned in memory; a local file is scanned in place.
    whole = storage.read_bytes(path) if storage.is_remote(path) else None
    scan = scan_log_file(path) if whole is None else scan_log_bytes(path, whole)
    for info in scan.blocks:
        if info.block_type in _UNSUPPORTED:
            raise TidemarkError(
                f"{path}: unsupported log block type {info.block_type.name} at offset {info.offset} "
                "(Tidemark reads Avro/Parquet/HFile data, delete and command blocks)"
            )
    data = memoryview(whole if whole is not None else storage.read_bytes(path))
    blocks: list[DataBlock | DeleteBlock | CommandBlock] = []
    corrupt = list(scan.corrupt)
    for info in scan.blocks:
        content = data[info.content_offset : info.content_offset + info.content_length]
        try:
            blocks.append(_decode_block(info, content, columns))
        except Exception as exc:  # noqa: BLE001 - any decode failure is confined to this block
            reason = f"content of {info.block_type.name} block at offset {info.offset} of {path} failed to decode: {exc}"
            corrupt.append(CorruptBlock(path, info.offset, reason, info.offset + info.size, info.instant_time,
                                        content=True))
    corrupt.sort(key=lambda c: c.offset)
    return LogFileContents(path, blocks, corrupt)


def _decode_block(
    info: BlockInfo, content: memoryview, columns: list[str] | None
) -> DataBlock | DeleteBlock | CommandBlock:
    where = f"{info.path} offset {info.offset}"
    if info.block_type is BlockType.AVRO_DATA:
        table = decode_data_block_content(content, _block_schema(info, where))
        return DataBlock(info, _project(table, columns))
    if info.block_type is BlockType.PARQUET_DATA:
        return DataBlock(info, _read_parquet(content, columns))
    if info.block_type is BlockType.HFILE_DATA:
        table = decode_hfile_block_content(content, _block_schema(info, where), where)
        return DataBlock(info, _project(table, columns))
    if info.block_type is BlockType.DELETE:
        deletes = decode_delete_content(bytes(content), where)
        return DeleteBlock(info, deletes.append_column(EVENT_TIME_COLUMN, _delete_event_times(info, deletes.num_rows,
                                                                                              where)))
    if info.block_type is BlockType.COMMAND:
        command = info.headers.get(HeaderKey.COMMAND_BLOCK_TYPE)
        if command != ROLLBACK_COMMAND:
            raise TidemarkError(f"{where}: unknown command block type {command!r} (only rollback '0' exists)")
        if not info.target_instant_time:
            raise TidemarkError(f"{where}: rollback command block has no TARGET_INSTANT_TIME header")
        return CommandBlock(info)
    raise TidemarkError(f"{where}: block type {info.block_type.name} holds no records")


def _delete_event_times(info: BlockInfo, n: int, where: str) -> pa.Array:
    """Each delete's event time from the SCHEMA header (Tidemark's writers), else nulls (Java, older blocks)."""
    text = info.schema_json
    if not text or EVENT_TIMES_ATTR not in text:
        return pa.nulls(n, pa.int64())
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise TidemarkError(f"{where}: SCHEMA header is not JSON ({exc})") from None
    value = doc.get(EVENT_TIMES_ATTR) if isinstance(doc, dict) else None
    return pa.nulls(n, pa.int64()) if value is None else decode_event_times(value, n, where)


def _block_schema(info: BlockInfo, where: str) -> dict[str, Any]:
    """The SCHEMA header as a dict, minus Tidemark's attributes (they describe the block, not the records)."""
    if info.schema_json is None:
        raise TidemarkError(f"{where}: {info.block_type.name} block has no SCHEMA header")
    schema: dict[str, Any] = json.loads(info.schema_json)
    schema.pop(MIN_EVENT_TIME_ATTR, None)
    schema.pop(MAX_EVENT_TIME_ATTR, None)
    return schema


def _project(table: pa.Table, columns: list[str] | None) -> pa.Table:
    if columns is None:
        return table
    return table.select([c for c in columns if c in table.column_names])


def _read_parquet(content: memoryview, columns: list[str] | None) -> pa.Table:
    """Parquet block content is a whole parquet file.

    ParquetFile with use_threads=False: pq.read_table's dataset path spins up a thread pool that (pyarrow 26)
    intermittently aborts the interpreter at exit, and a single small file gains nothing from threads.
    """
    pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(content)))
    if columns is not None:
        names = set(pf.schema_arrow.names)
        columns = [c for c in columns if c in names]
    return pf.read(columns=columns, use_threads=False)
