"""Avro record codec for the content of a Hudi AVRO_DATA_BLOCK (hudi-format-facts.md, section 1.4).

Content layout::

    int32 BE blockContentVersion (= 3)
    int32 BE recordCount
    repeat recordCount: int32 BE len, then `len` bytes of one Avro binary datum (writer schema, no container)

Flat record schemas whose fields are primitives (or nullable unions of one primitive) are coded
column-at-a-time with numpy + pyarrow; per-record Python Avro is ~8x slower
(performance-anchors.md). Any other schema goes through fastavro, which is also the byte-level
reference the vectorized path must match.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import pyarrow as pa

from engine.errors import TidemarkError

BLOCK_CONTENT_VERSION = 3
_HEADER = struct.Struct(">ii")
_INT32 = struct.Struct(">i")


class AvroCodecError(TidemarkError):
    """An Avro schema or data-block content that Tidemark cannot encode or decode."""


# --------------------------------------------------------------------------- schema mapping

_PRIMITIVE_TO_ARROW: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}

# logicalType -> (required Avro base type, arrow type)
_LOGICAL_TO_ARROW: dict[str, tuple[str, pa.DataType]] = {
    "timestamp-millis": ("long", pa.timestamp("ms", tz="UTC")),
    "timestamp-micros": ("long", pa.timestamp("us", tz="UTC")),
    "local-timestamp-millis": ("long", pa.timestamp("ms")),
    "local-timestamp-micros": ("long", pa.timestamp("us")),
    "date": ("int", pa.date32()),
    "time-millis": ("int", pa.time32("ms")),
    "time-micros": ("long", pa.time64("us")),
}


def _nullable(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


def _arrow_type_to_avro(dtype: pa.DataType, column: str, name: str, namespace: str) -> Any:
    """Avro type (without the null union) for one arrow type; `column` is only for error messages."""
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_int8(dtype) or pa.types.is_int16(dtype) or pa.types.is_int32(dtype):
        return "int"
    if pa.types.is_int64(dtype):
        return "long"
    if pa.types.is_float32(dtype):
        return "float"
    if pa.types.is_float64(dtype):
        return "double"
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "bytes"
    if pa.types.is_timestamp(dtype) and dtype.unit in ("ms", "us"):
        # Hudi/Spark write both aware and naive timestamps as the UTC-based logical types.
        logical = "timestamp-millis" if dtype.unit == "ms" else "timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_date32(dtype):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_decimal128(dtype):
        return {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision, "scale": dtype.scale}
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        items = _arrow_type_to_avro(dtype.value_type, column, f"{name}_{column}", namespace)
        return {"type": "array", "items": _nullable(items)}
    if pa.types.is_struct(dtype):
        rec_name = f"{name}_{column}"
        fields = [
            {"name": f.name, "type": _nullable(_arrow_type_to_avro(f.type, f.name, rec_name, namespace)), "default": None}
            for f in dtype
        ]
        return {"type": "record", "name": rec_name, "namespace": namespace, "fields": fields}
    raise AvroCodecError(f"column {column!r}: arrow type {dtype} has no Avro mapping")


def arrow_to_avro_schema(schema: pa.Schema, name: str, namespace: str) -> dict:
    """Avro record schema for `schema`; every field is ["null", T] with default null (Hudi's convention)."""
    fields = [
        {"name": f.name, "type": _nullable(_arrow_type_to_avro(f.type, f.name, name, namespace)), "default": None}
        for f in schema
    ]
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def _full_name(schema: dict, namespace: str | None) -> tuple[str, str | None]:
    name = schema["name"]
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    ns = schema.get("namespace", namespace)
    return (f"{ns}.{name}" if ns else name), ns


def _logical_to_arrow(avro_type: dict, where: str) -> pa.DataType | None:
    logical = avro_type.get("logicalType")
    base = avro_type.get("type")
    if logical == "decimal" and base in ("bytes", "fixed"):
        precision, scale = int(avro_type["precision"]), int(avro_type.get("scale", 0))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if logical in _LOGICAL_TO_ARROW and _LOGICAL_TO_ARROW[logical][0] == base:
        return _LOGICAL_TO_ARROW[logical][1]
    return None  # unknown logical types degrade to their base type, as the Avro spec requires


class _ArrowTypeMapper:
    """Avro type -> (arrow type, nullable); remembers named types so later references resolve."""

    def __init__(self) -> None:
        self.named: dict[str, pa.DataType] = {}

    def map(self, avro_type: Any, where: str, namespace: str | None) -> tuple[pa.DataType, bool]:
        if isinstance(avro_type, list):
            return self._union(avro_type, where, namespace)
        return self._plain(avro_type, where, namespace), False

    def _union(self, branches: list[Any], where: str, namespace: str | None) -> tuple[pa.DataType, bool]:
        non_null = [b for b in branches if b != "null"]
        if len(non_null) != 1:
            raise AvroCodecError(
                f"field {where!r}: Avro union {json.dumps(branches)} has {len(non_null)} non-null branches; "
                "only [null, T] unions map to an arrow column"
            )
        return self._plain(non_null[0], where, namespace), len(non_null) < len(branches)

    def _plain(self, avro_type: Any, where: str, namespace: str | None) -> pa.DataType:
        if isinstance(avro_type, str):
            if avro_type in _PRIMITIVE_TO_ARROW:
                return _PRIMITIVE_TO_ARROW[avro_type]
            for key in (avro_type, f"{namespace}.{avro_type}"):
                if key in self.named:
                    return self.named[key]
            raise AvroCodecError(f"field {where!r}: unsupported or unknown Avro type {avro_type!r}")
        if isinstance(avro_type, list):
            raise AvroCodecError(f"field {where!r}: nested union {json.dumps(avro_type)} is not valid Avro")
        if not isinstance(avro_type, dict) or "type" not in avro_type:
            raise AvroCodecError(f"field {where!r}: malformed Avro type {avro_type!r}")
        return self._complex(avro_type, where, namespace)

    def _complex(self, avro_type: dict, where: str, namespace: str | None) -> pa.DataType:
        logical = _logical_to_arrow(avro_type, where)
        if logical is not None:
            if avro_type["type"] == "fixed":
                self.named[_full_name(avro_type, namespace)[0]] = logical
            return logical
        kind = avro_type["type"]
        if kind == "record":
            return self._record(avro_type, where, namespace)
        if kind == "array":
            item, nullable = self.map(avro_type["items"], f"{where}[]", namespace)
            return pa.list_(pa.field("item", item, nullable=nullable))
        if kind == "map":
            value, nullable = self.map(avro_type["values"], f"{where}{{}}", namespace)
            return pa.map_(pa.string(), pa.field("value", value, nullable=nullable))
        if kind in ("enum", "fixed"):
            dtype = pa.string() if kind == "enum" else pa.binary(int(avro_type["size"]))
            self.named[_full_name(avro_type, namespace)[0]] = dtype
            return dtype
        return self._plain(kind, where, namespace)  # {"type": "long"} and friends

    def _record(self, avro_type: dict, where: str, namespace: str | None) -> pa.DataType:
        full, ns = _full_name(avro_type, namespace)
        fields = []
        for f in avro_type.get("fields", []):
            dtype, nullable = self.map(f["type"], f"{where}.{f['name']}" if where else f["name"], ns)
            fields.append(pa.field(f["name"], dtype, nullable=nullable))
        struct = pa.struct(fields)
        self.named[full] = struct
        return struct


def _as_schema_dict(avro_schema: dict | str) -> dict:
    if isinstance(avro_schema, str):
        try:
            avro_schema = json.loads(avro_schema)
        except json.JSONDecodeError as exc:
            raise AvroCodecError(f"Avro schema is not valid JSON: {exc}") from exc
    if not isinstance(avro_schema, dict) or avro_schema.get("type") != "record":
        raise AvroCodecError("an Avro data block schema must be a record schema")
    return avro_schema


def avro_to_arrow_schema(avro_schema: dict) -> pa.Schema:
    """Arrow schema for an Avro record schema; unions may list null first or last."""
    avro_schema = _as_schema_dict(avro_schema)
    struct = _ArrowTypeMapper()._record(avro_schema, "", None)
    return pa.schema(list(struct))


# --------------------------------------------------------------------------- content framing


def _content_view(content: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(content)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def _read_header(view: memoryview) -> int:
    """Validate the version prefix and return the record count."""
    if len(view) < _HEADER.size:
        raise AvroCodecError(f"Avro data block content is {len(view)} bytes, shorter than its 8-byte header")
    version, count = _HEADER.unpack_from(view, 0)
    if version != BLOCK_CONTENT_VERSION:
        raise AvroCodecError(f"Avro data block content version {version} is not supported (expected 3)")
    if count < 0:
        raise AvroCodecError(f"Avro data block declares a negative record count {count}")
    # Every record needs at least its 4-byte length prefix: reject absurd counts before allocating.
    if count * 4 > len(view) - _HEADER.size:
        raise AvroCodecError(f"Avro data block declares {count} records but holds only {len(view)} bytes")
    return count


def _record_spans(view: memoryview, count: int) -> tuple[list[int], list[int]]:
    """Start offset and length of each record datum; the length prefixes chain sequentially."""
    unpack, end = _INT32.unpack_from, len(view)
    starts: list[int] = [0] * count
    lengths: list[int] = [0] * count
    pos = _HEADER.size
    for i in range(count):
        if pos + 4 > end:
            raise AvroCodecError(f"Avro data block truncated in the length prefix of record {i}")
        (length,) = unpack(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise AvroCodecError(f"Avro data block record {i} has length {length}, beyond the content end")
        starts[i], lengths[i] = pos, length
        pos += length
    if pos != end:
        raise AvroCodecError(f"Avro data block has {end - pos} trailing bytes after {count} records")
    return starts, lengths


# --------------------------------------------------------------------------- fastavro fallback


def _parse_for_fastavro(avro_schema: dict) -> Any:
    try:
        return fastavro.parse_schema(avro_schema, _write_hint=False)
    except Exception as exc:  # fastavro raises several unrelated types for bad schemas
        raise AvroCodecError(f"invalid Avro schema: {exc}") from exc


def _maps_to_dicts(value: Any, dtype: pa.DataType) -> Any:
    """arrow to_pylist yields maps as [(k, v)]; fastavro wants dicts (recursively)."""
    if value is None:
        return None
    if pa.types.is_map(dtype):
        return {k: _maps_to_dicts(v, dtype.item_type) for k, v in value}
    if pa.types.is_struct(dtype):
        return {f.name: _maps_to_dicts(value[f.name], f.type) for f in dtype}
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [_maps_to_dicts(v, dtype.value_type) for v in value]
    return value


def _has_map(dtype: pa.DataType) -> bool:
    if pa.types.is_map(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_has_map(f.type) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _has_map(dtype.value_type)
    return False


def _table_rows(table: pa.Table) -> list[dict]:
    rows = table.to_pylist()
    map_fields = [f for f in table.schema if _has_map(f.type)]
    for row in rows:
        for f in map_fields:
            row[f.name] = _maps_to_dicts(row[f.name], f.type)
    return rows


def _encode_fastavro(table: pa.Table, avro_schema: dict) -> bytes:
    parsed = _parse_for_fastavro(avro_schema)
    out = io.BytesIO()
    out.write(_HEADER.pack(BLOCK_CONTENT_VERSION, table.num_rows))
    datum = io.BytesIO()
    for i, row in enumerate(_table_rows(table)):
        datum.seek(0)
        datum.truncate()
        try:
            fastavro.schemaless_writer(datum, parsed, row)
        except Exception as exc:
            raise AvroCodecError(f"record {i} does not fit the Avro schema: {exc}") from exc
        out.write(_INT32.pack(datum.tell()))
        out.write(datum.getbuffer())
    return out.getvalue()


def _decode_fastavro(view: memoryview, count: int, avro_schema: dict, target: pa.Schema) -> pa.Table:
    parsed = _parse_for_fastavro(avro_schema)
    starts, lengths = _record_spans(view, count)
    rows = []
    for i, (start, length) in enumerate(zip(starts, lengths)):
        datum = io.BytesIO(view[start : start + length])
        try:
            rows.append(fastavro.schemaless_reader(datum, parsed, None))
        except Exception as exc:
            raise AvroCodecError(f"Avro data block record {i} is garbled: {exc!r}") from exc
        if datum.tell() != length:
            raise AvroCodecError(f"Avro data block record {i} decodes to {datum.tell()} of its {length} bytes")
    try:
        return pa.Table.from_pylist(rows, schema=target)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise AvroCodecError(f"decoded Avro records do not convert to arrow: {exc}") from exc


# --------------------------------------------------------------------------- public codec


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """Select the schema's columns in Avro field order, cast to the canonical arrow types."""
    missing = [name for name in target.names if name not in table.column_names]
    if missing:
        raise AvroCodecError(f"table lacks column(s) {missing} required by the Avro schema")
    columns = []
    for field in target:
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            raise AvroCodecError(f"column {field.name!r} has nulls but its Avro type is not nullable")
        try:
            columns.append(column.cast(field.type))
        except (pa.ArrowException, ValueError) as exc:
            raise AvroCodecError(f"column {field.name!r} ({column.type}) does not cast to {field.type}: {exc}") from exc
    return pa.Table.from_arrays(columns, schema=target)


def encode_data_block_content(table: pa.Table, avro_schema: dict) -> bytes:
    """Full AVRO_DATA_BLOCK content: version 3, record count, length-prefixed Avro datums."""
    avro_schema = _as_schema_dict(avro_schema)
    table = _conform(table, avro_to_arrow_schema(avro_schema))
    return _encode_fastavro(table, avro_schema)


def decode_data_block_content(content: bytes | memoryview, avro_schema: dict) -> pa.Table:
    """Records of an AVRO_DATA_BLOCK content as a table with avro_to_arrow_schema(avro_schema)."""
    avro_schema = _as_schema_dict(avro_schema)
    target = avro_to_arrow_schema(avro_schema)
    view = _content_view(content)
    count = _read_header(view)
    return _decode_fastavro(view, count, avro_schema, target)
