"""engine.logformat.avro_schema_map: Arrow -> Avro as Java Hudi writes it (maps, nesting, names), Avro -> Arrow
for either union order, and the errors that name the column."""

from __future__ import annotations

import json
import zipfile

import fastavro
import pyarrow as pa
import pytest

from engine.errors import TidemarkError
from engine.logformat.avro_schema_map import AvroCodecError, arrow_to_avro_schema, avro_to_arrow_schema
from tests.support.fixtures import fixture_zip


def test_arrow_to_avro_schema_mapping() -> None:
    schema = pa.schema([
        ("s", pa.large_string()), ("i", pa.int16()), ("l", pa.int64()), ("f", pa.float32()), ("d", pa.float64()),
        ("b", pa.bool_()), ("y", pa.binary()), ("t", pa.timestamp("ms", tz="UTC")), ("u", pa.timestamp("us")),
        ("day", pa.date32()), ("m", pa.decimal128(10, 2)),
    ])
    avro = arrow_to_avro_schema(schema, "rec", "hoodie.t")
    assert avro["name"] == "rec" and avro["namespace"] == "hoodie.t" and avro["type"] == "record"
    types = {f["name"]: f["type"] for f in avro["fields"]}
    assert all(f["default"] is None and f["type"][0] == "null" for f in avro["fields"])
    assert types["s"] == ["null", "string"] and types["i"] == ["null", "int"] and types["l"] == ["null", "long"]
    assert types["f"] == ["null", "float"] and types["d"] == ["null", "double"] and types["b"] == ["null", "boolean"]
    assert types["y"] == ["null", "bytes"]
    assert types["t"] == ["null", {"type": "long", "logicalType": "timestamp-millis"}]
    assert types["u"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert types["day"] == ["null", {"type": "int", "logicalType": "date"}]
    assert types["m"] == ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]
    fastavro.parse_schema(avro)  # valid Avro


def test_unsupported_arrow_type_names_column() -> None:
    with pytest.raises(AvroCodecError, match="weird"):
        arrow_to_avro_schema(pa.schema([("ok", pa.int64()), ("weird", pa.duration("s"))]), "r", "n")
    assert issubclass(AvroCodecError, TidemarkError)


def test_map_schema_is_javas() -> None:
    """Maps, lists and structs get the Avro types Java Hudi wrote for the same columns (table_all_data_types):
    nullable values, and records named after their field in the parent record's namespace."""
    with zipfile.ZipFile(fixture_zip("table_all_data_types")) as archive:
        props = next(n for n in archive.namelist() if n.endswith(".hoodie/hoodie.properties"))
        text = archive.read(props).decode()
    line = next(x for x in text.splitlines() if x.startswith("hoodie.table.create.schema="))
    java = json.loads(line.split("=", 1)[1].replace("\\:", ":"))
    nested = ["nested_record", "nullable_map_field", "array_field"]
    arrow = pa.schema([f for f in avro_to_arrow_schema(java) if f.name in nested])
    ours = arrow_to_avro_schema(arrow, java["name"], java["namespace"])
    assert pa.types.is_map(arrow.field("nullable_map_field").type)
    assert ours["fields"] == [f for f in java["fields"] if f["name"] in nested]


def test_map_schema_nests_and_names_never_collide() -> None:
    value = pa.struct([("n", pa.int32()), ("m", pa.map_(pa.string(), pa.list_(pa.int64())))])
    schema = pa.schema([("m", pa.map_(pa.large_string(), value)), ("m_m", pa.struct([("m", value)]))])
    avro = arrow_to_avro_schema(schema, "rec", "hoodie.t")
    fastavro.parse_schema(avro)  # valid Avro: every named type defined once
    record = avro["fields"][0]["type"][1]["values"][1]
    assert (record["name"], record["namespace"]) == ("m", "hoodie.t.rec")
    assert record["fields"][1]["type"][1] == {"type": "map", "values": ["null", {"type": "array",
                                                                                 "items": ["null", "long"]}]}
    assert avro_to_arrow_schema(avro).field("m").type == pa.map_(pa.string(), value)


@pytest.mark.parametrize("key", [pa.int32(), pa.binary(), pa.timestamp("us")])
def test_map_with_non_string_keys_names_the_column_and_why(key: pa.DataType) -> None:
    with pytest.raises(AvroCodecError, match=r"column 'st\.m'.*only have string keys"):
        arrow_to_avro_schema(pa.schema([("st", pa.struct([("m", pa.map_(key, pa.int32()))]))]), "r", "n")
    with pytest.raises(AvroCodecError, match=r"column 'm'.*only have string keys"):
        arrow_to_avro_schema(pa.schema([("m", pa.map_(key, pa.int32()))]), "r", "n")


def test_avro_to_arrow_schema_both_union_orders_and_plain_types() -> None:
    avro = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": ["long", "null"]},
        {"name": "b", "type": ["null", "string"], "default": None},
        {"name": "c", "type": "double"},
        {"name": "t", "type": [{"type": "long", "logicalType": "timestamp-millis"}, "null"]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "m", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}]},
    ]}
    schema = avro_to_arrow_schema(avro)
    assert schema.field("a").type == pa.int64() and schema.field("a").nullable
    assert schema.field("b").type == pa.string() and schema.field("b").nullable
    assert schema.field("c").type == pa.float64() and not schema.field("c").nullable
    assert schema.field("t").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("day").type == pa.date32() and not schema.field("day").nullable
    assert schema.field("m").type == pa.decimal128(12, 3)
