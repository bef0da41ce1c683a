"""HFile v3, read whole from memory: the container an HFILE_DATA log block's records travel in.

Layout, as Hudi's hudi-io HFile writer/reader and hudi-rs (crates/core/src/hfile) have it — HBase's HFile v3:

    data blocks    DATABLK*, one per ~64 KB of cells (HBase may put leaf-index / bloom blocks between them)
    load-on-open   root data index (IDXROOT2), meta index (IDXROOT2), file info (FILEINF2)
    trailer        the last 4096 bytes: TRABLK"$, a varint-delimited TrailerProto, ..., int32 version

Every block starts with a 33-byte big-endian header: magic[8], int32 onDiskSizeWithoutHeader, int32
uncompressedSizeWithoutHeader, int64 prevBlockOffset, int8 checksumType, int32 bytesPerChecksum, int32
onDiskDataSizeWithHeader. The payload spans [33, onDiskDataSizeWithHeader) and is compressed with the trailer's
codec (index and file-info blocks too); checksum bytes follow it. Checksums are not verified: Hudi writes the NULL
checksum type (zeros) and its own reader, like hudi-rs, skips them; a damaged GZ payload still fails its gzip CRC.

A data block's payload is a run of cells: int32 keyLength, int32 valueLength, key (int16 rowLength, row, int8
familyLength, family, qualifier, int64 timestamp, int8 type), value, then the memstore timestamp as a Hadoop
vlong — always 0 in Hudi (one byte); a file claiming otherwise is refused, as Hudi's reader refuses it.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from dataclasses import dataclass

from engine.errors import TidemarkError

TRAILER_SIZE = 4096
TRAILER_MAGIC = b'TRABLK"$'
DATA_MAGIC = b"DATABLK*"
ENCODED_DATA_MAGIC = b"DATABLKE"   # a data block under an HBase data-block encoding (Hudi never configures one)
ROOT_INDEX_MAGIC = b"IDXROOT2"
INTERMEDIATE_INDEX_MAGIC = b"IDXINTE2"
LEAF_INDEX_MAGIC = b"IDXLEAF2"
FILE_INFO_MAGIC = b"FILEINF2"
META_MAGIC = b"METABLKc"
# What an HFile can begin with: its first data block or, in a file without cells, a meta block or the root index.
FIRST_BLOCK_MAGICS = frozenset({DATA_MAGIC, ENCODED_DATA_MAGIC, META_MAGIC, ROOT_INDEX_MAGIC})

# HFileCompressionCodec ordinals, stored in the trailer. Hudi 1.x's own HFile writer and reader know NONE and GZIP
# only; the rest could appear in files written through HBase by Hudi 0.x with hoodie.hfile.compression.algorithm.
_CODEC_NAMES = {0: "LZO", 1: "GZ", 2: "NONE", 3: "SNAPPY", 4: "LZ4", 5: "BZIP2", 6: "ZSTD"}
GZ, NONE = 1, 2

_HEADER = struct.Struct(">8siiqbii")
HEADER_SIZE = _HEADER.size   # 33
_INDEX_ENTRY = struct.Struct(">qi")   # block offset, on-disk size with header
_CELL = struct.Struct(">ii")          # key length, value length
_INT16 = struct.Struct(">h")
_FIXED_WIDTHS = {1: 8, 5: 4}   # protobuf wire types fixed64, fixed32

_FILE_INFO_PREFIX = b"PBUF"
_MAX_MVCC_KEY = "MAX_MEMSTORE_TS_KEY"
_KEY_VALUE_VERSION_KEY = "KEY_VALUE_VERSION"
_MAX_TAGS_KEY = "hfile.MAX_TAGS_LEN"


class HFileError(TidemarkError):
    """An HFile that is damaged, truncated, or uses a feature Hudi never writes."""


@dataclass(frozen=True)
class HFileCells:
    """The cells of an HFile in file (= key) order: each row key and its value, and the file-info map."""

    keys: list[bytes]
    values: list[bytes]
    file_info: dict[str, bytes]


@dataclass(frozen=True)
class _Trailer:
    load_on_open_offset: int
    file_info_offset: int
    data_index_count: int
    entry_count: int
    index_levels: int
    codec: int


@dataclass(frozen=True)
class _Block:
    magic: bytes
    payload: bytes   # uncompressed, without header and checksums


def read_hfile(data: bytes | memoryview, where: str) -> HFileCells:
    """Every cell of the HFile `data`; HFileError (prefixed with `where`) on anything damaged or unsupported.

    The data index, not a walk of the data region, says where the data blocks are: HBase-written files interleave
    index and bloom blocks with them. The cell count must come to the trailer's entry count, so a block the index
    lost is an error rather than missing rows."""
    buf = memoryview(data).cast("B")
    try:
        trailer = _read_trailer(buf)
        file_info = _read_file_info(_read_block(buf, trailer.file_info_offset, trailer.codec, FILE_INFO_MAGIC))
        _check_cell_format(file_info)
        keys: list[bytes] = []
        values: list[bytes] = []
        for offset, size in _data_block_entries(buf, trailer):
            block = _read_block(buf, offset, trailer.codec, DATA_MAGIC, size)
            _read_cells(block.payload, offset, keys, values)
    except HFileError as exc:
        raise HFileError(f"{where}: {exc}") from None
    if len(keys) != trailer.entry_count:
        raise HFileError(f"{where}: HFile data blocks hold {len(keys)} cells but its trailer counts {trailer.entry_count}")
    return HFileCells(keys, values, file_info)


# --------------------------------------------------------------------------------------------------- trailer


def _read_trailer(buf: memoryview) -> _Trailer:
    if len(buf) < TRAILER_SIZE:
        raise HFileError(f"HFile is {len(buf)} bytes, shorter than its {TRAILER_SIZE}-byte trailer (truncated?)")
    tail = buf[len(buf) - TRAILER_SIZE :]
    if bytes(tail[:8]) != TRAILER_MAGIC:
        raise HFileError(f"no HFile trailer magic in the last {TRAILER_SIZE} bytes (found {bytes(tail[:8])!r})")
    # The last int32 is the version: minor in the top byte, major in the low three.
    major = int.from_bytes(tail[-3:], "big")
    if major != 3:
        raise HFileError(f"HFile major version {major} is not supported (Hudi writes version 3)")
    length, pos = _varint(tail, 8)
    if pos + length > TRAILER_SIZE - 4:
        raise HFileError(f"HFile trailer message of {length} bytes runs past the trailer")
    fields = dict(_proto_fields(tail[pos : pos + length]))
    trailer = _Trailer(
        load_on_open_offset=_int_field(fields, 2, 0),
        file_info_offset=_int_field(fields, 1, 0),
        data_index_count=_int_field(fields, 5, 0),
        entry_count=_int_field(fields, 7, 0),
        index_levels=_int_field(fields, 8, 1),
        codec=_int_field(fields, 12, NONE),
    )
    _check_trailer(trailer, len(buf) - TRAILER_SIZE)
    return trailer


def _int_field(fields: dict[int, int | bytes], number: int, default: int) -> int:
    value = fields.get(number, default)
    if not isinstance(value, int):
        raise HFileError(f"HFile trailer field {number} is not an integer")
    return value


def _check_trailer(trailer: _Trailer, trailer_start: int) -> None:
    if trailer.codec not in (NONE, GZ):
        name = _CODEC_NAMES.get(trailer.codec, f"unknown codec {trailer.codec}")
        raise HFileError(f"HFile compression {name} is not supported (Hudi reads and writes NONE and GZ)")
    for name, offset in (("load-on-open", trailer.load_on_open_offset), ("file info", trailer.file_info_offset)):
        if not 0 <= offset < trailer_start:
            raise HFileError(f"HFile {name} offset {offset} lies outside the {trailer_start} bytes before the trailer")
    if trailer.index_levels < 1:
        raise HFileError(f"HFile claims {trailer.index_levels} data index levels")


# --------------------------------------------------------------------------------------------------- blocks


def _read_block(buf: memoryview, offset: int, codec: int, magic: bytes, size: int | None = None) -> _Block:
    """The block at `offset`, checked to be a `magic` block (of `size` bytes on disk, when the index says)."""
    if offset < 0 or offset + HEADER_SIZE > len(buf):
        raise HFileError(f"HFile block offset {offset} leaves no room for a block header in {len(buf)} bytes")
    found, on_disk, raw_size, _, _, _, data_end = _HEADER.unpack_from(buf, offset)
    if found == ENCODED_DATA_MAGIC and magic == DATA_MAGIC:
        raise HFileError(f"HFile block at {offset} is an encoded data block (HBase data-block encoding): not supported")
    if found != magic:
        raise HFileError(f"HFile block at {offset}: expected {magic.decode()} but found {found!r}")
    if size is not None and size != HEADER_SIZE + on_disk:
        raise HFileError(f"HFile block at {offset} is {HEADER_SIZE + on_disk} bytes on disk but its index entry says {size}")
    if raw_size < 0 or not HEADER_SIZE <= data_end <= HEADER_SIZE + on_disk or offset + HEADER_SIZE + on_disk > len(buf):
        raise HFileError(f"HFile block at {offset} has impossible sizes (on disk {on_disk}, data end {data_end}, "
                         f"uncompressed {raw_size}) for a {len(buf)}-byte file")
    stored = bytes(buf[offset + HEADER_SIZE : offset + data_end])
    payload = stored if codec == NONE else _gunzip(stored, offset)
    if len(payload) != raw_size:
        raise HFileError(f"HFile block at {offset} holds {len(payload)} bytes where its header says {raw_size}")
    return _Block(found, payload)


def _gunzip(stored: bytes, offset: int) -> bytes:
    try:
        return gzip.decompress(stored)
    except (OSError, EOFError, zlib.error) as exc:
        raise HFileError(f"HFile block at {offset} does not decompress (GZ): {exc}") from None


def _data_block_entries(buf: memoryview, trailer: _Trailer) -> list[tuple[int, int]]:
    """(offset, on-disk size) of every data block, in key order: the root index, walked down its levels."""
    root = _read_block(buf, trailer.load_on_open_offset, trailer.codec, ROOT_INDEX_MAGIC)
    entries = _root_index_entries(root.payload, trailer.data_index_count)
    for level in range(trailer.index_levels - 1):
        # Below the root, every level but the last is intermediate; the last is the leaf level.
        magic = LEAF_INDEX_MAGIC if level == trailer.index_levels - 2 else INTERMEDIATE_INDEX_MAGIC
        entries = [entry for offset, size in entries
                   for entry in _non_root_index_entries(_read_block(buf, offset, trailer.codec, magic, size))]
    return entries


def _root_index_entries(payload: bytes, count: int) -> list[tuple[int, int]]:
    """Root index: `count` × (int64 offset, int32 size, vlong key length, key). Multi-level roots carry a mid-key
    record after the entries, which a full read does not need."""
    entries: list[tuple[int, int]] = []
    pos = 0
    for i in range(count):
        if pos + _INDEX_ENTRY.size > len(payload):
            raise HFileError(f"HFile root index ends at entry {i} of {count}")
        entries.append(_INDEX_ENTRY.unpack_from(payload, pos))
        key_length, pos = _vlong(payload, pos + _INDEX_ENTRY.size)
        pos += key_length
        if key_length < 0 or pos > len(payload):
            raise HFileError(f"HFile root index entry {i} has a key of {key_length} bytes past the block end")
    return entries


def _non_root_index_entries(block: _Block) -> list[tuple[int, int]]:
    """Leaf / intermediate index: int32 n, (n + 1) int32 entry offsets (relative to the entries), then the n
    entries, each int64 offset, int32 size, key."""
    payload = block.payload
    if len(payload) < 4:
        raise HFileError(f"HFile {block.magic.decode()} index block of {len(payload)} bytes has no entry count")
    (count,) = struct.unpack_from(">i", payload, 0)
    base = 4 + 4 * (count + 1)
    if count < 0 or base > len(payload):
        raise HFileError(f"HFile {block.magic.decode()} index block claims {count} entries in {len(payload)} bytes")
    starts = struct.unpack_from(f">{count + 1}i", payload, 4)
    entries: list[tuple[int, int]] = []
    for i in range(count):
        at = base + starts[i]
        if starts[i] < 0 or starts[i + 1] < starts[i] + _INDEX_ENTRY.size or base + starts[i + 1] > len(payload):
            raise HFileError(f"HFile {block.magic.decode()} index entry {i} lies outside its block")
        entries.append(_INDEX_ENTRY.unpack_from(payload, at))
    return entries


# --------------------------------------------------------------------------------------------------- file info


def _read_file_info(block: _Block) -> dict[str, bytes]:
    """FILEINF2 payload: "PBUF", then a varint-delimited InfoProto (repeated BytesBytesPair {first, second})."""
    payload = memoryview(block.payload)
    if bytes(payload[:4]) != _FILE_INFO_PREFIX:
        raise HFileError("HFile file-info block does not start with PBUF")
    length, pos = _varint(payload, 4)
    if pos + length > len(payload):
        raise HFileError(f"HFile file-info message of {length} bytes runs past its block")
    info: dict[str, bytes] = {}
    for number, entry in _proto_fields(payload[pos : pos + length]):
        if number == 1 and isinstance(entry, bytes):
            pair = dict(_proto_fields(memoryview(entry)))
            key, value = pair.get(1, b""), pair.get(2, b"")
            if isinstance(key, bytes) and isinstance(value, bytes):
                info[key.decode("utf-8", "replace")] = value
    return info


def _check_cell_format(info: dict[str, bytes]) -> None:
    """Refuse cell layouts the one-byte-memstore-timestamp cell reader would misread (Hudi writes neither)."""
    version = info.get(_KEY_VALUE_VERSION_KEY)
    max_mvcc = info.get(_MAX_MVCC_KEY, b"")
    if version is not None and int.from_bytes(version[:4], "big") == 1 and int.from_bytes(max_mvcc[:8], "big") > 0:
        raise HFileError("HFile cells carry memstore (MVCC) timestamps, which Hudi never writes; not supported")
    if _MAX_TAGS_KEY in info:
        raise HFileError("HFile cells carry HBase tags, which Hudi never writes; not supported")


# --------------------------------------------------------------------------------------------------- cells


def _read_cells(payload: bytes, block_offset: int, keys: list[bytes], values: list[bytes]) -> None:
    """Append each cell's row key and value; the cells must fill the payload exactly."""
    pos, end = 0, len(payload)
    while pos < end:
        if pos + _CELL.size > end:
            raise HFileError(f"HFile data block at {block_offset}: cell at {pos} is cut off in its length fields")
        key_length, value_length = _CELL.unpack_from(payload, pos)
        key_at = pos + _CELL.size
        value_at = key_at + key_length
        pos = value_at + value_length + 1   # + the one-byte memstore timestamp (vlong 0)
        if key_length < _INT16.size or value_length < 0 or pos > end:
            raise HFileError(f"HFile data block at {block_offset}: cell with key length {key_length} and value "
                             f"length {value_length} runs past the block's {end} bytes")
        (row_length,) = _INT16.unpack_from(payload, key_at)
        if not 0 <= row_length <= key_length - _INT16.size:
            raise HFileError(f"HFile data block at {block_offset}: row length {row_length} exceeds its key")
        if payload[pos - 1] != 0:
            raise HFileError(f"HFile data block at {block_offset}: cell memstore timestamp is not 0")
        keys.append(payload[key_at + _INT16.size : key_at + _INT16.size + row_length])
        values.append(payload[value_at : value_at + value_length])


# --------------------------------------------------------------------------------------------------- varints


def _varint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """A protobuf base-128 varint at `pos`: (value, position after it)."""
    value = shift = 0
    while shift < 64:
        if pos >= len(buf):
            raise HFileError("protobuf varint runs past its buffer")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise HFileError("protobuf varint longer than 10 bytes")


def _proto_fields(buf: memoryview) -> list[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: varints as int, length-delimited fields as bytes."""
    fields: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            fields.append((number, value))
            continue
        if wire == 2:
            length, pos = _varint(buf, pos)
        elif wire in _FIXED_WIDTHS:   # fixed64 / fixed32: no HFile message uses them, but they are legal
            length = _FIXED_WIDTHS[wire]
        else:
            raise HFileError(f"protobuf field {number} has unsupported wire type {wire}")
        if pos + length > len(buf):
            raise HFileError(f"protobuf field {number} runs past its message")
        fields.append((number, bytes(buf[pos : pos + length])))
        pos += length
    return fields


def _vlong(buf: bytes, pos: int) -> tuple[int, int]:
    """A Hadoop WritableUtils vlong at `pos`: (value, position after it)."""
    if pos >= len(buf):
        raise HFileError("vlong runs past its buffer")
    first = buf[pos] - 256 if buf[pos] > 127 else buf[pos]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)   # bytes including the first
    if pos + size > len(buf):
        raise HFileError("vlong runs past its buffer")
    value = int.from_bytes(buf[pos + 1 : pos + size], "big")
    return (~value if negative else value), pos + size
