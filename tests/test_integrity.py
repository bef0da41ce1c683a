"""A corrupt block is skipped by reads with a warning naming it, and a compaction refuses to drop it."""
from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from engine.compaction import schedule_compaction
from engine.errors import CorruptLogBlockError
from engine.read.fsview import FileSystemView
from engine.services.integrity import CorruptLogBlockWarning
from engine.read.query import read_arrow
from engine.config.layout import create_table
from engine.write.pipeline import write_dataframe


def test_corrupt_block_is_reported_and_never_compacted(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                 settings={"hoodie.bucket.index.num.buckets": "1"})
    for day in (1, 2):
        ts = pa.array([dt.datetime(2024, 1, day)] * 2, pa.timestamp("ms", tz="UTC"))
        write_dataframe(path, spark.createDataFrame(pa.table({"id": [f"a{day}", f"b{day}"], "seq": [1, 1], "ts": ts})))
    (sl,) = FileSystemView(path).latest_slices()
    first = sl.log_files[0].path
    data = bytearray(open(first, "rb").read())
    data[-3] ^= 0xFF  # break the trailing length check of the only block
    with open(first, "wb") as fh:
        fh.write(data)
    with pytest.warns(CorruptLogBlockWarning, match=f"{os.path.basename(first)} at offset 0"):
        rows = read_arrow(path)
    assert sorted(rows.column("id").to_pylist()) == ["a2", "b2"]  # the other log is still read
    with pytest.raises(CorruptLogBlockError, match="refusing to compact"):
        schedule_compaction(path, strategy="unbounded")
    assert not [f for f in os.listdir(os.path.join(path, ".hoodie")) if "compaction" in f]
