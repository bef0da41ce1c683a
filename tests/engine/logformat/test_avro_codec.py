"""engine.logformat.avro_codec: byte identity with fastavro, round trips, fallback, garbage, a Java-written block."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import struct
import zipfile
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from engine.logformat.avro_codec import decode_data_block_content, encode_data_block_content
from engine.logformat.avro_schema_map import AvroCodecError, arrow_to_avro_schema, avro_to_arrow_schema
from tests.support.fixtures import fixture_zip

JAVA_LOG = "city=san_francisco/.d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85"

UNICODE = ["", "a", "héllo", "日本語テキスト", "emoji 🚀🌊", "x" * 300, "tab\tnew\nline", "\u0000nul"]


def _mask(rng: np.random.Generator, n: int, p: float = 0.2) -> np.ndarray:
    return rng.random(n) < p


def random_table(n: int, seed: int = 7) -> pa.Table:
    """Every vectorized type with nulls and edge values, deterministic per seed."""
    rng = np.random.default_rng(seed)
    longs = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    longs[: min(n, 6)] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, 1, 63][: min(n, 6)]
    doubles = rng.normal(0, 1e6, n)
    doubles[rng.random(n) < 0.05] = np.nan
    doubles[: min(n, 3)] = [np.inf, -np.inf, -0.0][: min(n, 3)]
    strings = [UNICODE[i] for i in rng.integers(0, len(UNICODE), n)]
    unscaled = rng.integers(-(10**17), 10**17, n)
    decimals = [decimal.Decimal(int(u) * 10**20 + int(v)).scaleb(-4) for u, v in zip(unscaled, rng.integers(-999, 999, n))]
    decimals[:4] = [decimal.Decimal("0.0000"), decimal.Decimal("-0.0128"), decimal.Decimal("0.0128"),
                    decimal.Decimal("-" + "9" * 34 + ".9999")][: min(n, 4)]
    ts_ms = rng.integers(-(10**12), 4 * 10**12, n)
    columns = {
        "s": pa.array(strings, pa.string(), mask=_mask(rng, n)),
        "s_full": pa.array(strings, pa.string()),
        "i32": pa.array(rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64, endpoint=True).astype(np.int32),
                        mask=_mask(rng, n)),
        "i8": pa.array(rng.integers(-128, 127, n).astype(np.int8), mask=_mask(rng, n)),
        "l": pa.array(longs, mask=_mask(rng, n)),
        "f": pa.array(rng.normal(0, 1e3, n).astype(np.float32), mask=_mask(rng, n)),
        "d": pa.array(doubles, mask=_mask(rng, n)),
        "b": pa.array(rng.random(n) < 0.5, pa.bool_(), mask=_mask(rng, n)),
        "bin": pa.array([s.encode()[:5] + bytes([i % 256]) for i, s in enumerate(strings)], pa.binary(), mask=_mask(rng, n)),
        "ts_ms": pa.array(ts_ms, pa.timestamp("ms", tz="UTC"), mask=_mask(rng, n)),
        "ts_us_naive": pa.array(ts_ms * 1000 + 7, pa.timestamp("us"), mask=_mask(rng, n)),
        "day": pa.array(rng.integers(-20000, 40000, n).astype(np.int32), pa.date32(), mask=_mask(rng, n)),
        "dec": pa.array(decimals, pa.decimal128(38, 4), mask=_mask(rng, n)),
        "all_null": pa.nulls(n, pa.string()),
    }
    return pa.table(columns)


def fastavro_content(table: pa.Table, avro_schema: dict) -> bytes:
    """Reference encoding: fastavro.schemaless_writer per record; timestamps fed as epoch ints."""
    parsed = fastavro.parse_schema(avro_schema)
    plain = table.cast(pa.schema([
        pa.field(f.name, pa.int64() if pa.types.is_timestamp(f.type) else f.type) for f in table.schema
    ]))
    out = io.BytesIO()
    out.write(struct.pack(">ii", 3, table.num_rows))
    for row in plain.to_pylist():
        datum = io.BytesIO()
        fastavro.schemaless_writer(datum, parsed, row)
        out.write(struct.pack(">i", datum.tell()) + datum.getvalue())
    return out.getvalue()


def flip_unions(avro_schema: dict) -> dict:
    flipped = json.loads(json.dumps(avro_schema))
    for field in flipped["fields"]:
        field["type"] = field["type"][::-1]
        field.pop("default", None)
    return flipped


# --------------------------------------------------------------------------- schema mapping


def test_schema_round_trip() -> None:
    table = random_table(5)
    avro = arrow_to_avro_schema(table.schema, "r", "ns")
    back = avro_to_arrow_schema(avro)
    assert back.field("ts_ms").type == pa.timestamp("ms", tz="UTC")
    assert back.field("ts_us_naive").type == pa.timestamp("us", tz="UTC")
    assert back.field("i8").type == pa.int32()
    assert avro_to_arrow_schema(arrow_to_avro_schema(back, "r", "ns")) == back


# --------------------------------------------------------------------------- vectorized codec


@pytest.mark.parametrize("n", [0, 1, 37, 3000])
def test_encode_byte_identical_to_fastavro(n: int) -> None:
    table = random_table(n, seed=n)
    avro = arrow_to_avro_schema(table.schema, "rec", "hoodie.test")
    ours = encode_data_block_content(table, avro)
    assert ours == fastavro_content(table, avro)


def test_encode_byte_identical_with_flipped_unions_and_plain_fields() -> None:
    table = random_table(500, seed=3)
    avro = flip_unions(arrow_to_avro_schema(table.schema, "rec", "ns"))
    assert encode_data_block_content(table, avro) == fastavro_content(table, avro)
    no_null = table.select(["s_full", "d"]).drop_null()
    plain = {"type": "record", "name": "p", "fields": [
        {"name": "s_full", "type": "string"}, {"name": "d", "type": "double"}]}
    assert encode_data_block_content(no_null, plain) == fastavro_content(no_null, plain)


def fixed_width_table(n: int, seed: int) -> pa.Table:
    """Columns whose values all have one width (copied as fixed-width bytes, not joined row by row) beside
    columns whose widths vary: wide and narrow, constant and not, empty, and a varying long between them."""
    rng = np.random.default_rng(seed)
    keys = [f"{k:036d}" for k in rng.integers(0, 10**12, n)]           # UUID-wide, all 36 bytes
    return pa.table({
        "commit": pa.array(["20250101000000000"] * n),                   # constant, like the meta fields
        "key": pa.array(keys),
        "seqno": pa.array([f"20250101000000000_0_{i}" for i in range(n)]),   # widths vary with i
        "small": pa.array(rng.integers(-300, 300, n), pa.int64()),          # varints of 1-2 bytes
        "region": pa.array([("eu", "us")[i % 2] for i in range(n)]),      # 2 bytes, not constant
        "empty": pa.array([""] * n),
        "wide_bytes": pa.array([bytes([i % 256]) * 20 for i in range(n)], pa.binary()),
        "maybe": pa.array(["abcd"] * n, pa.string(), mask=_mask(rng, n, 0.3)),       # one width, but nulls
        "d": pa.array(rng.normal(0, 1, n)),
        "tail": pa.array([("x", "yy")[i % 3 == 0] for i in range(n)]),
    })


@pytest.mark.parametrize("n", [1, 2, 257])
@pytest.mark.parametrize("flip", [False, True])
def test_encode_fixed_width_columns_byte_identical(n: int, flip: bool) -> None:
    table = fixed_width_table(n, seed=n)
    avro = arrow_to_avro_schema(table.schema, "rec", "ns")
    avro = flip_unions(avro) if flip else avro
    assert encode_data_block_content(table, avro) == fastavro_content(table, avro)
    # slices (arrays with an offset, as a log's second block is) and each column alone or in pairs
    for part in (table.slice(n // 3, n - n // 3), table.slice(n - 1)):
        assert encode_data_block_content(part, avro) == fastavro_content(part, avro)
    for names in (["commit"], ["key", "small"], ["small", "key"], ["empty"], ["commit", "region", "d"]):
        picked = table.select(names)
        plain = {"type": "record", "name": "p", "fields": [f for f in avro["fields"] if f["name"] in names]}
        plain["fields"].sort(key=lambda f: names.index(f["name"]))
        assert encode_data_block_content(picked, plain) == fastavro_content(picked, plain), names
    decoded = decode_data_block_content(encode_data_block_content(table, avro), avro)
    _assert_same(decoded, table.cast(avro_to_arrow_schema(avro)))


def test_encode_records_of_one_width_only() -> None:
    """Every field fixed-width: the records are one copied matrix, the length prefix the same on every row."""
    avro = {"type": "record", "name": "r", "fields": [
        {"name": "k", "type": "string"}, {"name": "d", "type": "double"}, {"name": "c", "type": ["null", "string"]}]}
    table = pa.table({"k": pa.array([f"k{i:05d}" for i in range(300)]), "d": pa.array(np.arange(300) / 7),
                      "c": pa.array(["same"] * 300)})
    content = encode_data_block_content(table, avro)
    assert content == fastavro_content(table, avro)
    _assert_same(decode_data_block_content(content, avro), table.cast(avro_to_arrow_schema(avro)))


def _assert_same(decoded: pa.Table, expected: pa.Table) -> None:
    """Equality that treats NaN == NaN (pa.Table.equals does not)."""
    assert decoded.schema == expected.schema
    for name in expected.column_names:
        got, want = decoded.column(name), expected.column(name)
        if pa.types.is_floating(want.type):
            g, w = got.to_numpy(zero_copy_only=False), want.to_numpy(zero_copy_only=False)
            np.testing.assert_array_equal(g, w)
            assert got.is_null().equals(want.is_null())
        else:
            assert got.to_pylist() == want.to_pylist(), name


@pytest.mark.parametrize("flip", [False, True])
def test_round_trip(flip: bool) -> None:
    table = random_table(2000, seed=11)
    avro = arrow_to_avro_schema(table.schema, "rec", "ns")
    if flip:
        avro = flip_unions(avro)
    content = encode_data_block_content(table, avro)
    decoded = decode_data_block_content(content, avro)
    expected = table.cast(avro_to_arrow_schema(avro))
    _assert_same(decoded, expected)
    # memoryview input and sliced / chunked tables give the same answer
    _assert_same(decode_data_block_content(memoryview(content), avro), expected)
    chunked = pa.concat_tables([table.slice(0, 700), table.slice(700)])
    assert encode_data_block_content(chunked, avro) == content


def test_decode_matches_fastavro_reader() -> None:
    table = random_table(800, seed=5)
    avro = arrow_to_avro_schema(table.schema, "rec", "ns")
    content = fastavro_content(table, avro)
    decoded = decode_data_block_content(content, avro)
    parsed = fastavro.parse_schema(avro)
    pos, expected_rows = 8, []
    for _ in range(800):
        (length,) = struct.unpack_from(">i", content, pos)
        expected_rows.append(fastavro.schemaless_reader(io.BytesIO(content[pos + 4 : pos + 4 + length]), parsed, None))
        pos += 4 + length
    got = decoded.to_pylist()
    for got_row, want_row in zip(got, expected_rows):
        for key, want in want_row.items():
            if isinstance(want, float) and want != want:
                assert got_row[key] != got_row[key]
            else:
                assert got_row[key] == want, key


def test_column_order_and_types_follow_the_schema() -> None:
    table = pa.table({"b": pa.array([1, 2], pa.int64()), "a": pa.array(["x", None])})
    avro = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": ["null", "string"]}, {"name": "b", "type": ["null", "int"]}]}
    decoded = decode_data_block_content(encode_data_block_content(table, avro), avro)
    assert decoded.column_names == ["a", "b"] and decoded.schema.field("b").type == pa.int32()
    assert decoded.to_pylist() == [{"a": "x", "b": 1}, {"a": None, "b": 2}]


def test_encode_errors() -> None:
    avro = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    with pytest.raises(AvroCodecError, match="lacks"):
        encode_data_block_content(pa.table({"b": [1]}), avro)
    with pytest.raises(AvroCodecError, match="not nullable"):
        encode_data_block_content(pa.table({"a": [1, None]}), avro)
    with pytest.raises(AvroCodecError):
        encode_data_block_content(pa.table({"a": [1]}), {"type": "array", "items": "long"})


# --------------------------------------------------------------------------- fastavro fallback

NESTED_SCHEMA = {"type": "record", "name": "n", "namespace": "ns", "fields": [
    {"name": "id", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
    {"name": "loc", "type": ["null", {"type": "record", "name": "Loc", "fields": [
        {"name": "lat", "type": "double"}, {"name": "lon", "type": ["null", "double"]}]}], "default": None},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
]}


def test_fallback_nested_schema_round_trip_and_byte_identity() -> None:
    rows = [
        {"id": "a", "tags": ["x", "y"], "loc": {"lat": 1.5, "lon": None}, "attrs": {"k": 1, "j": -2},
         "color": "RED", "at": dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=dt.UTC)},
        {"id": None, "tags": None, "loc": None, "attrs": {}, "color": "GREEN", "at": None},
        {"id": "日本", "tags": [], "loc": {"lat": -3.0, "lon": 4.0}, "attrs": {"z": 2**40}, "color": "RED",
         "at": dt.datetime(1960, 1, 1, tzinfo=dt.UTC)},
    ]
    schema = avro_to_arrow_schema(NESTED_SCHEMA)
    assert pa.types.is_list(schema.field("tags").type) and pa.types.is_struct(schema.field("loc").type)
    assert pa.types.is_map(schema.field("attrs").type) and schema.field("color").type == pa.string()
    table = pa.Table.from_pylist(rows, schema=schema)
    content = encode_data_block_content(table, NESTED_SCHEMA)
    parsed = fastavro.parse_schema(NESTED_SCHEMA)
    expected = io.BytesIO()
    expected.write(struct.pack(">ii", 3, len(rows)))
    for row in rows:
        datum = io.BytesIO()
        fastavro.schemaless_writer(datum, parsed, row)
        expected.write(struct.pack(">i", datum.tell()) + datum.getvalue())
    assert content == expected.getvalue()
    decoded = decode_data_block_content(content, NESTED_SCHEMA)
    assert decoded.equals(table)


MAP_TYPES = {
    "m_int": pa.map_(pa.string(), pa.int32()),
    "m_st": pa.map_(pa.string(), pa.struct([("n", pa.int32()), ("label", pa.string())])),
    "m_map": pa.map_(pa.string(), pa.map_(pa.string(), pa.float64())),
    "l_map": pa.list_(pa.map_(pa.string(), pa.decimal128(38, 2))),
}
MAP_ROWS = [
    {"m_int": [("a", 1), ("b", None), ("日本", -(2**31))], "m_st": [("x", {"n": 1, "label": "é"}), ("y", None)],
     "m_map": [("o", [("i", float("inf")), ("j", None)]), ("p", None), ("q", [])],
     "l_map": [[("max", decimal.Decimal("9" * 36 + ".99"))], None, [], [("min", decimal.Decimal("-" + "9" * 36 + ".99"))]]},
    {"m_int": [], "m_st": [], "m_map": [], "l_map": []},
    {"m_int": None, "m_st": None, "m_map": None, "l_map": None},
    {"m_int": [("", 0)], "m_st": [("k", {"n": None, "label": None})], "m_map": [("", [("", -0.0)])],
     "l_map": [[("null", None)]]},
]


def test_maps_round_trip_byte_identical_to_fastavro() -> None:
    schema = pa.schema(MAP_TYPES.items())
    table = pa.Table.from_pylist(MAP_ROWS * 3, schema=schema)
    avro = arrow_to_avro_schema(schema, "rec", "hoodie.t")
    parsed = fastavro.parse_schema(avro)
    expected = io.BytesIO()
    expected.write(struct.pack(">ii", 3, table.num_rows))
    for row in MAP_ROWS * 3:
        datum = io.BytesIO()
        fastavro.schemaless_writer(datum, parsed, {k: _as_avro(v, schema.field(k).type) for k, v in row.items()})
        expected.write(struct.pack(">i", datum.tell()) + datum.getvalue())
    content = encode_data_block_content(table, avro)
    assert content == expected.getvalue()
    assert decode_data_block_content(content, avro).equals(table)


def _as_avro(value: object, dtype: pa.DataType) -> object:
    """A Python value of `dtype` as fastavro takes it: maps (lists of pairs) become dicts, at any depth."""
    if value is None:
        return None
    if pa.types.is_map(dtype):
        return {k: _as_avro(v, dtype.item_type) for k, v in value}
    if pa.types.is_list(dtype):
        return [_as_avro(v, dtype.value_type) for v in value]
    if pa.types.is_struct(dtype):
        return {f.name: _as_avro(value[f.name], f.type) for f in dtype}
    return value


def test_fallback_for_multi_branch_union_is_a_clear_error() -> None:
    avro = {"type": "record", "name": "r", "fields": [{"name": "x", "type": ["null", "int", "string"]}]}
    with pytest.raises(AvroCodecError, match="'x'"):
        avro_to_arrow_schema(avro)


# --------------------------------------------------------------------------- garbage


def _simple() -> tuple[pa.Table, dict, bytes]:
    table = random_table(50, seed=1).select(["s", "l", "d", "dec", "b"])
    avro = arrow_to_avro_schema(table.schema, "r", "ns")
    return table, avro, encode_data_block_content(table, avro)


def test_wrong_version_and_short_header() -> None:
    _, avro, content = _simple()
    with pytest.raises(AvroCodecError, match="version 2"):
        decode_data_block_content(struct.pack(">i", 2) + content[4:], avro)
    with pytest.raises(AvroCodecError):
        decode_data_block_content(content[:5], avro)
    with pytest.raises(AvroCodecError):
        decode_data_block_content(struct.pack(">ii", 3, 10**9) + content[8:], avro)


@pytest.mark.parametrize("schema_kind", ["vectorized", "fallback"])
def test_truncated_and_garbled_content_raise(schema_kind: str) -> None:
    if schema_kind == "vectorized":
        _, avro, content = _simple()
    else:
        avro = NESTED_SCHEMA
        rows = [{"id": str(i), "tags": ["t"] * (i % 3), "loc": None, "attrs": {"a": i}, "color": "RED", "at": None}
                for i in range(30)]
        content = encode_data_block_content(pa.Table.from_pylist(rows, schema=avro_to_arrow_schema(avro)), avro)
    for cut in range(8, len(content), max(1, len(content) // 60)):
        with pytest.raises(AvroCodecError):
            decode_data_block_content(content[:cut], avro)
    rng = np.random.default_rng(99)
    failures = 0
    for _ in range(150):
        garbled = bytearray(content)
        for at in rng.integers(8, len(content), 4):
            garbled[at] = int(rng.integers(0, 256))
        try:
            decode_data_block_content(bytes(garbled), avro)
        except AvroCodecError:
            failures += 1
    assert failures > 0  # random flips must never raise anything but AvroCodecError
    with pytest.raises(AvroCodecError):
        decode_data_block_content(struct.pack(">ii", 3, 1) + struct.pack(">i", 5) + b"\xff" * 5, avro)
    with pytest.raises(AvroCodecError):
        decode_data_block_content(content + b"\x00", avro)


def test_invalid_utf8_raises() -> None:
    avro = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    datum = b"\x04\xff\xfe"
    content = struct.pack(">iii", 3, 1, len(datum)) + datum
    with pytest.raises(AvroCodecError, match="UTF-8"):
        decode_data_block_content(content, avro)


def test_varint_overflow_and_bad_branch_raise() -> None:
    avro = {"type": "record", "name": "r", "fields": [{"name": "v", "type": ["null", "long"]}]}
    datum = b"\x02" + b"\xff" * 11
    with pytest.raises(AvroCodecError, match="varint"):
        decode_data_block_content(struct.pack(">iii", 3, 1, len(datum)) + datum, avro)
    datum = b"\x04\x02"
    with pytest.raises(AvroCodecError, match="branch"):
        decode_data_block_content(struct.pack(">iii", 3, 1, len(datum)) + datum, avro)
    int_avro = {"type": "record", "name": "r", "fields": [{"name": "v", "type": "int"}]}
    datum = b"\xff\xff\xff\xff\x7f"  # 2**34 - 1 zigzag: beyond int32
    with pytest.raises(AvroCodecError, match="32-bit"):
        decode_data_block_content(struct.pack(">iii", 3, 1, len(datum)) + datum, int_avro)


# --------------------------------------------------------------------------- a real Java-written block


def _java_block(tmp_path: Path) -> tuple[dict, bytes]:
    """Parse just enough of the Hudi log block: header SCHEMA (key 2) and the content bytes."""
    with zipfile.ZipFile(fixture_zip("v6_trips_8i1u")) as archive:
        archive.extractall(tmp_path)
    data = next(tmp_path.rglob(Path(JAVA_LOG).name)).read_bytes()
    assert data[:6] == b"#HUDI#"
    pos = 6 + 8
    version, block_type, entries = struct.unpack_from(">iii", data, pos)
    assert block_type == 3
    pos += 12
    header = {}
    for _ in range(entries):
        key, length = struct.unpack_from(">ii", data, pos)
        header[key] = data[pos + 8 : pos + 8 + length].decode()
        pos += 8 + length
    (content_length,) = struct.unpack_from(">q", data, pos)
    pos += 8
    return json.loads(header[2]), data[pos : pos + content_length]


def test_decode_java_written_block(tmp_path: Path) -> None:
    avro, content = _java_block(tmp_path)
    table = decode_data_block_content(content, avro)
    assert table.num_rows == 1
    row = table.to_pylist()[0]
    assert row["fare"] == 25.0 and row["rider"] == "rider-D"
    assert row["_hoodie_file_name"] == "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    assert row["ts"] == 1695046462179
    # our encoder reproduces Java's bytes exactly
    assert encode_data_block_content(table, avro) == content


def test_more_logical_types_vectorized_and_fallback() -> None:
    """time-*, local-timestamp-*, uuid (vectorized); fixed decimal and a null-typed field (fastavro)."""
    flat = {"type": "record", "name": "r", "fields": [
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": ["null", {"type": "long", "logicalType": "time-micros"}]},
        {"name": "lts", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    ]}
    rows = [
        {"tm": dt.time(1, 2, 3, 4000), "tu": dt.time(23, 59, 59, 999999), "lts": dt.datetime(2020, 1, 2, 3, 4, 5, 6),
         "u": "9909a8b1-2d15-4d3d-8ec9-efc48c536a00"},
        {"tm": dt.time(0, 0), "tu": None, "lts": None, "u": "not-a-uuid"},
    ]
    schema = avro_to_arrow_schema(flat)
    assert schema.field("tm").type == pa.time32("ms") and schema.field("lts").type == pa.timestamp("us")
    table = pa.Table.from_pylist(rows, schema=schema)
    content = encode_data_block_content(table, flat)
    assert decode_data_block_content(content, flat).equals(table)
    parsed = fastavro.parse_schema(flat)
    expected = struct.pack(">ii", 3, len(rows))
    for row in rows:
        datum = io.BytesIO()
        fastavro.schemaless_writer(datum, parsed, row)
        expected += struct.pack(">i", datum.tell()) + datum.getvalue()
    assert content == expected

    fallback = {"type": "record", "name": "f", "fields": [
        {"name": "fx", "type": ["null", {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal",
                                         "precision": 12, "scale": 2}]},
        {"name": "nothing", "type": "null"},
    ]}
    schema = avro_to_arrow_schema(fallback)
    assert schema.field("fx").type == pa.decimal128(12, 2) and schema.field("nothing").type == pa.null()
    table = pa.Table.from_pylist([{"fx": decimal.Decimal("-12.34")}, {"fx": None}], schema=schema)
    decoded = decode_data_block_content(encode_data_block_content(table, fallback), fallback)
    assert decoded.to_pylist() == [{"fx": decimal.Decimal("-12.34"), "nothing": None}, {"fx": None, "nothing": None}]


@pytest.mark.parametrize("values", [[0], [1, -1], [2**40, -(2**40), 5], [2**63 - 1], [-(2**63), 0, 300]])
def test_varints_at_the_end_of_the_content(values: list[int]) -> None:
    """The last varint of a block has fewer than 8 bytes after it: the byte-wise path must take over."""
    avro = {"type": "record", "name": "r", "fields": [{"name": "v", "type": "long"}]}
    table = pa.table({"v": pa.array(values, pa.int64())})
    content = encode_data_block_content(table, avro)
    assert content == fastavro_content(table, avro)
    assert decode_data_block_content(content, avro).column("v").to_pylist() == values
