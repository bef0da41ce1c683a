"""HoodieLogFormat v1: round trips, Java fixture compatibility, header-only scans and corruption handling."""

from __future__ import annotations

import decimal
import json
import os
import struct
import zipfile
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

import engine.logformat.avro_codec as avro_codec
from engine.errors import TidemarkError
from engine.logformat import (
    MAX_EVENT_TIME_ATTR,
    MIN_EVENT_TIME_ATTR,
    BlockType,
    CommandBlock,
    DataBlock,
    DeleteBlock,
    HeaderKey,
    append_blocks,
    encode_data_block,
    encode_delete_block,
    encode_rollback_block,
    read_log_file,
    scan_log_file,
)
from engine.logformat.avro_codec import encode_data_block_content
from engine.logformat.avro_schema_map import arrow_to_avro_schema
from engine.logformat.encode import frame_block, schema_header
from engine.logformat.hfile import read_hfile
from tests.support.fixtures import fixture_zip

MIN_T, MAX_T = 1_700_000_000_000, 1_700_000_299_000


def make_table(n: int = 300, instant: str = "20250101000000000") -> pa.Table:
    return pa.table(
        {
            "_hoodie_commit_time": pa.array([instant] * n),
            "_hoodie_commit_seqno": pa.array([f"{instant}_0_{i}" for i in range(n)]),
            "_hoodie_record_key": pa.array([f"key-{i:05d}" for i in range(n)]),
            "_hoodie_partition_path": pa.array(["region=eu"] * n),
            "_hoodie_file_name": pa.array(["0c1d2e3f-0000-4000-8000-000000000000-0"] * n),
            "id": pa.array([f"key-{i:05d}" for i in range(n)]),
            "region": pa.array(["eu"] * n),
            "seq": pa.array(range(n), pa.int64()),
            "event_time": pa.array([MIN_T + 1000 * i for i in range(n)], pa.timestamp("ms", tz="UTC")),
            "amount": pa.array([i * 1.25 for i in range(n)], pa.float64()),
            "note": pa.array([None if i % 7 == 0 else f"note {i}" for i in range(n)]),
        }
    )


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return make_table()


@pytest.fixture(scope="module")
def schema(table: pa.Table) -> dict:
    return arrow_to_avro_schema(table.schema, "events_record", "hoodie.events")


def write(path: Path, *blocks: bytes) -> str:
    append_blocks(str(path), blocks)
    return str(path)


def unzip(name: str, dest: Path) -> Path:
    with zipfile.ZipFile(fixture_zip(name)) as zf:
        zf.extractall(dest)
    return dest / name


def log_files(root: Path, data_only: bool = True) -> list[Path]:
    found = [p for p in root.rglob(".*.log.*") if "__MACOSX" not in p.parts]
    return sorted(p for p in found if not data_only or ".hoodie" not in p.parts)


# ---------------------------------------------------------------------------------------------------- round trips


def test_avro_block_round_trip(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    block = encode_data_block(table, schema, "20250101000000000", min_event_time=MIN_T, max_event_time=MAX_T)
    path = write(tmp_path / "a.log", block)
    scan = scan_log_file(path)
    assert scan.corrupt == []
    [info] = scan.blocks
    assert (info.offset, info.size, info.block_type) == (0, len(block), BlockType.AVRO_DATA)
    assert list(info.headers) == [HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA]
    assert info.instant_time == "20250101000000000"
    assert (info.min_event_time, info.max_event_time) == (MIN_T, MAX_T)
    # Framing of docs/HUDI-FORMAT.md §1.1: blockLength at 6, version 1, type 3, trailer blockLength + 6.
    (block_length,) = struct.unpack_from(">q", block, 6)
    assert block_length + 14 == len(block)
    assert struct.unpack_from(">ii", block, 14) == (1, 3)
    assert struct.unpack_from(">q", block, len(block) - 8) == (block_length + 6,)
    assert block[info.content_offset + info.content_length :][:4] == b"\x00\x00\x00\x00"  # empty footer
    [data] = read_log_file(path).blocks
    assert isinstance(data, DataBlock)
    assert data.records.num_rows == 300
    assert data.records.equals(table)


def test_parquet_block_round_trip(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    block = encode_data_block(table, schema, "20250101000000001", fmt="parquet")
    path = write(tmp_path / "p.log", block)
    [info] = scan_log_file(path).blocks
    assert info.block_type == BlockType.PARQUET_DATA
    assert block[info.content_offset : info.content_offset + 4] == b"PAR1"  # whole parquet file, no version prefix
    assert (info.min_event_time, info.max_event_time) == (None, None)
    [data] = read_log_file(path).blocks
    assert data.records.equals(table)
    projected = read_log_file(path, columns=["_hoodie_record_key", "event_time", "absent"]).blocks[0].records
    assert projected.column_names == ["_hoodie_record_key", "event_time"]
    assert projected.column("event_time").to_pylist() == table.column("event_time").to_pylist()


def test_avro_projection(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    path = write(tmp_path / "a.log", encode_data_block(table, schema, "20250101000000000"))
    records = read_log_file(path, columns=["amount", "_hoodie_record_key"]).blocks[0].records
    assert records.column_names == ["amount", "_hoodie_record_key"]
    assert records.column("amount").to_pylist()[:3] == [0.0, 1.25, 2.5]


def test_unknown_data_format_rejected(table: pa.Table, schema: dict) -> None:
    with pytest.raises(TidemarkError, match="orc"):
        encode_data_block(table, schema, "20250101000000000", fmt="orc")


def test_delete_block_always_wins(tmp_path: Path, schema: dict) -> None:
    block = encode_delete_block(["k1", "k2"], ["region=eu", "region=us"], "20250101000000002", avro_schema=schema)
    # Spark SQL DELETE's bytes: key, partition, then union index 2 (IntWrapper) with value 0 -> "04 00".
    assert b"\x02\x04k1\x02\x12region=eu\x04\x00" in block
    path = write(tmp_path / "d.log", block)
    [info] = scan_log_file(path).blocks
    assert info.block_type == BlockType.DELETE
    assert set(info.headers) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
    [deletes] = read_log_file(path).blocks
    assert isinstance(deletes, DeleteBlock)
    assert deletes.deletes.schema.field("ordering_value").type == pa.int32()
    assert deletes.deletes.to_pylist() == [
        {"record_key": "k1", "partition_path": "region=eu", "ordering_value": 0, "always_wins": True,
         "event_time_ms": None},
        {"record_key": "k2", "partition_path": "region=us", "ordering_value": 0, "always_wins": True,
         "event_time_ms": None},
    ]


def test_delete_block_long_ordering(tmp_path: Path) -> None:
    block = encode_delete_block(["a", "b", "c"], ["p", "p", "q"], "20250101000000003", [MIN_T, 0, 7])
    assert set(scan_log_file(write(tmp_path / "d.log", block)).blocks[0].headers) == {HeaderKey.INSTANT_TIME}
    deletes = read_log_file(str(tmp_path / "d.log")).blocks[0].deletes
    assert deletes.schema.field("ordering_value").type == pa.int64()  # LongWrapper, one branch for the block
    assert deletes.column("ordering_value").to_pylist() == [MIN_T, 0, 7]
    # only an Int 0 is Java's "no ordering"; a Long 0 competes like any ordering value (as hudi 0.5.0 reads it)
    assert deletes.column("always_wins").to_pylist() == [False, False, False]
    # "no ordering" (Int 0) and Long values cannot share a block's one branch
    with pytest.raises(TidemarkError, match="block of their own"):
        encode_delete_block(["a", "b"], ["p", "p"], "20250101000000003", [MIN_T, None])
    # a block of deletes that all have none is Int 0, as with no values given
    block = encode_delete_block(["a", "b"], ["p", "p"], "20250101000000003", [None, None])
    assert read_log_file(write(tmp_path / "n.log", block)).blocks[0].deletes.column("always_wins").to_pylist() == \
        [True, True]


@pytest.mark.parametrize(
    ("values", "arrow_type"),
    [([1.5, 0.0], pa.float64()), (["2024-01-02", "2024-01-03"], pa.string())],
)
def test_delete_block_double_and_string_ordering(tmp_path: Path, values: list, arrow_type: pa.DataType) -> None:
    path = write(tmp_path / "d.log", encode_delete_block(["a", "b"], ["p", "p"], "20250101000000003", values))
    deletes = read_log_file(path).blocks[0].deletes
    assert deletes.schema.field("ordering_value").type == arrow_type
    assert deletes.column("ordering_value").to_pylist() == values


def test_delete_block_rejects_bad_input() -> None:
    with pytest.raises(TidemarkError, match="partition paths"):
        encode_delete_block(["a"], [], "20250101000000003")
    with pytest.raises(TidemarkError, match="mixed"):
        encode_delete_block(["a", "b"], ["p", "p"], "20250101000000003", ["x", 1])


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _delete_content(items: list[bytes]) -> bytes:
    datum = _varint(len(items)) + b"".join(items) + b"\x00"
    return struct.pack(">ii", 3, len(datum)) + datum


def _item(key: str, branch: int, value: bytes) -> bytes:
    return b"\x02" + _varint(len(key)) + key.encode() + b"\x02\x02p" + _varint(branch) + value


@pytest.mark.parametrize(
    ("branch", "value", "expected", "always"),
    [
        (0, b"", None, True),
        (1, b"\x01", True, False),
        (2, _varint(0), 0, True),
        (3, _varint(-5), -5, False),
        (3, _varint(0), 0, False),   # Long 0 is an ordering value: only Int 0 always wins (Java's equals(0))
        (4, struct.pack("<f", 2.5), 2.5, False),
        (5, struct.pack("<d", 0.0), 0.0, False),
        (6, _varint(2) + b"\x00\xff", b"\x00\xff", False),
        (7, _varint(3) + b"abc", "abc", False),
        (8, _varint(19000), "2022-01-08", False),
        (9, _varint(2) + (1500).to_bytes(2, "big", signed=True), decimal.Decimal("0.0000000000015"), False),
        (10, _varint(1_000_000), "00:00:01", False),
        (11, _varint(1_000_000), "1970-01-01 00:00:01", False),
    ],
)
def test_delete_block_reads_every_java_wrapper(
    tmp_path: Path, branch: int, value: bytes, expected: object, always: bool
) -> None:
    path = write(tmp_path / "d.log", frame_block(BlockType.DELETE, {0: "1"}, _delete_content([_item("k", branch, value)])))
    [row] = read_log_file(path).blocks[0].deletes.to_pylist()
    got = row["ordering_value"]
    if branch in (8, 10, 11):
        got = str(got).replace("+00:00", "")
    assert (row["record_key"], got, row["always_wins"]) == ("k", expected, always)


def test_delete_block_newer_encoding_is_a_clear_error(tmp_path: Path) -> None:
    block = frame_block(BlockType.DELETE, {0: "1"}, _delete_content([_item("k", 12, b"\x00")]))
    contents = read_log_file(write(tmp_path / "d.log", block))
    assert contents.blocks == []
    [bad] = contents.corrupt
    assert "newer Hudi delete encoding" in bad.reason and "d.log" in bad.reason


def test_rollback_block(tmp_path: Path) -> None:
    block = encode_rollback_block("20250101000000009", "20250101000000001")
    path = write(tmp_path / "r.log", block)
    [info] = scan_log_file(path).blocks
    assert info.block_type == BlockType.COMMAND
    assert list(info.headers) == [0, 3, 1]  # Java's order
    assert info.headers[HeaderKey.COMMAND_BLOCK_TYPE] == "0"
    assert info.content_length == 0
    [command] = read_log_file(path).blocks
    assert isinstance(command, CommandBlock)
    assert (command.info.instant_time, command.info.target_instant_time) == ("20250101000000009", "20250101000000001")


def test_multiple_blocks_in_one_file(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    blocks = [
        encode_data_block(table, schema, "20250101000000001", min_event_time=MIN_T, max_event_time=MAX_T),
        encode_data_block(table.slice(0, 10), schema, "20250101000000002", fmt="parquet"),
        encode_delete_block(["key-00001"], ["region=eu"], "20250101000000003", [MIN_T + 5], avro_schema=schema),
    ]
    path = str(tmp_path / "m.log")
    assert append_blocks(path, blocks[:2]) == len(blocks[0]) + len(blocks[1])
    rollback = encode_rollback_block("20250101000000004", "20250101000000002")
    assert append_blocks(path, [blocks[2], rollback]) == os.path.getsize(path)
    scan = scan_log_file(path)
    assert scan.corrupt == []
    assert [b.block_type for b in scan.blocks] == [BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE, BlockType.COMMAND]
    assert [b.offset for b in scan.blocks] == [0, len(blocks[0]), len(blocks[0]) + len(blocks[1]), sum(map(len, blocks))]
    assert [b.instant_time for b in scan.blocks] == [f"2025010100000000{i}" for i in range(1, 5)]
    contents = read_log_file(path)
    assert [type(b) for b in contents.blocks] == [DataBlock, DataBlock, DeleteBlock, CommandBlock]
    assert contents.blocks[1].records.num_rows == 10
    assert contents.blocks[2].deletes.column("ordering_value").to_pylist() == [MIN_T + 5]
    assert contents.blocks[3].info.target_instant_time == "20250101000000002"


# ---------------------------------------------------------------------------------------------------- schema header


def test_schema_header_with_tidemark_attributes_is_valid_avro(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    block = encode_data_block(table, schema, "20250101000000000", min_event_time=MIN_T, max_event_time=MAX_T)
    info = scan_log_file(write(tmp_path / "a.log", block)).blocks[0]
    doc = json.loads(info.schema_json)
    assert doc[MIN_EVENT_TIME_ATTR] == str(MIN_T) and doc[MAX_EVENT_TIME_ATTR] == str(MAX_T)
    assert {k: v for k, v in doc.items() if not k.startswith("tidemark.")} == schema
    parsed = fastavro.parse_schema(doc)
    assert [f["name"] for f in parsed["fields"]][:5] == [
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"
    ]  # fmt: skip
    assert all(k <= 8 for k in info.headers)  # no new header ordinal: stock readers reject ordinal 9


def test_event_time_attributes_read_in_any_json_layout(tmp_path: Path, schema: dict) -> None:
    # A schema whose attributes are not first (e.g. re-serialised by another tool) still yields the bounds.
    reordered = dict(schema, **{MAX_EVENT_TIME_ATTR: 20, MIN_EVENT_TIME_ATTR: "10"})
    block = frame_block(BlockType.AVRO_DATA, {0: "1", 2: json.dumps(reordered)}, b"\x00\x00\x00\x03\x00\x00\x00\x00")
    info = scan_log_file(write(tmp_path / "a.log", block)).blocks[0]
    assert (info.min_event_time, info.max_event_time) == (10, 20)
    assert schema_header(schema, 1, None).startswith('{"tidemark.minEventTime":"1","type"')


# ---------------------------------------------------------------------------------------------------- Java fixtures


def test_every_v6_fixture_log_scans_and_reads(tmp_path: Path) -> None:
    expected = {  # per table: (block type, rows) of its single log; the .sql's second INSERT updates id 1
        "v6_trips_8i1u": (BlockType.AVRO_DATA, 1),
        "v6_nonpartitioned": (BlockType.PARQUET_DATA, 1),
        "v6_complexkeygen_hivestyle": (BlockType.PARQUET_DATA, 1),
        "v6_simplekeygen_nonhivestyle": (BlockType.PARQUET_DATA, 1),
    }
    for name in [*expected, "v6_empty"]:
        logs = log_files(unzip(name, tmp_path / name))
        if name == "v6_empty":
            assert logs == []
            continue
        [log] = logs
        scan = scan_log_file(str(log))
        assert scan.corrupt == []
        assert [b.block_type for b in scan.blocks] == [expected[name][0]]
        assert scan.blocks[0].size == log.stat().st_size
        assert scan.blocks[0].min_event_time is None  # Java-written: no tidemark attributes
        assert set(scan.blocks[0].headers) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
        contents = read_log_file(str(log))
        [block] = contents.blocks
        assert contents.corrupt == []
        assert block.records.num_rows == expected[name][1]
        assert block.records.column_names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]  # fmt: skip  # noqa: E501
        assert block.records.column("_hoodie_commit_time").to_pylist() == [scan.blocks[0].instant_time]
        if name == "v6_trips_8i1u":
            row = block.records.to_pylist()[0]
            assert (row["rider"], row["fare"], row["city"]) == ("rider-D", 25.0, "san_francisco")
            assert row["_hoodie_file_name"] == log.name[1:].split("_")[0]  # fileId only in log records
        else:
            row = block.records.to_pylist()[0]
            assert (row["id"], row["name"], row["isActive"]) == (1, "Alice", False)


def test_parquet_fixture_log_matches_hudi_oracle(tmp_path: Path) -> None:
    from hudi import HudiReadOptions, HudiTableBuilder

    base = unzip("v6_nonpartitioned", tmp_path)
    snapshot = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(base)).build().read(HudiReadOptions()))
    oracle = {r["id"]: r for r in snapshot.to_pylist()}
    [log] = log_files(base)
    [row] = read_log_file(str(log)).blocks[0].records.to_pylist()
    # The log row is the update the oracle's snapshot shows for id 1.
    for col in ("_hoodie_commit_time", "_hoodie_record_key", "name", "isActive", "longField", "doubleField"):
        assert row[col] == oracle[1][col], col
    assert len(oracle) == 4


def test_v8_fixture_logs_incl_deletes_and_mdt(tmp_path: Path) -> None:
    base = unzip("v8_trips_8i3u1d", tmp_path)
    kinds: list[str] = []
    for log in log_files(base):
        contents = read_log_file(str(log))
        assert contents.corrupt == []
        for block in contents.blocks:
            if isinstance(block, DeleteBlock):
                [row] = block.deletes.to_pylist()
                assert row["always_wins"] and row["ordering_value"] == 0  # Spark SQL DELETE: IntWrapper 0
                kinds.append("delete")
            else:
                kinds.append("data")
    assert sorted(kinds) == ["data"] * 3 + ["delete"] * 2
    # Metadata-table logs hold HFile blocks: the scan handles them and every one reads as an HFile (decoding their
    # HoodieMetadataRecord values, unions of records, is beyond the Avro codec: Tidemark does not read that table).
    mdt = [p for p in log_files(base, data_only=False) if ".hoodie" in p.parts]
    scans = [scan_log_file(str(p)) for p in mdt]
    assert all(s.corrupt == [] for s in scans)
    hfiles = [(p, b) for p, s in zip(mdt, scans) for b in s.blocks if b.block_type == BlockType.HFILE_DATA]
    assert hfiles
    for path, info in hfiles:
        content = path.read_bytes()[info.content_offset : info.content_offset + info.content_length]
        assert read_hfile(content, str(path)).keys


def test_java_byte_layout_reproduced(tmp_path: Path) -> None:
    # Re-encoding the Java-written Avro update block gives the identical file, byte for byte.
    [log] = log_files(unzip("v6_trips_8i1u", tmp_path / "v6"))
    raw = log.read_bytes()
    block = read_log_file(str(log)).blocks[0]
    again = encode_data_block(block.records, json.loads(block.info.schema_json), block.info.instant_time)
    assert again == raw
    # v8 delete blocks: same content, lengths and trailer; Java wrote the two headers in the order {2, 0}.
    v8 = unzip("v8_trips_8i3u1d", tmp_path / "v8")
    checked = 0
    for log in log_files(v8):
        raw_info = scan_log_file(str(log)).blocks[0]
        if raw_info.block_type != BlockType.DELETE:
            continue
        deletes = read_log_file(str(log)).blocks[0].deletes
        ours = encode_delete_block(
            deletes.column("record_key").to_pylist(),
            deletes.column("partition_path").to_pylist(),
            raw_info.instant_time,
            avro_schema=json.loads(raw_info.schema_json),
        )
        path = write(tmp_path / f"ours{checked}.log", ours)
        info = scan_log_file(path).blocks[0]
        raw = log.read_bytes()
        assert (info.size, info.content_length, info.headers) == (raw_info.size, raw_info.content_length, raw_info.headers)
        assert ours[info.content_offset :] == raw[raw_info.content_offset :]  # content, footer, trailer
        checked += 1
    assert checked == 2


# ---------------------------------------------------------------------------------------------------- header-only scan


def test_scan_never_decodes_content(tmp_path: Path, schema: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    garbage = os.urandom(50_000).replace(b"#HUDI#", b"#HUDO#")
    header = {0: "20250101000000005", 2: schema_header(schema, MIN_T, MAX_T)}
    path = write(tmp_path / "g.log", frame_block(BlockType.AVRO_DATA, header, garbage))

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("scan decoded content")

    monkeypatch.setattr(avro_codec, "decode_data_block_content", boom)
    monkeypatch.setattr(json, "loads", boom)  # the fast path must not parse the schema either
    scan = scan_log_file(path)
    [info] = scan.blocks
    assert (scan.corrupt, info.instant_time, info.min_event_time, info.max_event_time) == ([], "20250101000000005", MIN_T, MAX_T)
    assert info.content_length == 50_000
    monkeypatch.undo()
    contents = read_log_file(path)
    assert contents.blocks == []
    [bad] = contents.corrupt
    assert (bad.path, bad.offset, bad.next_offset) == (path, 0, os.path.getsize(path))
    assert "failed to decode" in bad.reason


def test_garbage_content_only_affects_its_block(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    good1 = encode_data_block(table, schema, "20250101000000001")
    junk = frame_block(BlockType.AVRO_DATA, {0: "20250101000000002", 2: json.dumps(schema)}, b"\x00\x00\x00\x03" + b"\xff" * 64)
    good2 = encode_delete_block(["key-00001"], ["region=eu"], "20250101000000003")
    path = write(tmp_path / "g.log", good1, junk, good2)
    contents = read_log_file(path)
    assert [b.info.instant_time for b in contents.blocks] == ["20250101000000001", "20250101000000003"]
    assert [c.offset for c in contents.corrupt] == [len(good1)]


# ---------------------------------------------------------------------------------------------------- corruption


@pytest.fixture()
def three_blocks(table: pa.Table, schema: dict) -> list[bytes]:
    return [
        encode_data_block(table.slice(0, 50), schema, f"2025010100000000{i}", min_event_time=MIN_T + i)
        for i in (1, 2, 3)
    ]


def _assert_readable(path: str, instants: list[str]) -> None:
    contents = read_log_file(path)
    assert [b.info.instant_time for b in contents.blocks] == instants
    assert all(b.records.num_rows == 50 for b in contents.blocks)


def test_trailer_mismatch_in_middle_block(tmp_path: Path, three_blocks: list[bytes]) -> None:
    b1, b2, b3 = three_blocks
    bad = bytearray(b2)
    bad[-8:] = struct.pack(">q", len(b2) + 1)
    path = write(tmp_path / "t.log", b1, bytes(bad), b3)
    scan = scan_log_file(path)
    assert [b.instant_time for b in scan.blocks] == ["20250101000000001", "20250101000000003"]
    [corrupt] = scan.corrupt
    assert (corrupt.path, corrupt.offset, corrupt.next_offset) == (path, len(b1), len(b1) + len(b2))
    assert "trailer mismatch" in corrupt.reason and path in corrupt.reason
    _assert_readable(path, ["20250101000000001", "20250101000000003"])


def test_truncated_last_block(tmp_path: Path, three_blocks: list[bytes]) -> None:
    b1, b2, b3 = three_blocks
    path = write(tmp_path / "t.log", b1, b2, b3[: len(b3) // 2])
    scan = scan_log_file(path)
    assert [b.instant_time for b in scan.blocks] == ["20250101000000001", "20250101000000002"]
    [corrupt] = scan.corrupt
    assert (corrupt.offset, corrupt.next_offset) == (len(b1) + len(b2), os.path.getsize(path))
    assert corrupt.reason.startswith(f"truncated: blockLength {len(b3) - 14} exceeds file size")
    _assert_readable(path, ["20250101000000001", "20250101000000002"])


def test_garbage_between_blocks_skips_to_next_magic(tmp_path: Path, three_blocks: list[bytes]) -> None:
    b1, b2, b3 = three_blocks
    junk = b"\x00garbage bytes from a torn write\xff" * 3
    path = write(tmp_path / "t.log", b1, junk, b2, b3)
    scan = scan_log_file(path)
    # Like Java's isBlockCorrupt, a block must be followed by MAGIC or EOF; the one before the garbage is rejected
    # and the scan resumes at the next MAGIC, so blocks 2 and 3 survive.
    assert [b.instant_time for b in scan.blocks] == ["20250101000000002", "20250101000000003"]
    [corrupt] = scan.corrupt
    assert (corrupt.offset, corrupt.next_offset) == (0, len(b1) + len(junk))
    assert "no MAGIC or EOF after the block" in corrupt.reason
    _assert_readable(path, ["20250101000000002", "20250101000000003"])


def test_garbage_without_magic_at_start_and_short_tail(tmp_path: Path, three_blocks: list[bytes]) -> None:
    b1, b2, _ = three_blocks
    path = write(tmp_path / "t.log", b"junk!junk!", b1, b2, b"#HU")  # < 6 trailing bytes read as EOF (Java)
    scan = scan_log_file(path)
    assert [b.offset for b in scan.blocks] == [10, 10 + len(b1)]
    [corrupt] = scan.corrupt
    assert (corrupt.offset, corrupt.next_offset, corrupt.reason.split(" (")[0]) == (0, 10, "no MAGIC")


def test_unknown_version_and_block_type_are_corrupt(tmp_path: Path, three_blocks: list[bytes]) -> None:
    b1, b2, b3 = three_blocks
    v2 = bytearray(b2)
    v2[14:18] = struct.pack(">i", 2)
    t9 = bytearray(b3)
    t9[18:22] = struct.pack(">i", 9)
    scan = scan_log_file(write(tmp_path / "t.log", b1, bytes(v2), bytes(t9)))
    assert [b.instant_time for b in scan.blocks] == ["20250101000000001"]
    assert ["log format version 2" in scan.corrupt[0].reason, "unknown block type 9" in scan.corrupt[1].reason] == [True, True]


def test_cdc_block_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path / "c.log", frame_block(BlockType.CDC_DATA, {0: "1"}, b"xyz"))
    assert scan_log_file(path).blocks[0].block_type == BlockType.CDC_DATA
    with pytest.raises(TidemarkError, match="unsupported log block type CDC_DATA"):
        read_log_file(path)


# ---------------------------------------------------------------------------------------------------- hudi 0.5.0 oracle


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_hudi_reads_our_blocks(tmp_path: Path, fmt: str) -> None:
    """Replace the fixture's log with our data block (with tidemark attributes) plus an event-time delete."""
    from hudi import HudiReadOptions, HudiTableBuilder

    base = unzip("v6_trips_8i1u", tmp_path)
    [log] = log_files(base)
    java = read_log_file(str(log)).blocks[0]
    victim = "334e26e9-8355-45cc-97c6-c31daf0df330"  # rider-A, in the same file group's base file
    instant = java.info.instant_time  # a completed deltacommit: hudi skips blocks of unknown instants
    schema = json.loads(java.info.schema_json)
    log.write_bytes(
        encode_data_block(java.records, schema, instant, fmt=fmt, min_event_time=MIN_T, max_event_time=MAX_T)
        + encode_delete_block([victim], ["city=san_francisco"], instant, [99_999_999_999_999], avro_schema=schema)
    )
    snapshot = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(base)).build().read(HudiReadOptions()))
    rows = {r["_hoodie_record_key"]: r for r in snapshot.to_pylist()}
    assert len(rows) == 7 and victim not in rows
    assert rows["9909a8b1-2d15-4d3d-8ec9-efc48c536a00"]["fare"] == 25.0


def test_mixed_null_and_long_ordering_from_java(tmp_path: Path) -> None:
    content = _delete_content([_item("a", 0, b""), _item("b", 3, _varint(42))])
    path = write(tmp_path / "d.log", frame_block(BlockType.DELETE, {0: "1"}, content))
    deletes = read_log_file(path).blocks[0].deletes
    assert deletes.schema.field("ordering_value").type == pa.int64()
    assert deletes.column("ordering_value").to_pylist() == [None, 42]
    assert deletes.column("always_wins").to_pylist() == [True, False]


def test_headers_larger_than_one_read_window(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    big = dict(schema, doc="x" * 50_000)  # header far beyond the scanner's first pread
    blocks = [encode_data_block(table.slice(0, 5), big, f"2025010100000000{i}", min_event_time=i) for i in (1, 2)]
    path = write(tmp_path / "b.log", *blocks, encode_rollback_block("20250101000000003", "20250101000000002"))
    scan = scan_log_file(path)
    assert scan.corrupt == []
    assert [(b.instant_time, b.min_event_time) for b in scan.blocks] == [("20250101000000001", 1), ("20250101000000002", 2), ("20250101000000003", None)]  # fmt: skip  # noqa: E501
    assert len(scan.blocks[1].schema_json) > 50_000
    assert [b.records.num_rows for b in read_log_file(path).blocks[:2]] == [5, 5]


def test_partial_update_block_decodes_at_its_own_schema(tmp_path: Path, table: pa.Table, schema: dict) -> None:
    """Hudi 1.x partial-update blocks (IS_PARTIAL) hold only the changed columns: decoded as written and flagged,
    so the merge keeps the other columns' older values instead of reading them as nulls."""
    keep = [f for f in schema["fields"] if f["name"] in ("_hoodie_record_key", "amount")]
    narrow = dict(schema, fields=keep)
    rows = table.select([f["name"] for f in keep])
    headers = {HeaderKey.INSTANT_TIME: "20250101000000000", HeaderKey.SCHEMA: schema_header(narrow)}
    full = frame_block(BlockType.AVRO_DATA, headers, encode_data_block_content(rows, narrow))
    partial = frame_block(BlockType.AVRO_DATA, {**headers, HeaderKey.IS_PARTIAL: "TRUE"},
                          encode_data_block_content(rows, narrow))
    blocks = read_log_file(write(tmp_path / "p.log", full, partial)).blocks
    assert [b.partial for b in blocks] == [False, True]
    assert blocks[1].records.column_names == ["_hoodie_record_key", "amount"]
    assert blocks[1].records.equals(rows)


def test_parquet_blocks_dictionary_encode_only_repetitive_columns():
    import io as _io

    import pyarrow.parquet as _pq

    from engine.logformat.encode import _parquet_bytes

    n = 10_000
    table = pa.table({"unique": pa.array([f"k{i}" for i in range(n)]), "constant": pa.array(["c"] * n),
                      "few": pa.array([i % 7 for i in range(n)])})
    back = _pq.read_table(_io.BytesIO(_parquet_bytes(table)))
    assert back.equals(table)
    encodings = {_pq.ParquetFile(_io.BytesIO(_parquet_bytes(table))).metadata.row_group(0).column(i).path_in_schema:
                 _pq.ParquetFile(_io.BytesIO(_parquet_bytes(table))).metadata.row_group(0).column(i).has_dictionary_page
                 for i in range(3)}
    assert encodings == {"unique": False, "constant": True, "few": True}
