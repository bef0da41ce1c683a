"""Tables Tidemark creates at version 8 (Hudi 1.0) and 9 (Hudi 1.1): written, compacted by event time with
carry-over, rolled back and cleaned in 1.x's on-disk form, with hudi 0.5.0 reading the same snapshot and RO view
after every step. Both versions share timeline layout 2; 9 states its ordering fields and merge mode outright."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.cli import main
from engine.compaction import run_compaction, schedule_compaction
from engine.config.layout import create_table
from engine.config.properties import load_table_config
from engine.io import faults
from engine.read.query import read_arrow
from engine.table import Table
from engine.timeline.instants import Timeline
from engine.write.pipeline import write_parquet
from tests.support.inline_spark import InlineSpark
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.spark_history import HISTORY, E, T, as_of, assert_ro_guarantee, ts_by_key, write


def agree(path) -> dict:
    """Ours and hudi 0.5.0 return the same snapshot and the same RO view; the snapshot."""
    snap = rows_by_key(read_arrow(str(path)))
    assert snap == rows_by_key(hudi_read(path))
    assert rows_by_key(read_arrow(str(path), "read_optimized")) == rows_by_key(hudi_read(path, "read_optimized"))
    return snap


def test_create_table_version_8(tmp_path, capsys):
    path = str(tmp_path / "t8")
    assert main(["create", path, "--name", "t8", "--record-key", "id", "--ordering-field", "ts",
                 "--event-time-field", "ts", "--table-version", "8"]) == 0
    props = load_table_config(path).props
    assert (props["hoodie.table.version"], props["hoodie.timeline.layout.version"]) == ("8", "2")
    assert props["hoodie.timeline.path"] == "timeline" and props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert props["hoodie.record.merge.strategy.id"] and props["hoodie.table.keygenerator.type"] == "NON_PARTITION"
    assert os.path.isdir(os.path.join(path, ".hoodie", "timeline", "history"))
    assert hudi_read(path).num_rows == 0   # hudi 0.5.0 accepts the empty table
    default = str(tmp_path / "t6")
    assert main(["create", default, "--name", "t6", "--record-key", "id", "--ordering-field", "ts",
                 "--event-time-field", "ts"]) == 0
    assert load_table_config(default).version == 6   # v6 stays the default
    capsys.readouterr()


def test_create_table_version_9_in_hudi_1_1_form(tmp_path, capsys):
    """The keys Hudi 1.1 writes for a new v9 table (as the sdist's v9 fixtures hold them): ordering fields and
    merge mode stated, key generator by type, table format native; no precombine field, payload class or key
    generator class."""
    path = str(tmp_path / "t9")
    assert main(["create", path, "--name", "t9", "--record-key", "id", "--ordering-field", "ts",
                 "--event-time-field", "ts", "--partition-field", "region", "--table-version", "9"]) == 0
    props = load_table_config(path).props
    assert (props["hoodie.table.version"], props["hoodie.table.initial.version"]) == ("9", "9")
    assert props["hoodie.timeline.layout.version"] == "2" and props["hoodie.timeline.path"] == "timeline"
    assert props["hoodie.table.ordering.fields"] == "ts" and props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert (props["hoodie.table.keygenerator.type"], props["hoodie.table.format"]) == ("SIMPLE", "native")
    for gone in ("hoodie.table.precombine.field", "hoodie.compaction.payload.class",
                 "hoodie.table.keygenerator.class", "hoodie.record.merge.strategy.id"):
        assert gone not in props, gone
    assert load_table_config(path).ordering_field == "ts"
    assert hudi_read(path).num_rows == 0
    capsys.readouterr()


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("mode,partitioned,carry,exact", [("event_time", True, "symlink", False),
                                                          ("commit_time", False, "copy", True)])
def test_v8_table_lifecycle_agrees_with_hudi(spark, tmp_path, mode, partitioned, carry, exact, version):
    path = tmp_path / "t"
    create_table(str(path), name="t", record_keys=["id"], partition_fields=["region"] if partitioned else [],
                 ordering_field="ts", event_time_field="ts", merge_mode=mode, table_version=version)
    for op, rows in HISTORY:
        write(spark, path, op, rows)
        agree(path)
    timeline = Timeline.load(str(path))
    assert all(i.completion_time for i in timeline.completed())
    assert not [n for n in os.listdir(path / ".hoodie") if n.endswith(".deltacommit")]   # all in timeline/
    logs = [n for _, _, files in os.walk(path) for n in files if ".log." in n]
    assert logs and all(n.split("_")[1].split(".")[0] in timeline.completed_timestamps() for n in logs)

    # Event-time partial compaction with carry-over, and a write while it is pending.
    before = agree(path)
    sp = schedule_compaction(str(path), strategy="event_time", threshold_ms=T, carry_over=carry, exact=exact)
    assert sp.written and any(op.get("symlinkOperations") for op in sp.operations)
    write(spark, path, "upsert", [(4, E + 6000), (40, E + 10)])
    during = agree(path)
    run_compaction(str(path), spark=spark)
    assert agree(path) == during != before
    history = [*HISTORY, ("upsert", [(4, E + 6000), (40, E + 10)])]
    assert ts_by_key(read_arrow(str(path))) == as_of(history)
    # The plan's guarantee covers what was written before it; k40 (event time ≤ T, written while it was pending)
    # is late data, and freshness says so.
    assert_ro_guarantee(ts_by_key(read_arrow(str(path), "read_optimized")), HISTORY, T)
    table = Table.open(str(path))
    fresh = table.freshness()
    assert fresh.compaction_instant == sp.instant and fresh.late_records == 1, fresh

    # A write after the compaction lands in the new slice; rolling it back deletes its logs (1.x form).
    write(spark, path, "upsert", [(3, E + 5000), (30, E + 100)])
    agree(path)
    last = Timeline.load(str(path)).last_completed()
    result = table.rollback(last.timestamp)
    assert result.deleted_files and not result.rollback_log_files
    assert all(f"_{last.timestamp}.log." in p for p in result.deleted_files)
    assert agree(path) == during
    rollback = Timeline.load(str(path)).get(result.rollback_instant)[0]
    assert rollback.completion_time and rollback.action == "rollback"

    # A delete, a second compaction, then a clean.
    write(spark, path, "delete", [(3, E + 5000)])
    snap = agree(path)
    schedule_compaction(str(path), strategy="event_time", threshold_ms=E + 7000, carry_over=carry)
    run_compaction(str(path), spark=spark)
    assert agree(path) == snap
    cleaned = table.clean(retain_commits=1)
    assert cleaned.deleted
    assert agree(path) == snap
    assert Timeline.load(str(path)).get(cleaned.instant)[0].completion_time


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("carry", ["symlink", "copy"])
def test_v8_carried_logs_of_an_unfinished_compaction_are_read_by_no_one(spark, tmp_path, monkeypatch, carry, version):
    """The carried logs are named by C: until C's commit is published they have no completion time, so hudi 0.5.0
    skips them and our view folds them away; every reader still reads the old slice once."""
    path = tmp_path / "t"
    create_table(str(path), name="t", record_keys=["id"], ordering_field="ts", event_time_field="ts",
                 table_version=version, settings={"hoodie.bucket.index.num.buckets": "1"})
    for op, rows in HISTORY:
        write(spark, path, op, rows)
    before = agree(path)
    sp = schedule_compaction(str(path), strategy="event_time", threshold_ms=T, carry_over=carry)
    monkeypatch.setenv("TIDEMARK_FAULT", "execute:tasks:abort")
    with pytest.raises(faults.InjectedAbort):
        run_compaction(str(path), spark=spark)
    monkeypatch.delenv("TIDEMARK_FAULT")
    carried = [n for n in os.listdir(path) if f"_{sp.instant}.log." in n]
    assert carried, "the run got past carry-over"
    assert agree(path) == before
    run_compaction(str(path), spark=spark)   # the rerun finishes it
    assert agree(path) == before


@pytest.fixture(params=[8, 9])
def table_version(request) -> int:
    return request.param


def _one_group_v8_table(tmp_path, version: int):
    """A one-file-group v8/v9 table ordered and timed by `ts`, and `put(op, columns)` writing one Parquet batch."""
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="ts", event_time_field="ts", table_version=version,
                 settings={"hoodie.bucket.index.num.buckets": "1"})

    def put(op: str, columns: dict) -> None:
        source = str(tmp_path / f"in-{len(os.listdir(tmp_path))}.parquet")
        pq.write_table(pa.table(columns), source)
        write_parquet(path, [source], op, spark=InlineSpark())

    return path, put


def test_v8_a_write_made_while_the_plan_was_pending_comes_after_the_carried_logs(tmp_path, table_version):
    """A carried log is re-published under compaction C, which completes after every write made while C was
    pending, yet its records are older than theirs. A v8 slice's logs are read in name order (instant, version,
    write token), as Java and hudi 0.5.0 read them, so on an ordering-value tie the later write wins. Found by
    the model soak: ordered by completion time, the carried w3 came last and won over w4."""
    path, put = _one_group_v8_table(tmp_path, table_version)
    put("upsert", {"id": ["k0"], "ts": pa.array([E + 21_000], pa.int64()), "v": ["w1"]})
    put("delete", {"id": ["k0"]})                                  # a processing-time delete: compacted
    put("upsert", {"id": ["k0"], "ts": pa.array([E], pa.int64()), "v": ["w3"]})
    plan = Table.open(path).schedule_compaction(threshold=E - 1000, carry_over="symlink")
    assert plan.operations and plan.operations[0].logs_carried      # w3's log is carried over
    put("upsert", {"id": ["k0"], "ts": pa.array([E], pa.int64()), "v": ["w4"]})   # same ordering value, later
    Table.open(path).run_compaction(plan.instant)
    assert read_arrow(path).column("v").to_pylist() == ["w4"]
    agree(path)


def test_v8_writes_made_while_the_plan_was_pending_still_order_the_compacted_records(tmp_path, table_version):
    """Event-time ordering: a record folded into the new base is withheld into the carry-forward log when a later
    log in slice C deletes its key by processing time and re-inserts it with a lower ordering value (against a
    base row the re-insert would lose). On v8 those later logs are named by their own writes, not by C: the run
    must still find them (it missed them, and the older record won; found by the model soak)."""
    path, put = _one_group_v8_table(tmp_path, table_version)
    put("upsert", {"id": ["k0"], "ts": pa.array([E + 20_000], pa.int64()), "v": ["w1"]})
    plan = Table.open(path).schedule_compaction(threshold=E + 30_000, carry_over="symlink")
    assert plan.operations
    put("delete", {"id": ["k0"]})                                                   # processing time: always wins
    put("upsert", {"id": ["k0"], "ts": pa.array([E + 5_000], pa.int64()), "v": ["w3"]})   # re-inserted, lower
    before = agree(path)
    Table.open(path).run_compaction(plan.instant)
    assert agree(path) == before
    assert read_arrow(path).column("v").to_pylist() == ["w3"]
