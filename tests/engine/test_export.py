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
