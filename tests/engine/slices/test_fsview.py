"""Invariant 1: a file (or block) not named by a completed instant is invisible to every reader."""
from __future__ import annotations

import datetime as dt
import os
import shutil

import pyarrow as pa

from engine import logformat
from engine.config.layout import create_table
from engine.config.schema import schema_with_meta
from engine.io.naming import LogFileName, new_instant_time
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView, list_partitions
from engine.timeline.instants import Timeline, create_requested, transition_to_inflight
from engine.write.pipeline import write_dataframe
from tests.support.oracle import hudi_read, rows_by_key


def _table(spark, path):
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="ts", hive_style=True, settings={"hoodie.bucket.index.num.buckets": "1"})
    rows = pa.table({"id": ["a", "b"], "region": ["eu", "eu"], "seq": [1, 1],
                     "ts": pa.array([dt.datetime(2024, 1, 1)] * 2, pa.timestamp("ms", tz="UTC"))})
    write_dataframe(path, spark.createDataFrame(rows), "upsert")


def test_partitions_and_slices(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    assert list_partitions(path) == ["region=eu"]
    view = FileSystemView(path)
    (sl,) = view.latest_slices()
    assert sl.base_file is None and [lf.version for lf in sl.log_files] == [1]


def test_uncommitted_files_and_blocks_are_invisible(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path)
    before = rows_by_key(read_arrow(path))
    timeline = Timeline.load(path)
    (sl,) = FileSystemView(path, timeline).latest_slices()
    failed = new_instant_time(after=timeline.instants[-1].timestamp)
    create_requested(path, failed, "deltacommit")
    transition_to_inflight(path, failed, "deltacommit")
    # A failed write left a new log version with data of its (never completed) instant ...
    schema = schema_with_meta(__import__("json").loads(timeline.latest_schema()))
    rows = read_arrow(path).slice(0, 1)
    rows = rows.set_column(rows.schema.get_field_index("seq"), "seq", pa.array([99], pa.int64()))
    block = logformat.encode_data_block(rows, schema, failed, "avro", 0, 0)
    name = LogFileName(sl.file_id, sl.base_instant, 2, "9-9-9").name
    logformat.append_blocks(os.path.join(path, "region=eu", name), [block])
    # ... and a base file of that instant.
    shutil.copy(os.path.join(path, "region=eu", name), os.path.join(path, "region=eu", f"{sl.file_id}_0-1-2_{failed}.parquet"))
    assert rows_by_key(read_arrow(path)) == before
    assert rows_by_key(hudi_read(path)) == before
    assert FileSystemView(path).latest_slices()[0].base_file is None
