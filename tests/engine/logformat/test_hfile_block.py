"""HFILE_DATA log blocks (type 4): the HFile v3 container reader and the block decode on top of it.

Java-written files from hudi 0.5.0's sdist (Hudi 1.1 writers, GZ and NONE), plus small HFiles built here for the
layouts those files do not show (a two-level index) and for damage."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import struct
import warnings
from collections.abc import Callable
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.errors import CorruptLogBlockError
from engine.logformat import BlockType, DataBlock, read_log_file, scan_log_file
from engine.logformat.content_check import content_faults
from engine.logformat.encode import frame_block
from engine.logformat.hfile import GZ, NONE, HFileError, read_hfile
from engine.logformat.hfile_block import _refill_key_field, decode_hfile_block_content
from engine.logformat.integrity import CorruptLogBlockWarning
from engine.read.query import QuerySpec, read_arrow
from tests.support.fixtures import unzip_fixture
from tests.support.hudi_sdist import data_dir
from tests.support.oracle import _norm, hudi_read, rows_by_key

TABLE = "table_hfile_log_block"
TABLE_INSTANTS = ("20260607061245908", "20260607061248155")


def _rows(table: pa.Table, columns: list[str]) -> list[str]:
    """A table as a sorted multiset of normalised rows (what the sdist survey compares)."""
    return sorted(repr([_norm(v) for v in row.values()]) for row in table.select(columns).to_pylist())


def _the_log(base: Path) -> Path:
    [log] = [p for p in base.iterdir() if ".log." in p.name]
    return log


def _hfile_block(path: Path) -> tuple[bytes, int, int]:
    """(log bytes, content offset, content length) of the one HFILE_DATA block of a log."""
    [info] = [b for b in scan_log_file(str(path)).blocks if b.block_type is BlockType.HFILE_DATA]
    return path.read_bytes(), info.content_offset, info.content_length


def _content(path: Path) -> bytes:
    raw, start, length = _hfile_block(path)
    return raw[start : start + length]


# ---------------------------------------------------------------------------------------------- the fixture table


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return unzip_fixture(TABLE, tmp_path / "t")


@pytest.mark.parametrize("query", ["snapshot", "read_optimized"])
def test_fixture_table_reads_like_hudi(table: Path, query: str) -> None:
    theirs = hudi_read(table, query)
    ours = read_arrow(str(table), query)
    assert ours.column_names == theirs.column_names
    assert _rows(ours, theirs.column_names) == _rows(theirs, theirs.column_names)


@pytest.mark.parametrize("as_of", TABLE_INSTANTS)
def test_fixture_table_time_travel_like_hudi(table: Path, as_of: str) -> None:
    theirs = hudi_read(table, "time_travel", as_of=as_of)
    ours = read_arrow(str(table), QuerySpec("time_travel", as_of=as_of))
    assert _rows(ours, theirs.column_names) == _rows(theirs, theirs.column_names)


def test_fixture_table_compacts_and_hudi_reads_the_result(table: Path) -> None:
    # Compaction decodes the HFile block like a read does: hudi 0.5.0's snapshot is unchanged, RO gains the update.
    snapshot = rows_by_key(hudi_read(table, "snapshot"))
    assert rows_by_key(hudi_read(table, "read_optimized")) != snapshot
    assert schedule_compaction(str(table), strategy="unbounded").written
    run_compaction(str(table))
    assert rows_by_key(hudi_read(table, "snapshot")) == snapshot
    assert rows_by_key(hudi_read(table, "read_optimized")) == snapshot
    assert rows_by_key(read_arrow(str(table), "snapshot")) == snapshot


def test_fixture_log_block_records_get_their_key_back_from_the_cell(table: Path) -> None:
    # Java blanks the "key" field in each datum (the cell key holds it); this table's record key field is "key".
    content = _content(_the_log(table))
    cells = read_hfile(content, "fixture")
    assert cells.keys == [b"k1", b"k2"]
    [block] = read_log_file(str(_the_log(table))).blocks
    assert isinstance(block, DataBlock)
    rows = block.records.select(["_hoodie_record_key", "key", "value", "num"]).to_pylist()
    assert rows == [{"_hoodie_record_key": k, "key": k, "value": "v1_upd", "num": 11} for k in ("k1", "k2")]


def test_key_refill_touches_only_empty_strings() -> None:
    table = pa.table({"key": pa.array(["", None, "kept", ""]), "n": [1, 2, 3, 4]})
    out = _refill_key_field(table, [b"a", b"b", b"c", b"d"], "t")
    assert out.column("key").to_pylist() == ["a", None, "kept", "d"]
    assert _refill_key_field(pa.table({"k": [""]}), [b"a"], "t").column("k").to_pylist() == [""]


# ---------------------------------------------------------------------------------------------- other sdist HFiles


def test_multi_block_metadata_hfile() -> None:
    # A record_index base file of a metadata table: 9 GZ data blocks, 60,000 cells.
    [path] = (data_dir() / "metadata_multi_block_hfile").glob("*.hfile")
    cells = read_hfile(path.read_bytes(), str(path))
    assert len(cells.keys) == 60_000
    assert cells.keys == sorted(cells.keys) and len(set(cells.keys)) == len(cells.keys)
    assert (cells.keys[0], cells.keys[-1]) == (cells.file_info["minRecordKey"], cells.file_info["maxRecordKey"])
    assert cells.file_info["hfile.LASTKEY"][2:] == cells.keys[-1]
    # Every value is a HoodieMetadataRecord datum in the file-info schema, its "key" blanked by the writer.
    schema = fastavro.parse_schema(json.loads(cells.file_info["schema"]))
    for i in range(0, 60_000, 997):
        record = fastavro.schemaless_reader(io.BytesIO(cells.values[i]), schema, None)
        assert record["key"] == "" and record["recordIndexMetadata"] is not None


def test_none_codec_log_block_of_the_hfile_base_file_table() -> None:
    # Uncompressed HFile in a log block (README: uuid0003..uuid0006, fares 102..105).
    root = data_dir() / "hfile_base_file_table"
    [log] = root.glob(".*.log.*")
    [block] = read_log_file(str(log)).blocks
    assert isinstance(block, DataBlock)
    rows = block.records.select(["_hoodie_record_key", "fare"]).to_pylist()
    assert [(r["_hoodie_record_key"], r["fare"]) for r in rows] == [
        ("uuid0003", 102), ("uuid0004", 103), ("uuid0005", 104), ("uuid0006", 105)]
    [base] = root.glob("*.hfile")
    assert read_hfile(base.read_bytes(), str(base)).keys == [b"uuid0001", b"uuid0002", b"uuid0003", b"uuid0004"]


def test_metadata_bloom_filter_log_and_base_with_a_meta_block() -> None:
    root = data_dir() / "metadata_bloom_filters_slice"
    [log] = root.glob(".*.log.*")
    assert len(read_hfile(_content(log), str(log)).keys) == 2
    [base] = root.glob("*.hfile")
    assert len(read_hfile(base.read_bytes(), str(base)).keys) == 2


# ---------------------------------------------------------------------------------------------- built HFiles


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _block(magic: bytes, payload: bytes, codec: int) -> bytes:
    stored = gzip.compress(payload) if codec == GZ else payload
    header = struct.pack(">8siiqbii", magic, len(stored) + 4, len(payload), -1, 0, 16384, 33 + len(stored))
    return header + stored + bytes(4)   # NULL checksum: 4 zero bytes, as Hudi writes them


def _cell(key: bytes, value: bytes) -> bytes:
    cell_key = struct.pack(">h", len(key)) + key + b"\x00" + struct.pack(">q", 2**63 - 1) + b"\x04"
    return struct.pack(">ii", len(cell_key), len(value)) + cell_key + value + b"\x00"


def _leaf_index(entries: list[tuple[int, int, bytes]], codec: int) -> bytes:
    """A non-root index block: count, entry offsets (relative to the entries), entries (offset, size, key)."""
    bodies = [struct.pack(">qi", offset, size) + key for offset, size, key in entries]
    starts = [0, *itertools.accumulate(len(b) for b in bodies)]
    payload = struct.pack(f">{len(starts) + 1}i", len(bodies), *starts) + b"".join(bodies)
    return _block(b"IDXLEAF2", payload, codec)


def build_hfile(cells: list[tuple[bytes, bytes]], codec: int = NONE, per_block: int = 2, levels: int = 1,
                info: dict[str, bytes] | None = None, entry_count: int | None = None) -> bytes:
    """An HFile v3 as Hudi's writer lays it out; `levels=2` puts the data block entries in one leaf index block."""
    out = bytearray()
    entries: list[tuple[int, int, bytes]] = []
    for i in range(0, len(cells), per_block):
        block = _block(b"DATABLK*", b"".join(_cell(k, v) for k, v in cells[i : i + per_block]), codec)
        entries.append((len(out), len(block), cells[i][0]))
        out += block
    if levels == 2:
        leaf = _leaf_index(entries, codec)
        entries = [(len(out), len(leaf), cells[0][0])]
        out += leaf
    load_on_open = len(out)
    out += _block(b"IDXROOT2", b"".join(struct.pack(">qi", o, s) + bytes([len(k)]) + k for o, s, k in entries), codec)
    out += _block(b"IDXROOT2", b"", codec)   # meta index: no meta blocks
    file_info_offset = len(out)
    pairs = {"KEY_VALUE_VERSION": b"\x00\x00\x00\x01", "MAX_MEMSTORE_TS_KEY": bytes(8), **(info or {})}
    message = b"".join(_field(1, _field(1, k.encode()) + _field(2, v)) for k, v in pairs.items())
    out += _block(b"FILEINF2", b"PBUF" + _varint(len(message)) + message, codec)
    trailer = b"".join([_field(1, file_info_offset), _field(2, load_on_open), _field(5, len(entries)),
                        _field(7, len(cells) if entry_count is None else entry_count), _field(8, levels),
                        _field(12, codec)])
    head = b'TRABLK"$' + _varint(len(trailer)) + trailer
    return bytes(out + head + bytes(4092 - len(head)) + struct.pack(">i", 3))


CELLS = [(f"key{i:03d}".encode(), f"value-{i}".encode()) for i in range(7)]


@pytest.mark.parametrize("codec", [NONE, GZ])
@pytest.mark.parametrize("levels", [1, 2])
def test_built_hfiles_read_back(codec: int, levels: int) -> None:
    cells = read_hfile(build_hfile(CELLS, codec, levels=levels), "built")
    assert list(zip(cells.keys, cells.values)) == CELLS


def test_built_hfile_block_decodes_avro_values() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "key", "type": ["null", "string"]},
                                                        {"name": "n", "type": "long"}]}
    parsed = fastavro.parse_schema(schema)

    def datum(key: str, n: int) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"key": key, "n": n})
        return out.getvalue()

    content = build_hfile([(b"a", datum("", 1)), (b"b", datum("own", 2)), (b"c", datum("", 3))], GZ)
    table = decode_hfile_block_content(content, schema, "built")
    assert table.to_pylist() == [{"key": "a", "n": 1}, {"key": "own", "n": 2}, {"key": "c", "n": 3}]


# ---------------------------------------------------------------------------------------------- damage


@pytest.mark.parametrize(("damage", "message"), [
    (lambda b: b[:-1], "no HFile trailer magic"),
    (lambda b: b[-3000:], "shorter than its 4096-byte trailer"),
    (lambda b: b[:48] + bytes([b[48] ^ 0xFF]) + b[49:], "does not decompress \\(GZ\\)"),
    (lambda b: b"DATABLKE" + b[8:], "encoded data block"),
])
def test_damaged_hfile_is_a_clear_error(damage: Callable[[bytes], bytes], message: str) -> None:
    good = build_hfile(CELLS, GZ)
    with pytest.raises(HFileError, match=f"^where: .*{message}"):
        read_hfile(damage(good), "where")


def test_cell_count_short_of_the_trailer_is_an_error() -> None:
    with pytest.raises(HFileError, match="hold 7 cells but its trailer counts 8"):
        read_hfile(build_hfile(CELLS, entry_count=8), "where")


def test_cell_running_past_its_block_is_an_error() -> None:
    good = bytearray(build_hfile(CELLS, NONE))
    struct.pack_into(">i", good, 33 + 4, 10_000)   # first cell's value length
    with pytest.raises(HFileError, match="runs past the block"):
        read_hfile(bytes(good), "where")


@pytest.mark.parametrize(("codec", "name"), [(3, "SNAPPY"), (6, "ZSTD"), (9, "unknown codec 9")])
def test_unsupported_codec_is_named(codec: int, name: str) -> None:
    good = build_hfile(CELLS, NONE)
    at = len(good) - 4096 + good[len(good) - 4096 :].index(_field(12, NONE))
    bad = good[:at] + _field(12, codec) + good[at + 2 :]
    with pytest.raises(HFileError, match=f"compression {name} is not supported"):
        read_hfile(bad, "where")


@pytest.mark.parametrize(("info", "message"), [
    ({"MAX_MEMSTORE_TS_KEY": struct.pack(">q", 5)}, "memstore \\(MVCC\\) timestamps"),
    ({"hfile.MAX_TAGS_LEN": b"\x00\x00\x00\x04"}, "HBase tags"),
])
def test_cell_layouts_hudi_never_writes_are_refused(info: dict[str, bytes], message: str) -> None:
    with pytest.raises(HFileError, match=message):
        read_hfile(build_hfile(CELLS, info=info), "where")


def _damage_fixture_log(table: Path, at: int) -> Path:
    """Flip one byte `at` bytes into the fixture log's HFile content; the log framing stays intact."""
    log = _the_log(table)
    raw, start, _ = _hfile_block(log)
    log.write_bytes(raw[: start + at] + bytes([raw[start + at] ^ 0xFF]) + raw[start + at + 1 :])
    return log


def test_damaged_block_in_a_log_is_a_corrupt_block_naming_file_and_problem(table: Path) -> None:
    log = _damage_fixture_log(table, 60)   # inside the GZ payload of the data block
    contents = read_log_file(str(log))
    assert contents.blocks == []
    [corrupt] = contents.corrupt
    assert corrupt.content and corrupt.offset == 0
    assert str(log) in corrupt.reason and "does not decompress (GZ)" in corrupt.reason


def test_damaged_block_in_a_committed_write_is_never_dropped_silently(table: Path) -> None:
    log = _damage_fixture_log(table, 60)
    with pytest.raises(CorruptLogBlockError, match=log.name):
        read_arrow(str(table), "snapshot", fail_on_corrupt=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_arrow(str(table), "snapshot")
    assert any(issubclass(w.category, CorruptLogBlockWarning) and log.name in str(w.message) for w in caught)


def test_content_check_flags_an_hfile_block_without_an_hfile_start(table: Path) -> None:
    log = _the_log(table)
    scan = scan_log_file(str(log))
    assert content_faults(str(log), scan.blocks) == []
    log = _damage_fixture_log(table, 0)
    [fault] = content_faults(str(log), scan_log_file(str(log)).blocks)
    assert "does not start with an HFile" in fault.reason


def test_truncated_hfile_in_intact_log_framing_is_a_corrupt_block(tmp_path: Path) -> None:
    content = build_hfile(CELLS, GZ)[:-100]
    path = tmp_path / "t.log"
    path.write_bytes(frame_block(BlockType.HFILE_DATA, {0: "1", 2: '{"type":"record","name":"r","fields":[]}'}, content))
    [corrupt] = read_log_file(str(path)).corrupt
    assert str(path) in corrupt.reason and "trailer" in corrupt.reason
