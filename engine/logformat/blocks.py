"""Log-format vocabulary: block/header ordinals, the on-disk constants and the result types.

This mirrors HoodieLogFormat version 1 (docs/HUDI-FORMAT.md §1.1-1.3). Ordinals are serialised by value, so the
enums must never be reordered.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1  # HoodieLogFormat.CURRENT_VERSION; 0 (legacy, no header/footer) is never written by 0.14+
CONTENT_VERSION = 3  # HoodieLogBlock.version: the only data/delete content version hudi-rs accepts

# Block framing sizes. blockLength counts everything after its own int64, trailer included.
MAGIC_LEN = 6
LENGTH_FIELD_LEN = 8
PREFIX_LEN = MAGIC_LEN + LENGTH_FIELD_LEN  # bytes before the version field
MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8  # version, type, empty header, contentLength, empty footer, trailer

# Top-level attributes of the SCHEMA header JSON (docs/HUDI-FORMAT.md §1.7). A new header ordinal would make both the
# Java reader (ArrayIndexOutOfBounds) and hudi-rs ("Invalid metadata key") fail; unknown schema attributes are legal Avro.
MIN_EVENT_TIME_ATTR = "tidemark.minEventTime"
MAX_EVENT_TIME_ATTR = "tidemark.maxEventTime"
# On a DELETE block's SCHEMA header: each delete's event time, in block order (engine.logformat.deletes). Delete
# records have no field for it (HoodieDeleteRecord: key, partition, ordering value), and exact-mode compaction
# must know on which side of T each delete falls.
EVENT_TIMES_ATTR = "tidemark.eventTimes"
EVENT_TIME_COLUMN = "event_time_ms"   # the decoded column of a DeleteBlock's table (null: unknown)

ROLLBACK_COMMAND = "0"  # HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK ordinal, as a string header value


class BlockType(enum.IntEnum):
    """HoodieLogBlockType ordinals."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


# The block types that carry records of the table (an HFile block's cells are Avro records too).
DATA_BLOCK_TYPES = (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE_DATA)


class HeaderKey(enum.IntEnum):
    """HoodieLogBlock.HeaderMetadataType ordinals (docs/HUDI-FORMAT.md §1.2). Readers reject ordinals above 8."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


@dataclass(frozen=True)
class BlockInfo:
    """What a header-only scan learns about one block, without touching its content."""

    path: str
    offset: int  # offset of the block's MAGIC
    size: int  # bytes on disk: 6 + 8 + blockLength
    block_type: BlockType
    headers: dict[int, str] = field(hash=False)
    content_offset: int
    content_length: int

    @property
    def end_offset(self) -> int:
        return self.offset + self.size

    @property
    def instant_time(self) -> str | None:
        return self.headers.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        return self.headers.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema_json(self) -> str | None:
        return self.headers.get(HeaderKey.SCHEMA)

    @property
    def is_partial(self) -> bool:
        """A Hudi 1.x partial-update block: its SCHEMA holds only the columns the write changed. Java reads the
        header as `Boolean.parseBoolean`, so only "true" (any case) counts."""
        return (self.headers.get(HeaderKey.IS_PARTIAL) or "").lower() == "true"

    @cached_property
    def _event_time_bounds(self) -> tuple[int | None, int | None]:
        return event_time_bounds(self.schema_json)

    @property
    def min_event_time(self) -> int | None:
        """Epoch millis from MIN_EVENT_TIME_ATTR; None for blocks not written by Tidemark."""
        return self._event_time_bounds[0]

    @property
    def max_event_time(self) -> int | None:
        return self._event_time_bounds[1]


@dataclass(frozen=True)
class CorruptBlock:
    """A region that failed the length/trailer/MAGIC checks (or whose content could not be decoded)."""

    path: str
    offset: int
    reason: str
    next_offset: int  # where scanning resumed: the next MAGIC, or EOF
    instant: str | None = None  # its INSTANT_TIME header, when the header could still be read
    content: bool = False  # framing intact, the content is what failed (decode or content-prefix check)


@dataclass
class DataBlock:
    info: BlockInfo
    records: pa.Table

    @property
    def partial(self) -> bool:
        """The records hold only the block's columns; the others keep their previous values (not null)."""
        return self.info.is_partial


@dataclass
class DeleteBlock:
    info: BlockInfo
    deletes: pa.Table  # record_key, partition_path, ordering_value, always_wins, event_time_ms


@dataclass
class CommandBlock:
    info: BlockInfo  # rollback of info.target_instant_time


@dataclass
class LogFileScan:
    path: str
    blocks: list[BlockInfo]
    corrupt: list[CorruptBlock]
    # block offset -> the first bytes of its content, when the scan's window held them (the content check
    # then needs no read of its own: on an object store, no extra ranged GET)
    content_heads: dict[int, bytes] = field(default_factory=dict)


@dataclass
class LogFileContents:
    path: str
    blocks: list[DataBlock | DeleteBlock | CommandBlock]
    corrupt: list[CorruptBlock]


_FAST_PREFIX = '{"' + MIN_EVENT_TIME_ATTR + '":'
_DECODER = json.JSONDecoder()


def event_time_bounds(schema_json: str | None) -> tuple[int | None, int | None]:
    """Read the tidemark event-time attributes from a SCHEMA header without parsing the whole schema if possible.

    Our writer puts both attributes first in the JSON object, so a planner touching thousands of blocks only
    parses ~60 characters per block. Anything else (other writers, reordered JSON) falls back to json.loads.
    """
    if not schema_json or MIN_EVENT_TIME_ATTR not in schema_json and MAX_EVENT_TIME_ATTR not in schema_json:
        return None, None
    if schema_json.startswith(_FAST_PREFIX):
        bounds = _fast_bounds(schema_json)
        if bounds is not None:
            return bounds
    try:
        doc = json.loads(schema_json)
    except ValueError:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    return _as_millis(doc.get(MIN_EVENT_TIME_ATTR)), _as_millis(doc.get(MAX_EVENT_TIME_ATTR))


def _fast_bounds(schema_json: str) -> tuple[int | None, int | None] | None:
    """Decode the leading `"min":v,"max":v` pair; None if the layout is not exactly ours."""
    try:
        pos = len(_FAST_PREFIX)
        lo, pos = _DECODER.raw_decode(schema_json, pos)
        prefix = ',"' + MAX_EVENT_TIME_ATTR + '":'
        if not schema_json.startswith(prefix, pos):
            return None
        hi, _ = _DECODER.raw_decode(schema_json, pos + len(prefix))
    except ValueError:
        return None
    return _as_millis(lo), _as_millis(hi)


def _as_millis(value: object) -> int | None:
    """Attribute values are written as decimal strings (what hudi 0.5.0 was tested with); accept numbers too."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
