"""Rollback command blocks mask the blocks of the instant they roll back, in our reader and in hudi 0.5.0."""
from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa

from engine import logformat
from engine.config.layout import create_table
from engine.io.naming import LogFileName, new_instant_time
from engine.read.query import read_arrow
from engine.read.slice_reader import read_slice_logs
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from engine.write.pipeline import write_dataframe
from tests.support.oracle import hudi_read, rows_by_key


def test_rollback_block_masks_its_target(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                 merge_mode="commit_time", settings={"hoodie.bucket.index.num.buckets": "1"})
    ts = pa.array([dt.datetime(2024, 1, 1)] * 2, pa.timestamp("ms", tz="UTC"))
    write_dataframe(path, spark.createDataFrame(pa.table({"id": ["a", "b"], "seq": [1, 1], "ts": ts})))
    second = write_dataframe(path, spark.createDataFrame(pa.table({"id": ["a", "b"], "seq": [2, 2], "ts": ts})))
    assert sorted(r["seq"] for r in read_arrow(path).to_pylist()) == [2, 2]
    (sl,) = FileSystemView(path).latest_slices()
    rollback_instant = new_instant_time(after=second.instant)
    name = LogFileName(sl.file_id, sl.base_instant, max(lf.version for lf in sl.log_files) + 1, "1-0-1").name
    logformat.append_blocks(os.path.join(path, name),
                            [logformat.encode_rollback_block(rollback_instant, second.instant)])
    (sl,) = FileSystemView(path).latest_slices()
    committed = frozenset(FileSystemView(path, Timeline.load(path)).committed_instants)
    logs = read_slice_logs([lf.path for lf in sl.log_files], committed)
    assert logs.blocks_skipped == 1 and logs.blocks_read == 1
    assert sorted(r["seq"] for r in read_arrow(path).to_pylist()) == [1, 1]
    assert rows_by_key(read_arrow(path)) == rows_by_key(hudi_read(path))
