"""Failed task attempts, crashed writers, stray logs and unsafe partition values never lose or hide data."""
from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from engine.compaction import schedule_compaction
from engine.config.layout import create_table
from engine.config.properties import load_table_config
from engine.config.schema import schema_with_meta
from engine.index.routing import BUCKET_COL, KEY_COL, PART_COL
from engine.io.naming import LogFileName, new_instant_time
from engine.logformat import append_blocks, encode_data_block
from engine.read.query import read_arrow
from engine.services.recovery import reconcile_attempts
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline, create_requested, transition_to_inflight
from engine.write import log_writer
from engine.write.pipeline import WriteError, _make_job, write_dataframe
from tests.support.oracle import hudi_read, rows_by_key

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
    routed = rows(["b"], 1).append_column(KEY_COL, pa.array(["b"])) \
        .append_column(PART_COL, pa.array([""])).append_column(BUCKET_COL, pa.array([7], pa.int32()))
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
    write_dataframe(path, spark.createDataFrame(rows(["c"], 1)))   # no heartbeat file: a dead writer
    assert not [f for f in os.listdir(os.path.join(path, ".hoodie")) if f.startswith(dead)]
    # As Java (v6): the failed log stays, masked by a rollback command block in a new log version.
    (rollback_log,) = [n for n in os.listdir(path) if n.endswith("_1-0-1")]
    assert os.path.exists(orphan) and "log.3_" in rollback_log
    assert sorted(read_arrow(path).column("id").to_pylist()) == ["a", "b", "c"]
    assert rows_by_key(read_arrow(path)) == rows_by_key(hudi_read(path))
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
    schedule_compaction(path, threshold_ms=int(dt.datetime(2024, 1, 2, tzinfo=dt.UTC).timestamp() * 1000))
    run_compaction(path, spark=spark)
    (link,) = [os.path.join(path, n) for n in os.listdir(path) if os.path.islink(os.path.join(path, n))]
    os.unlink(os.path.realpath(link))
    with pytest.raises(TidemarkError, match="missing target"):
        read_arrow(path)
    with pytest.raises(TidemarkError, match="missing target"):
        schedule_compaction(path, strategy="unbounded")


def test_recover_rolls_back_or_finishes_every_orphan_and_is_idempotent(tmp_path, monkeypatch):
    """Case 11: one table left with an interrupted clean, rollback, compaction run and write, plus temp files."""
    import time

    from engine.compaction import run_compaction
    from engine.io import faults
    from engine.services.clean import run_clean
    from engine.services.recovery import recover
    from engine.services.rollback import rollback
    from tests.support.inline_spark import InlineSpark
    from tests.support.table_model import HISTORY, LAST_WRITE, E, model_of, new_table, snapshot, write

    def crash(fault, operation):
        monkeypatch.setenv(faults.ENV, f"{fault}:raise")
        with pytest.raises(faults.InjectedFault):
            operation()
        monkeypatch.delenv(faults.ENV)

    path = str(tmp_path / "t")
    new_table(path)
    schedule_compaction(path, strategy="unbounded")
    run_compaction(path, spark=InlineSpark())
    write(path, *LAST_WRITE)
    crash("clean:deleted", lambda: run_clean(path, retain_commits=1))
    plan = schedule_compaction(path, threshold_ms=E + 3200, carry_over="copy").instant
    crash("execute:tasks", lambda: run_compaction(path, spark=InlineSpark()))
    crash("write:reconciled", lambda: write(path, "upsert", [(7, E + 9000)]))
    (dead,) = [i.timestamp for i in Timeline.load(path).pending() if i.action == "deltacommit"]
    # Any later writer, scheduler or cleaner would finish this rollback too (one rollback per instant).
    crash("rollback:files_removed", lambda: rollback(path, dead))
    stale = os.path.join(path, ".hoodie", ".temp-0123")
    open(stale, "wb").close()
    os.utime(stale, (time.time() - 3600,) * 2)
    pending = {i.action for i in Timeline.load(path).pending()}
    assert pending == {"clean", "rollback", "compaction", "deltacommit"}
    before_files = set(os.listdir(path))

    # The dry run says what follows and changes nothing.
    from engine import Table

    preview = Table.open(path).recover(dry_run=True)
    assert preview.dry_run and preview.changed and preview.resumed_rollbacks == [dead]
    assert preview.reverted_compactions == [plan] and len(preview.finished_cleans) == 1
    assert stale in preview.removed_files and "would resume the interrupted rollback of" in preview.message
    assert {i.action for i in Timeline.load(path).pending()} == pending and os.path.exists(stale)

    result = recover(path)
    assert result.resumed_rollbacks == [dead]
    assert result.rolled_back == [] and result.reverted_compactions == [plan]
    assert len(result.finished_cleans) == 1 and stale in result.removed_files
    assert [(i.timestamp, i.state.value) for i in Timeline.load(path).pending()] == [(plan, "requested")]
    assert not os.path.exists(stale) and not os.listdir(os.path.join(path, ".hoodie", ".temp"))
    assert not [n for n in os.listdir(path) if n.endswith(".parquet") and plan in n]   # partial outputs gone
    assert set(os.listdir(path)) <= before_files | {n for n in os.listdir(path) if n.endswith("_1-0-1")}
    assert snapshot(path) == model_of(HISTORY + [LAST_WRITE])
    assert not recover(path).changed                       # idempotent
    run_compaction(path, spark=InlineSpark())
    assert snapshot(path) == model_of(HISTORY + [LAST_WRITE])
