"""Failed task attempts, crashed writers, stray logs and unsafe partition values never lose or hide data."""
from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from engine import log_writer
from engine.compaction import schedule_compaction
from engine.fsview import FileSystemView
from engine.logformat import append_blocks, encode_data_block
from engine.naming import LogFileName, new_instant_time
from engine.properties import load_table_config
from engine.query import read_arrow
from engine.recovery import reconcile_attempts
from engine.schema import schema_with_meta
from engine.table import create_table
from engine.timeline import Timeline, create_requested, transition_to_inflight
from engine.write import WriteError, _make_job, write_dataframe
from tests.oracle import hudi_read, rows_by_key

TS = pa.timestamp("ms", tz="UTC")


def rows(ids, seq, part=None):
    data = {"id": ids, "seq": [seq] * len(ids), "ts": pa.array([dt.datetime(2024, 1, 1)] * len(ids), TS)}
    if part is not None:
        data["p"] = part
    return pa.table(data)


def new_table(path, partitioned=False):
    create_table(path, name="t", record_keys=["id"], partition_fields=["p"] if partitioned else [],
                 ordering_field="seq", event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})


def test_task_attempts_write_one_file_group_and_losers_are_reconciled(spark, tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    write_dataframe(path, spark.createDataFrame(rows(["a"], 1)))
    timeline = Timeline.load(path)
    cfg_job = _make_job(load_table_config(path), timeline, new_instant_time(), "upsert", timeline.latest_schema(), {})
    routed = rows(["b"], 1).append_column(log_writer.KEY_COL, pa.array(["b"])) \
        .append_column(log_writer.PART_COL, pa.array([""])).append_column(log_writer.BUCKET_COL, pa.array([7], pa.int32()))
    first = log_writer.write_routed(cfg_job, routed, "0-1-0")
    second = log_writer.write_routed(cfg_job, routed, "0-1-1")   # the retry
    assert first[0]["fileId"] == second[0]["fileId"]            # same new file group in every attempt
    assert len(os.listdir(path)) >= 2
    removed = reconcile_attempts(path, second)
    assert [os.path.basename(p) for p in removed] == [os.path.basename(first[0]["path"])]


def test_crashed_writer_is_rolled_back_by_the_next_write(spark, tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    write_dataframe(path, spark.createDataFrame(rows(["a", "b"], 1)))
    timeline = Timeline.load(path)
    (sl,) = FileSystemView(path, timeline).latest_slices()
    dead = new_instant_time(after=timeline.instants[-1].timestamp)
    create_requested(path, dead, "deltacommit")
    transition_to_inflight(path, dead, "deltacommit")
    schema = schema_with_meta(json.loads(timeline.latest_schema()))
    orphan = os.path.join(path, LogFileName(sl.file_id, sl.base_instant, 2, "0-9-0").name)
    append_blocks(orphan, [encode_data_block(read_arrow(path).slice(0, 1), schema, dead)])
    write_dataframe(path, spark.createDataFrame(rows(["c"], 1)))
    assert not os.path.exists(orphan)
    assert not [f for f in os.listdir(os.path.join(path, ".hoodie")) if f.startswith(dead)]
    assert sorted(read_arrow(path).column("id").to_pylist()) == ["a", "b", "c"]
    assert schedule_compaction(path, strategy="unbounded").instant is not None  # the trigger is free again


def test_stray_log_only_slice_does_not_shadow_the_table(spark, tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    write_dataframe(path, spark.createDataFrame(rows(["a", "b"], 1)))
    second = write_dataframe(path, spark.createDataFrame(rows(["c"], 1)))
    timeline = Timeline.load(path)
    (sl,) = FileSystemView(path, timeline).latest_slices()
    # Logs named with an instant that is neither a committed write nor a pending compaction (e.g. a
    # rolled-back plan) carrying a committed block continue the slice before them.
    ghost = new_instant_time(after=second.instant)
    schema = schema_with_meta(json.loads(timeline.latest_schema()))
    block = encode_data_block(read_arrow(path).filter(pa.compute.equal(read_arrow(path).column("id"), "c")),
                              schema, second.instant)
    append_blocks(os.path.join(path, LogFileName(sl.file_id, ghost, 1, "0-0-0").name), [block])
    assert sorted(read_arrow(path).column("id").to_pylist()) == ["a", "b", "c"]


def test_partition_values_are_safe(spark, tmp_path):
    path = str(tmp_path / "t")
    new_table(path, partitioned=True)
    write_dataframe(path, spark.createDataFrame(rows(["a", "b"], 1, part=["x", ""])))
    ours = rows_by_key(read_arrow(path))
    assert sorted(k[0] for k in ours) == ["__HIVE_DEFAULT_PARTITION__", "x"]
    assert ours == rows_by_key(hudi_read(path))
    with pytest.raises(WriteError, match="not a safe relative folder"):
        write_dataframe(path, spark.createDataFrame(rows(["c"], 1, part=[".."])))
    assert not os.path.exists(tmp_path / ".hoodie_partition_metadata")
    assert sorted(read_arrow(path).column("id").to_pylist()) == ["a", "b"]


def test_dangling_carried_link_fails_reads_and_scheduling_loudly(spark, tmp_path):
    from engine.compaction import run_compaction
    from engine.errors import TidemarkError

    path = str(tmp_path / "t")
    new_table(path)
    for day, ids in ((1, ["a"]), (5, ["b"])):
        data = rows(ids, 1).set_column(2, "ts", pa.array([dt.datetime(2024, 1, day)], TS))
        write_dataframe(path, spark.createDataFrame(data))
    schedule_compaction(path, threshold_ms=int(dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc).timestamp() * 1000))
    run_compaction(path, spark=spark)
    (link,) = [os.path.join(path, n) for n in os.listdir(path) if os.path.islink(os.path.join(path, n))]
    os.unlink(os.path.realpath(link))
    with pytest.raises(TidemarkError, match="missing target"):
        read_arrow(path)
    with pytest.raises(TidemarkError, match="missing target"):
        schedule_compaction(path, strategy="unbounded")
