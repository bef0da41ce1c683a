"""engine.io.base_format: base files read and written by their format (Parquet, Lance), locally and on S3."""
from __future__ import annotations

import io
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lance.file import LanceFileReader, LanceFileWriter

from engine.errors import TidemarkError, UnsupportedTableError
from engine.io import base_format, storage
from engine.io.base_format import LanceBase, WriteOptions, check_readable, open_base, open_writer, read_rows_of_keys
from tests.support.fixtures import unzip_fixture
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)

SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("note", pa.string())])


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"_hoodie_record_key": [f"k{i:05d}" for i in range(start, start + n)],
                     "ts": pa.array(range(start, start + n), pa.int64()),
                     "note": [None if i % 7 == 0 else f"n{i}" for i in range(start, start + n)]}, schema=SCHEMA)


def _write(dest, name: str, tables: list[pa.Table], opts: WriteOptions | None = None) -> None:
    with open_writer(dest, name, SCHEMA, opts or WriteOptions()) as writer:
        for t in tables:
            writer.write(t)
        writer.add_footer({"hoodie_min_record_key": "k00000", "hoodie_max_record_key": "k00249"})


def _read(path: str, columns: list[str], batch_rows: int = 1_000) -> pa.Table:
    with open_base(path) as base:
        return pa.Table.from_batches(list(base.batches(columns, batch_rows)))


def _lance_fixture_base(tmp_path) -> str:
    """One base file of the Java-written Lance table: chennai's first (2 rows)."""
    table = unzip_fixture("v9_trips_lance", tmp_path / "t")
    return str(next(table.glob("city=chennai/7bc287e9-*.lance")))


# --------------------------------------------------------------------------------------------- table format


@pytest.mark.parametrize(("props", "ext"), [({}, ".parquet"), ({"hoodie.table.base.file.format": "PARQUET"}, ".parquet"),
                                            ({"hoodie.table.base.file.format": "LANCE"}, ".lance"),
                                            ({"hoodie.table.base.file.format": "lance"}, ".lance")])
def test_the_table_format_names_the_extension(props, ext):
    assert base_format.table_extension(props) == ext


def test_a_format_tidemark_cannot_write_is_refused_by_name():
    with pytest.raises(UnsupportedTableError, match="hoodie.table.base.file.format=ORC"):
        base_format.table_extension({"hoodie.table.base.file.format": "ORC"})


# --------------------------------------------------------------------------------------------- reading


def test_a_java_written_lance_base_reads_with_its_footer(tmp_path):
    path = _lance_fixture_base(tmp_path)
    with open_base(path) as base:
        assert isinstance(base, LanceBase)
        assert base.num_rows == 2 and base.data_bytes > 0
        assert base.version == "2.0"    # what Hudi's writer produces
        assert base.schema.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                         "_hoodie_partition_path", "_hoodie_file_name"]
        assert base.schema.metadata[b"hoodie_min_record_key"] == b"3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04"
        got = pa.Table.from_batches(list(base.batches(["rider", "_hoodie_record_key"], 1)))
    assert got.column_names == ["rider", "_hoodie_record_key"]   # the order asked, not the file's
    assert got.column("rider").to_pylist() == ["rider-I", "rider-J"]


@pytest.mark.parametrize("name", ["b.parquet", "b.lance"])
def test_every_row_once_in_file_order_in_batches_of_at_most_the_size_asked(tmp_path, name):
    path = str(tmp_path / name)
    _write(path, name, [_rows(120), _rows(130, 120)])
    with open_base(path) as base:
        assert base.num_rows == 250 and base.schema.names == SCHEMA.names
        batches = list(base.batches(["ts", "_hoodie_record_key"], 64))
    assert all(b.num_rows <= 64 for b in batches) and len(batches) >= 4
    assert pa.Table.from_batches(batches).equals(_rows(250).select(["ts", "_hoodie_record_key"]))


@pytest.mark.parametrize("name", ["bad.parquet", "bad.lance"])
def test_a_damaged_or_truncated_base_is_named(tmp_path, name):
    good = str(tmp_path / f"good{os.path.splitext(name)[1]}")
    _write(good, good, [_rows(50)])
    bad = tmp_path / name
    bad.write_bytes(open(good, "rb").read()[: os.path.getsize(good) // 2])   # the footer is gone
    with pytest.raises(TidemarkError, match=f"base file .*{name} is unreadable"):
        check_readable(str(bad))
    with pytest.raises(TidemarkError, match=f"{name} is unreadable"):
        _read(str(bad), ["ts"])
    check_readable(good)


def test_a_missing_lance_base_is_named(tmp_path):
    with pytest.raises(TidemarkError, match="gone.lance is unreadable"):
        check_readable(str(tmp_path / "gone.lance"))


@pytest.mark.parametrize("name", ["b.parquet", "b.lance"])
def test_rows_of_some_keys_with_the_columns_the_file_has(tmp_path, name):
    path = str(tmp_path / name)
    _write(path, name, [_rows(300)])
    got = read_rows_of_keys(path, "_hoodie_record_key", ["_hoodie_record_key", "ts", "absent"],
                            pa.array(["k00007", "k00250", "nope"]))
    assert got.column_names == ["_hoodie_record_key", "ts"]
    assert sorted(got.to_pylist(), key=lambda r: r["ts"]) == [{"_hoodie_record_key": "k00007", "ts": 7},
                                                                {"_hoodie_record_key": "k00250", "ts": 250}]


# --------------------------------------------------------------------------------------------- writing


def test_a_lance_base_is_one_lance_file_of_hudis_version_with_its_footer_keys(tmp_path):
    path = str(tmp_path / "f_0-0-0_20250101000000000.lance")
    _write(path, path, [_rows(10), _rows(0, 10), _rows(5, 10)])   # an empty batch is skipped
    reader = LanceFileReader(path)
    meta = reader.metadata()
    assert (meta.major_version, meta.minor_version) == (0, 3)    # format 2.0, as in Hudi's own files
    assert meta.schema.metadata == {b"hoodie_min_record_key": b"k00000", b"hoodie_max_record_key": b"k00249"}
    assert reader.read_all().to_table().equals(pa.concat_tables([_rows(10), _rows(5, 10)]))


def test_a_parquet_base_keeps_its_row_groups_codec_and_footer_keys(tmp_path):
    path = str(tmp_path / "b.parquet")
    _write(path, "b.parquet", [_rows(250)], WriteOptions(compression="zstd", row_group_rows=100))
    meta = pq.read_metadata(path)
    assert meta.num_row_groups == 3 and meta.row_group(0).column(0).compression == "ZSTD"
    assert meta.metadata[b"hoodie_max_record_key"] == b"k00249"


def test_a_lance_base_keeps_the_version_of_the_file_it_replaces(tmp_path):
    older = str(tmp_path / "old.lance")
    writer = LanceFileWriter(older, SCHEMA, version="2.1")
    writer.write_batch(_rows(3))
    writer.close()
    new = str(tmp_path / "new.lance")
    _write(new, new, [_rows(3)], WriteOptions(like=older))
    with open_base(new) as base:
        assert isinstance(base, LanceBase) and base.version == "2.1"


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_the_version_from_the_files_tail_is_the_readers(tmp_path, version):
    path = str(tmp_path / "v.lance")
    writer = LanceFileWriter(path, SCHEMA, version=version)
    writer.write_batch(_rows(2))
    writer.close()
    with open_base(path) as base:
        assert isinstance(base, LanceBase) and base.version == version
    assert base_format.lance_version(path) == version


def test_a_file_without_lances_tail_has_no_version(tmp_path):
    (tmp_path / "p.lance").write_bytes(b"PAR1" * 8)
    with pytest.raises(TidemarkError, match="p.lance is unreadable: no Lance magic"):
        base_format.lance_version(str(tmp_path / "p.lance"))


def test_a_schema_lance_2_0_cannot_hold_is_refused_by_name(tmp_path):
    schema = pa.schema([("m", pa.map_(pa.string(), pa.int32()))])
    with pytest.raises(TidemarkError, match="Lance 2.0 base file cannot hold this schema"):
        with open_writer(str(tmp_path / "m.lance"), "m.lance", schema):
            pass


def test_a_lance_base_written_into_a_stream_is_the_same_file_spooled_locally(tmp_path, monkeypatch):
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spool))
    sink = io.BytesIO()
    _write(sink, "s.lance", [_rows(40)])
    (tmp_path / "s.lance").write_bytes(sink.getvalue())
    assert _read(str(tmp_path / "s.lance"), SCHEMA.names).equals(_rows(40))
    assert not list(spool.iterdir())   # the local spool is gone once the stream has the file


# --------------------------------------------------------------------------------------------- object store


def test_a_lance_base_on_s3_reads_and_writes_through_storage(s3_env, tmp_path):  # noqa: F811
    local = _lance_fixture_base(tmp_path)
    remote = f"{s3_env['bucket_uri']}/t/city=chennai/{os.path.basename(local)}"
    storage.upload(local, remote)
    check_readable(remote)
    s3_env["server"].reset_counts()
    assert base_format.lance_version(remote) == "2.0"
    gets = [r for r in s3_env["server"].counts() if r["method"] == "GET"]
    assert gets and all(r["range"] for r in gets)   # the tail alone, not the whole object
    assert _read(remote, ["rider"]).equals(_read(local, ["rider"]))
    copy = f"{s3_env['bucket_uri']}/t/copy.lance"
    with storage.open_output(copy) as sink, open_base(remote) as base:
        with open_writer(sink, "copy.lance", base.schema) as writer:
            for batch in base.batches(base.schema.names, 1):
                writer.write(pa.Table.from_batches([batch]))
    back = tmp_path / "back.lance"
    back.write_bytes(storage.read_bytes(copy))
    assert _read(str(back), ["rider", "fare"]).equals(_read(local, ["rider", "fare"]))
    shutil.rmtree(tmp_path / "t")
