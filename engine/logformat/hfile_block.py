"""HFILE_DATA block content: an HFile whose cells are (record key, Avro binary datum in the SCHEMA header's schema).

The content is the HFile itself, with no content-version prefix (unlike Avro and delete blocks). Each cell value
is the same datum an AVRO_DATA block holds, only framed by the HFile instead of by an int32 length, so decoding
re-frames the values and hands them to the Avro block codec: one decoder, one set of checks.

Hudi's writer blanks the record field named "key" in every datum (HoodieAvroHFileReaderImplBase.KEY_FIELD_NAME,
"Reset key value w/in the record to avoid duplicating the key w/in payload") because the cell key holds it, and
its reader puts the cell key back where that field is an empty string. A table whose record key field is "key"
reads its keys only through that refill.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.logformat.avro_codec import decode_data_block_content
from engine.logformat.avro_framing import BLOCK_CONTENT_VERSION
from engine.logformat.hfile import HFileCells, HFileError, read_hfile

KEY_FIELD = "key"
_INT32 = struct.Struct(">i")


def decode_hfile_block_content(content: bytes | memoryview, avro_schema: dict[str, Any], where: str) -> pa.Table:
    """The records of an HFILE_DATA block's content, in cell (= record key) order."""
    cells = read_hfile(content, where)
    table = decode_data_block_content(_as_avro_block_content(cells), avro_schema)
    return _refill_key_field(table, cells.keys, where)


def _as_avro_block_content(cells: HFileCells) -> bytes:
    """The cell values framed as AVRO_DATA block content: version, count, then each datum after its int32 length."""
    parts = [struct.pack(">ii", BLOCK_CONTENT_VERSION, len(cells.values))]
    for value in cells.values:
        parts.append(_INT32.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def _refill_key_field(table: pa.Table, keys: list[bytes], where: str) -> pa.Table:
    """Empty strings of the "key" column replaced by their cell's key; nulls and non-empty values stay (Java's rule)."""
    if KEY_FIELD not in table.column_names or not pa.types.is_string(table.schema.field(KEY_FIELD).type):
        return table
    column = table.column(KEY_FIELD)
    blank = pc.equal(column, "")
    if not pc.any(blank).as_py():
        return table
    try:
        cell_keys = pa.array([key.decode("utf-8") for key in keys], pa.string())
    except UnicodeDecodeError as exc:
        raise HFileError(f"{where}: an HFile cell key is not UTF-8 ({exc}), so it cannot fill the key field") from None
    index = table.column_names.index(KEY_FIELD)
    return table.set_column(index, table.schema.field(index), pc.if_else(blank, cell_keys, column))
