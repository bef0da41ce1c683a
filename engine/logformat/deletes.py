"""DELETE_BLOCK content, version 3: int32 3, int32 len, Avro datum of HoodieDeleteRecordList (docs/HUDI-FORMAT.md §1.5).

orderingVal is Java's wrapper union (0 null, 1 BooleanWrapper ... 11 TimestampMicrosWrapper); each wrapper is a
record {value: T}, so its binary form is the bare value. We write it with fastavro and read it with a small
hand-written decoder, because a decoder must name an unknown (newer Hudi, >= 12) branch precisely.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import io
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

from engine.errors import TidemarkError
from engine.logformat.blocks import CONTENT_VERSION

_NS = "org.apache.hudi.avro.model"

# (wrapper name, value schema, arrow type) in union order, starting at union index 1.
_WRAPPERS: list[tuple[str, object, pa.DataType]] = [
    ("BooleanWrapper", "boolean", pa.bool_()),
    ("IntWrapper", "int", pa.int32()),
    ("LongWrapper", "long", pa.int64()),
    ("FloatWrapper", "float", pa.float32()),
    ("DoubleWrapper", "double", pa.float64()),
    ("BytesWrapper", "bytes", pa.binary()),
    ("StringWrapper", "string", pa.string()),
    ("DateWrapper", "int", pa.date32()),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}, pa.decimal128(30, 15)),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
    ("TimestampMicrosWrapper", "long", pa.timestamp("us")),
]
INT_BRANCH, LONG_BRANCH, DOUBLE_BRANCH, STRING_BRANCH = 2, 3, 5, 7
# Java's default ordering value is Int 0: a delete holding it (or none) is a processing-time delete that always
# wins (HoodieMergedLogRecordScanner compares `orderingVal.equals(0)`, true for an Integer only). A Long, Float or
# Double 0 is an ordering value like any other and competes (measured: hudi 0.5.0 keeps a record of ordering 1
# over a Long-0 delete).
_NUMERIC_BRANCHES = {2, 3, 4, 5}
_EPOCH_DATE = datetime.date(1970, 1, 1)

DELETE_SCHEMA = {
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": _NS,
    "fields": [
        {
            "name": "deleteRecordList",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "HoodieDeleteRecord",
                    "namespace": _NS,
                    "fields": [
                        {"name": "recordKey", "type": ["null", "string"], "default": None},
                        {"name": "partitionPath", "type": ["null", "string"], "default": None},
                        {
                            "name": "orderingVal",
                            "type": ["null"]
                            + [
                                {"type": "record", "name": name, "namespace": _NS, "fields": [{"name": "value", "type": t}]}
                                for name, t, _ in _WRAPPERS
                            ],
                            "default": None,
                        },
                    ],
                },
            },
        }
    ],
}
_PARSED = fastavro.parse_schema(DELETE_SCHEMA)


def encode_delete_content(
    record_keys: Sequence[str],
    partition_paths: Sequence[str],
    ordering_values: Sequence[int | float | str | None] | None,
) -> bytes:
    """Content bytes of a delete block; ordering None => IntWrapper 0 for all (what Spark SQL DELETE writes)."""
    if len(record_keys) != len(partition_paths):
        raise TidemarkError(f"delete block: {len(record_keys)} record keys but {len(partition_paths)} partition paths")
    branch, values = _ordering_branch(ordering_values, len(record_keys))
    wrapper = f"{_NS}.{_WRAPPERS[branch - 1][0]}"
    records = [
        {"recordKey": k, "partitionPath": p, "orderingVal": (wrapper, {"value": v})}
        for k, p, v in zip(record_keys, partition_paths, values)
    ]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED, {"deleteRecordList": records})
    datum = buf.getvalue()
    return struct.pack(">ii", CONTENT_VERSION, len(datum)) + datum


def _ordering_branch(values: Sequence[int | float | str | None] | None, n: int) -> tuple[int, list[int | float | str | None]]:
    """One union branch for the whole block (older hudi-rs types the column from the first record)."""
    if values is None or all(v is None for v in values):
        if values is not None and len(values) != n:
            raise TidemarkError(f"delete block: {n} record keys but {len(values)} ordering values")
        return INT_BRANCH, [0] * n
    if len(values) != n:
        raise TidemarkError(f"delete block: {n} record keys but {len(values)} ordering values")
    kinds = {type(v) for v in values if v is not None}
    if bool in kinds or not kinds <= {int, float, str}:
        raise TidemarkError(f"delete block: unsupported ordering value types {sorted(k.__name__ for k in kinds)}")
    if str in kinds:
        if len(kinds) > 1 or any(v is None for v in values):
            raise TidemarkError("delete block: string ordering values cannot be mixed with numbers or None")
        return STRING_BRANCH, list(values)
    if any(v is None for v in values):
        # "no ordering" is Int 0, which only the Int branch holds, and a block has one branch
        raise TidemarkError("delete block: deletes without an ordering value need a block of their own")
    if float in kinds:
        return DOUBLE_BRANCH, [float(v) for v in values if v is not None]
    return LONG_BRANCH, list(values)


class _Cursor:
    """Minimal Avro binary reader over the delete datum."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where

    def long(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise TidemarkError(f"{self.where}: delete datum ends inside a varint")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TidemarkError(f"{self.where}: delete datum truncated (need {n} bytes at {self.pos})")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def bytes_(self) -> bytes:
        return self.raw(self.long())

    def string(self) -> str:
        return self.bytes_().decode("utf-8")

    def optional_string(self) -> str | None:
        idx = self.long()
        if idx == 0:
            return None
        if idx != 1:
            raise TidemarkError(f"{self.where}: bad union index {idx} for a [null,string] field")
        return self.string()


def _read_wrapper(cur: _Cursor, branch: int) -> object:
    if branch == 1:
        return cur.raw(1) != b"\x00"
    if branch in (2, 3, 10, 11):
        return cur.long()
    if branch == 4:
        return struct.unpack("<f", cur.raw(4))[0]
    if branch == 5:
        return struct.unpack("<d", cur.raw(8))[0]
    if branch == 6:
        return cur.bytes_()
    if branch == 7:
        return cur.string()
    if branch == 8:
        return _EPOCH_DATE + datetime.timedelta(days=cur.long())
    if branch == 9:
        unscaled = int.from_bytes(cur.bytes_(), "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-15)
    raise AssertionError(branch)


def decode_delete_content(content: bytes, where: str) -> pa.Table:
    """Delete block content -> table(record_key, partition_path, ordering_value, always_wins)."""
    if len(content) < 8:
        raise TidemarkError(f"{where}: delete block content is only {len(content)} bytes")
    version, length = struct.unpack_from(">ii", content, 0)
    if version != CONTENT_VERSION:
        raise TidemarkError(f"{where}: delete block content version {version} (legacy Kryo encoding) is not supported")
    if length < 0 or 8 + length > len(content):
        raise TidemarkError(f"{where}: delete datum length {length} exceeds content size {len(content)}")
    cur = _Cursor(bytes(content[8 : 8 + length]), where)
    keys: list[str | None] = []
    parts: list[str | None] = []
    branches: list[int] = []
    values: list[object] = []
    while True:
        count = cur.long()
        if count == 0:
            break
        if count < 0:  # negative count: a byte size follows (Avro block encoding)
            count = -count
            cur.long()
        for _ in range(count):
            keys.append(cur.optional_string())
            parts.append(cur.optional_string())
            branch = cur.long()
            if branch >= 12:
                raise TidemarkError(
                    f"{where}: orderingVal union index {branch} is a newer Hudi delete encoding "
                    "(e.g. ArrayWrapper for multiple ordering fields); not supported"
                )
            if branch < 0:
                raise TidemarkError(f"{where}: negative orderingVal union index {branch}")
            branches.append(branch)
            values.append(None if branch == 0 else _read_wrapper(cur, branch))
    return _deletes_table(keys, parts, branches, values)


def _deletes_table(keys: list[str | None], parts: list[str | None], branches: list[int], values: list[Any]) -> pa.Table:
    always = [b == 0 or (b == INT_BRANCH and values[i] == 0) for i, b in enumerate(branches)]
    return pa.table(
        {
            "record_key": pa.array(keys, pa.string()),
            "partition_path": pa.array(parts, pa.string()),
            "ordering_value": _ordering_array(branches, values),
            "always_wins": pa.array(always, pa.bool_()),
        }
    )


def _ordering_array(branches: list[int], values: list[Any]) -> pa.Array:
    used = {b for b in branches if b != 0}
    if not used:
        return pa.nulls(len(values))
    if len(used) == 1:
        return pa.array(values, _WRAPPERS[used.pop() - 1][2])
    if used <= {2, 3}:
        return pa.array(values, pa.int64())
    if used <= _NUMERIC_BRANCHES:
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    # Mixed non-numeric branches never come from one Java writer; keep them readable as text.
    return pa.array([None if v is None else str(v) for v in values], pa.string())


# ------------------------------------------------------------------------------------------ event times

_NO_EVENT_TIME = np.iinfo(np.int64).min   # a delete whose input row had no event time


def has_event_times(values: pa.Array | Sequence[int | None] | None) -> bool:
    if values is None:
        return False
    if isinstance(values, pa.Array):
        return bool(values.null_count < len(values))
    return any(v is not None for v in values)


def encode_event_times(values: pa.Array | Sequence[int | None]) -> str:
    """Each delete's event time (epoch ms, None unknown) as header text: base64 of zlib'd int64 little-endian.

    A header is text and a delete block may hold millions of keys: deletes of one write have close event times,
    so the compressed form stays small.
    """
    arr = values if isinstance(values, pa.Array) else pa.array(list(values), pa.int64())
    raw = arr.cast(pa.int64()).fill_null(_NO_EVENT_TIME).to_numpy(zero_copy_only=False).astype("<i8")
    return base64.b64encode(zlib.compress(raw.tobytes(), 6)).decode("ascii")


def decode_event_times(text: object, n: int, where: str) -> pa.Array:
    """The event-time attribute of a delete block holding `n` deletes -> int64 array (null: unknown)."""
    try:
        raw = zlib.decompress(base64.b64decode(str(text), validate=True))
    except (binascii.Error, zlib.error, ValueError) as exc:
        raise TidemarkError(f"{where}: delete event times do not decode ({exc})") from None
    values = np.frombuffer(raw, dtype="<i8")
    if len(values) != n:
        raise TidemarkError(f"{where}: {len(values)} delete event times for {n} deletes")
    return pa.array(values.astype(np.int64), pa.int64(), mask=values == _NO_EVENT_TIME)
