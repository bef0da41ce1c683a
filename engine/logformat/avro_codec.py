"""Avro record codec for the content of a Hudi AVRO_DATA_BLOCK (docs/HUDI-FORMAT.md §1.4).

Content layout::

    int32 BE blockContentVersion (= 3)
    int32 BE recordCount
    repeat recordCount: int32 BE len, then `len` bytes of one Avro binary datum (writer schema, no container)

Flat record schemas whose fields are primitives (or nullable unions of one primitive) are coded
column-at-a-time with numpy + pyarrow; per-record Avro (fastavro) is ~10x slower
(BENCHMARKS.md, bench_avro_codec). Any other schema goes through fastavro, which is also the byte-level
reference the vectorized path must match.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pyarrow as pa

from engine.logformat.avro_framing import _HEADER, _INT32, BLOCK_CONTENT_VERSION, _content_view, _read_header, _record_spans
from engine.logformat.avro_schema_map import AvroCodecError, _as_schema_dict, avro_to_arrow_schema, has_map
from engine.logformat.avro_vectorized import _decode_vectorized, _encode_vectorized, _vector_plan

# --------------------------------------------------------------------------- fastavro fallback


def _without_uuid(avro_type: Any) -> Any:
    """Drop logicalType uuid: arrow keeps it as a string, while fastavro would return uuid.UUID."""
    if isinstance(avro_type, list):
        return [_without_uuid(t) for t in avro_type]
    if not isinstance(avro_type, dict):
        return avro_type
    cleaned = {k: _without_uuid(v) for k, v in avro_type.items() if not (k == "logicalType" and v == "uuid")}
    return cleaned


def _parse_for_fastavro(avro_schema: dict[str, Any]) -> Any:
    """fastavro's parsed schema, marked as parsed (the write hint): without the mark fastavro parses the schema
    again for every record it writes or reads (100k records with a map column: encode 2.3 -> 2.0 s, decode
    1.7 -> 1.1 s)."""
    try:
        return fastavro.parse_schema(_without_uuid(avro_schema))
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

def _table_rows(table: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.to_pylist()
    map_fields = [f for f in table.schema if has_map(f.type)]
    for row in rows:
        for f in map_fields:
            row[f.name] = _maps_to_dicts(row[f.name], f.type)
    return rows


def _encode_fastavro(table: pa.Table, avro_schema: dict[str, Any]) -> bytes:
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


def _decode_fastavro(view: memoryview, count: int, avro_schema: dict[str, Any], target: pa.Schema) -> pa.Table:
    parsed = _parse_for_fastavro(avro_schema)
    starts, ends = _record_spans(view, count)
    rows = []
    for i, (start, length) in enumerate(zip(starts.tolist(), (ends - starts).tolist())):
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


def encode_data_block_parts(table: pa.Table, avro_schema: dict[str, Any]) -> list[bytes | memoryview]:
    """AVRO_DATA_BLOCK content as consecutive pieces (version 3, record count, length-prefixed Avro datums),
    uncopied: the block's framing joins them with its own bytes in one copy."""
    avro_schema = _as_schema_dict(avro_schema)
    target = avro_to_arrow_schema(avro_schema)
    table = _conform(table, target)
    plans = _vector_plan(avro_schema, target)
    if plans is None:
        return [_encode_fastavro(table, avro_schema)]
    return _encode_vectorized(table, plans)


def encode_data_block_content(table: pa.Table, avro_schema: dict[str, Any]) -> bytes:
    """Full AVRO_DATA_BLOCK content as one bytes object."""
    return b"".join(encode_data_block_parts(table, avro_schema))


def decode_data_block_content(content: bytes | memoryview, avro_schema: dict[str, Any]) -> pa.Table:
    """Records of an AVRO_DATA_BLOCK content as a table with avro_to_arrow_schema(avro_schema)."""
    avro_schema = _as_schema_dict(avro_schema)
    target = avro_to_arrow_schema(avro_schema)
    view = _content_view(content)
    count = _read_header(view)
    plans = _vector_plan(avro_schema, target)
    if plans is None:
        return _decode_fastavro(view, count, avro_schema, target)
    return _decode_vectorized(view, count, plans, target)
