"""Avro schema <-> Arrow schema for the content of a Hudi AVRO_DATA_BLOCK (docs/HUDI-FORMAT.md §1.4): the
record schema a block declares and the Arrow schema its records decode to (engine.logformat.avro_codec)."""
from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from engine.errors import TidemarkError


class AvroCodecError(TidemarkError):
    """An Avro schema or data-block content that Tidemark cannot encode or decode."""


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
    """Avro type (without the null union) for one arrow type, as Spark's Avro converter gives Java Hudi's.

    `name` and `namespace` name the record a struct becomes: a struct field's own name in its parent record's
    full name, so nested names never collide; list items and map values take their column's, as in Spark.
    `column` is the field's path, for error messages.
    """
    primitive = _primitive_to_avro(dtype)
    if primitive is not None:
        return primitive
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return {"type": "array", "items": _nullable(_arrow_type_to_avro(dtype.value_type, f"{column}[]", name,
                                                                        namespace))}
    if pa.types.is_map(dtype):
        _check_map_keys(dtype, column)
        return {"type": "map", "values": _nullable(_arrow_type_to_avro(dtype.item_type, f"{column}{{}}", name,
                                                                       namespace))}
    if pa.types.is_struct(dtype):
        return _struct_to_avro(dtype, column, name, namespace)
    raise AvroCodecError(f"column {column!r}: arrow type {dtype} has no Avro mapping")


def _primitive_to_avro(dtype: pa.DataType) -> Any:
    """Avro type of a non-nested arrow type, or None when `dtype` is nested or has no mapping."""
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
    return None


def _check_map_keys(dtype: pa.MapType, column: str) -> None:
    """Avro maps are keyed by strings only (so are Hudi's, whose records are Avro): refuse any other key."""
    key = dtype.key_type
    if not (pa.types.is_string(key) or pa.types.is_large_string(key)):
        raise AvroCodecError(f"column {column!r}: map keys are {key}, but Avro maps (and so Hudi's) only have "
                             "string keys; cast the keys to strings, or store the entries as a list of structs")


def _struct_to_avro(dtype: pa.StructType, column: str, name: str, namespace: str) -> dict[str, Any]:
    inner = f"{namespace}.{name}"
    fields = [{"name": f.name, "type": _nullable(_arrow_type_to_avro(f.type, f"{column}.{f.name}", f.name, inner)),
               "default": None} for f in dtype]
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def arrow_to_avro_schema(schema: pa.Schema, name: str, namespace: str) -> dict[str, Any]:
    """Avro record schema for `schema`; every field is ["null", T] with default null (Hudi's convention)."""
    inner = f"{namespace}.{name}"
    fields = [
        {"name": f.name, "type": _nullable(_arrow_type_to_avro(f.type, f.name, f.name, inner)), "default": None}
        for f in schema
    ]
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def _full_name(schema: dict[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = schema["name"]
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    ns = schema.get("namespace", namespace)
    return (f"{ns}.{name}" if ns else name), ns


def _logical_to_arrow(avro_type: dict[str, Any], where: str) -> pa.DataType | None:
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
            if avro_type == "null":
                return pa.null()
            for key in (avro_type, f"{namespace}.{avro_type}"):
                if key in self.named:
                    return self.named[key]
            raise AvroCodecError(f"field {where!r}: unsupported or unknown Avro type {avro_type!r}")
        if isinstance(avro_type, list):
            raise AvroCodecError(f"field {where!r}: nested union {json.dumps(avro_type)} is not valid Avro")
        if not isinstance(avro_type, dict) or "type" not in avro_type:
            raise AvroCodecError(f"field {where!r}: malformed Avro type {avro_type!r}")
        return self._complex(avro_type, where, namespace)

    def _complex(self, avro_type: dict[str, Any], where: str, namespace: str | None) -> pa.DataType:
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

    def _record(self, avro_type: dict[str, Any], where: str, namespace: str | None) -> pa.DataType:
        full, ns = _full_name(avro_type, namespace)
        fields = []
        for f in avro_type.get("fields", []):
            dtype, nullable = self.map(f["type"], f"{where}.{f['name']}" if where else f["name"], ns)
            fields.append(pa.field(f["name"], dtype, nullable=nullable or dtype == pa.null()))
        struct = pa.struct(fields)
        self.named[full] = struct
        return struct


def _as_schema_dict(avro_schema: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(avro_schema, str):
        try:
            avro_schema = json.loads(avro_schema)
        except json.JSONDecodeError as exc:
            raise AvroCodecError(f"Avro schema is not valid JSON: {exc}") from exc
    if not isinstance(avro_schema, dict) or avro_schema.get("type") != "record":
        raise AvroCodecError("an Avro data block schema must be a record schema")
    return avro_schema


def avro_to_arrow_schema(avro_schema: dict[str, Any]) -> pa.Schema:
    """Arrow schema for an Avro record schema; unions may list null first or last."""
    avro_schema = _as_schema_dict(avro_schema)
    struct = _ArrowTypeMapper()._record(avro_schema, "", None)
    return pa.schema(list(struct))


def has_map(dtype: pa.DataType) -> bool:
    """Whether `dtype` is a map or holds one at any depth."""
    if pa.types.is_map(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(has_map(f.type) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return has_map(dtype.value_type)
    return False
