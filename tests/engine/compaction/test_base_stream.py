"""engine.compaction.base_stream: the old base streamed in byte-sized batches, every row once, in order."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.compaction.base_stream import MIN_BATCH_ROWS, UNSIZED_BATCH_ROWS, batch_rows, stream_base
from engine.errors import TidemarkError
from engine.io.base_format import ParquetBase


def _write(path: str, n: int, note_chars: int, row_group: int) -> pa.Table:
    t = pa.table({"_hoodie_record_key": pa.array([f"k{i:07d}" for i in range(n)]),
                  "seq": pa.array(range(n), pa.int64()),
                  "note": pa.array([f"{i:07d}" * (note_chars // 7) for i in range(n)])})
    pq.write_table(t, path, row_group_size=row_group)
    return t


def test_batches_follow_decoded_bytes_and_never_fall_below_the_winners(tmp_path):
    path = str(tmp_path / "b.parquet")
    _write(path, 50_000, 700, 20_000)
    pf = ParquetBase(path)
    meta = pq.ParquetFile(path).metadata
    row_bytes = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)) / meta.num_rows
    by_bytes = batch_rows(pf, 0, batch_bytes=int(row_bytes * 30_000))
    assert abs(by_bytes - 30_000) <= 1
    assert batch_rows(pf, 40_000, batch_bytes=int(row_bytes * 30_000)) == 40_000   # winners raise it
    assert batch_rows(pf, 0, batch_bytes=1) == MIN_BATCH_ROWS                    # floor for very wide rows


def test_stream_yields_every_row_once_in_file_order_with_the_schema_columns(tmp_path, monkeypatch):
    path = str(tmp_path / "b.parquet")
    t = _write(path, 60_000, 70, 25_000)
    schema = pa.schema([("_hoodie_record_key", pa.string()), ("seq", pa.int64()), ("absent", pa.string())])
    monkeypatch.setattr("engine.compaction.base_stream.MIN_BATCH_ROWS", 1)
    monkeypatch.setattr("engine.compaction.base_stream.BATCH_BYTES", 64 * 1024)   # many small batches
    batches = list(stream_base(path, schema, 0))
    assert len(batches) > 3
    assert all(b.num_rows <= 25_000 for b in batches)   # never across a row group
    got = pa.concat_tables(batches)
    assert got.column_names == ["_hoodie_record_key", "seq"]   # columns the file lacks are the caller's
    assert got.equals(t.select(["_hoodie_record_key", "seq"]))


def test_no_base_streams_nothing_and_a_damaged_base_is_named(tmp_path):
    assert list(stream_base(None, pa.schema([("a", pa.int64())]), 0)) == []
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(TidemarkError, match="bad.parquet is unreadable"):
        list(stream_base(str(bad), pa.schema([("a", pa.int64())]), 0))


def test_a_footer_without_sizes_falls_back_to_a_fixed_batch(tmp_path, monkeypatch):
    path = str(tmp_path / "b.parquet")
    _write(path, 1_000, 70, 1_000)

    class Unsized:
        num_rows, num_row_groups = 1_000, 1

        def row_group(self, i: int) -> object:
            return type("RG", (), {"total_byte_size": 0})()

    pf = ParquetBase(path)
    monkeypatch.setattr(pq.ParquetFile, "metadata", property(lambda self: Unsized()))
    assert batch_rows(pf, 0) == UNSIZED_BATCH_ROWS
