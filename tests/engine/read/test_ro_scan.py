"""The in-process RO view read by one Arrow dataset scan (engine.read.ro_scan) returns exactly what reading
slice by slice returns — same rows, same order, same schema — on v6 and v8 tables with carried-over logs,
deleted rows, a pending compaction and a column added after the base files were written; and hudi 0.5.0's
RO view agrees."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.config.layout import create_table
from engine.read.query import iter_arrow, plan_read, read_arrow
from engine.read.slice_reader import read_slice
from engine.table import Table
from engine.write.pipeline import write_dataframe
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.spark_history import HISTORY, E, T, frame, write


def slice_by_slice(path: str) -> pa.Table:
    """The RO view as it was read before the dataset scan: each slice's base file through read_slice."""
    plan = plan_read(path, "read_optimized")
    parts = [t for ref in plan.slices for t in read_slice(ref, plan.context, "read_optimized")]
    return pa.concat_tables(parts) if parts else plan.context.schema.empty_table()


def assert_same_ro(path: str) -> pa.Table:
    got = read_arrow(path, "read_optimized")
    want = slice_by_slice(path)
    assert got.schema == want.schema
    assert got.equals(want), "RO rows differ from the slice-by-slice read"
    assert rows_by_key(got) == rows_by_key(hudi_read(path, "read_optimized"))
    return got


@pytest.mark.parametrize("version,carry", [(6, "symlink"), (8, "copy"), (9, "symlink")])
def test_ro_scan_equals_slice_reads(spark, tmp_path, version, carry):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="ts",
                 event_time_field="ts", merge_mode="event_time", table_version=version)
    for op, rows in HISTORY:
        write(spark, path, op, rows)
    assert read_arrow(path, "read_optimized").num_rows == 0   # logs only: no base file yet
    schedule_compaction(path, strategy="event_time", threshold_ms=T, carry_over=carry)
    write(spark, path, "upsert", [(4, E + 6000), (40, E + 10)])   # while the compaction is pending
    assert assert_same_ro(path).num_rows == 0                        # still no completed base
    run_compaction(path, spark=spark)
    ro = assert_same_ro(path)
    assert ro.num_rows and not {"k05", "k06"} & set(ro.column("_hoodie_record_key").to_pylist())   # deleted ≤ T

    # A column added after the base files were written reads as null from them.
    added = frame([(1, E + 9000), (41, E + 9000)]).append_column("extra", pa.array([7, 8], pa.int64()))
    write_dataframe(path, spark.createDataFrame(added), "upsert")
    ro = assert_same_ro(path)
    assert "extra" in ro.column_names and ro.column("extra").null_count == ro.num_rows
    schedule_compaction(path, strategy="event_time", threshold_ms=E + 9500, carry_over=carry)
    run_compaction(path, spark=spark)
    ro = assert_same_ro(path)
    assert sorted(v for v in ro.column("extra").to_pylist() if v is not None) == [7, 8]


def test_ro_scan_progress_and_export(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="ts",
                 event_time_field="ts", merge_mode="commit_time")
    for op, rows in HISTORY:
        write(spark, path, op, rows)
    schedule_compaction(path, strategy="unbounded")
    run_compaction(path, spark=spark)
    plan = plan_read(path, "read_optimized")
    seen: list[tuple[int, int, str]] = []
    rows = sum(t.num_rows for t in iter_arrow(plan, lambda done, total, unit: seen.append((done, total, unit))))
    files = len(plan.slices)
    assert files > 1 and rows == slice_by_slice(path).num_rows
    assert seen[-1] == (files, files, "file slices")
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    out = str(tmp_path / "ro.parquet")
    result = Table.open(path).read("read_optimized", output=out, local=True)
    assert result.rows == rows
    assert pq.read_table(out).equals(slice_by_slice(path))
