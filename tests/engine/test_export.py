"""A query's result written to one Parquet file: streamed, never held whole in the driver."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from engine import export


def test_spark_part_files_are_copied_a_row_group_at_a_time(tmp_path):
    """A part file holds every file Spark packed into one task: it is read by row group, not whole."""
    parts = []
    for i in range(2):
        path = tmp_path / f"part-{i}.parquet"
        pq.write_table(pa.table({"id": list(range(i * 300, i * 300 + 300))}), path, row_group_size=100)
        parts.append(str(path))
    pieces = list(export._row_groups(parts))
    assert [t.num_rows for t in pieces] == [100] * 6
    out = tmp_path / "out.parquet"
    assert export._write_stream(str(out), pieces[0].schema, iter(pieces)) == 600
    assert pq.read_table(out).column("id").to_pylist() == list(range(600))


def test_the_file_is_encoded_beside_the_producer_and_unique_columns_get_no_dictionary(tmp_path):
    """Rows keep their order through the writer thread; a unique column is written without a dictionary."""
    pieces = [pa.table({"key": [f"k{i}" for i in range(s, s + 5000)], "region": ["eu"] * 5000})
              for s in range(0, 20000, 5000)]
    out = tmp_path / "out.parquet"
    assert export._write_stream(str(out), pieces[0].schema, iter(pieces)) == 20000
    assert pq.read_table(out).equals(pa.concat_tables(pieces))
    meta = pq.ParquetFile(out).metadata.row_group(0)
    assert {meta.column(i).path_in_schema: meta.column(i).has_dictionary_page for i in range(2)} == \
        {"key": False, "region": True}


def test_no_rows_still_make_a_file_of_the_schema(tmp_path):
    out = tmp_path / "out.parquet"
    schema = pa.schema([("id", pa.int64())])
    assert export._write_stream(str(out), schema, iter([schema.empty_table()])) == 0
    assert pq.read_table(out).schema == schema


def test_a_failing_read_leaves_no_output(tmp_path):
    """The producer fails after the writer has started the file: neither the output nor its temp file remains."""
    def rows():
        yield pa.table({"id": [1, 2]})
        raise RuntimeError("corrupt block")

    out = tmp_path / "out.parquet"
    try:
        export._write_stream(str(out), pa.schema([("id", pa.int64())]), rows())
    except RuntimeError as exc:
        assert "corrupt block" in str(exc)
    else:
        raise AssertionError("the read's error was not raised")
    assert list(tmp_path.iterdir()) == []
