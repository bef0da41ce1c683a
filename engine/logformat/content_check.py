"""Cheap content checks of framed blocks: the first bytes of each block's content, never a decode.

A header scan proves a block's framing and says nothing about its content; a decode proves the content but
costs the whole block. This sits in between (for `tidemark show`, metrics, compaction planning and read
planning): one 8-byte pread per data or delete block checks what every decoder checks first, and flags only
what the decoder would reject too —
- Avro data: content version 3, a record count ≥ 0 that fits the content (≥ 4 bytes per record; 0 records
  means exactly the 8-byte prefix);
- delete: content version 3 and a datum length that fits the content;
- Parquet data: the content starts with the Parquet magic `PAR1`;
- HFile data: the content starts with an HFile block magic that can begin an HFile (`DATABLK*`, mostly).
Bytes flipped deeper inside the records pass this check; a read or a compaction finds them when it decodes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from engine.io import storage
from engine.logformat.blocks import CONTENT_VERSION, BlockInfo, BlockType, CorruptBlock
from engine.logformat.hfile import FIRST_BLOCK_MAGICS

_PREFIX = struct.Struct(">ii")
_PARQUET_MAGIC = b"PAR1"
_CHECKED = (BlockType.AVRO_DATA, BlockType.DELETE, BlockType.PARQUET_DATA, BlockType.HFILE_DATA)


def content_faults(path: str, blocks: Sequence[BlockInfo], heads: Mapping[int, bytes] | None = None) -> list[CorruptBlock]:
    """A CorruptBlock (content=True) for every block of `path` whose content prefix no decoder would accept."""
    todo = [b for b in blocks if b.block_type in _CHECKED]
    if not todo:
        return []
    faults: list[CorruptBlock] = []
    known = heads or {}
    fd: storage.RangeReader | None = None
    try:
        for info in todo:
            head = known.get(info.offset)
            if head is None:
                fd = fd or storage.RangeReader(path)
                head = fd.pread(min(8, info.content_length), info.content_offset)
            problem = _problem(info, head)
            if problem is not None:
                reason = f"content of {info.block_type.name} block at offset {info.offset} of {path} is corrupt: {problem}"
                faults.append(CorruptBlock(path, info.offset, reason, info.end_offset, info.instant_time, content=True))
    finally:
        if fd is not None:
            fd.close()
    return faults


def _problem(info: BlockInfo, head: bytes) -> str | None:
    if info.block_type is BlockType.PARQUET_DATA:
        return None if head[:4] == _PARQUET_MAGIC else "it does not start with the Parquet magic PAR1"
    if info.block_type is BlockType.HFILE_DATA:
        return None if bytes(head[:8]) in FIRST_BLOCK_MAGICS else "it does not start with an HFile data, meta or root index block"
    if len(head) < _PREFIX.size:
        return f"{info.content_length} bytes, shorter than the 8-byte content prefix"
    version, number = _PREFIX.unpack(head)
    if version != CONTENT_VERSION:
        return f"content version {version}, expected {CONTENT_VERSION}"
    room = info.content_length - _PREFIX.size
    if info.block_type is BlockType.DELETE:
        return None if 0 <= number <= room else f"delete datum length {number} does not fit in {room} bytes"
    if number < 0 or number * 4 > room or (number == 0 and room != 0):
        return f"record count {number} does not fit in {room} bytes of records"
    return None
