"""Compacting file groups with partial-update log blocks (IS_PARTIAL): hudi 0.5.0's snapshot is what it was, ours
equals it, the new base holds the merged rows, and logs that follow it in slice C read as they did before."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pyarrow as pa
import pytest

from engine.compaction import (
    EventTimeBasedCompactionStrategy,
    resolve_log_event_times,
    run_compaction,
    schedule_compaction,
)
from engine.compaction.carry_forward import SplitSpec, split_slice
from engine.config.eventtime import MAX_MS
from engine.config.properties import COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING
from engine.errors import ConfigError
from engine.read.merge import DataItem, DeleteItem
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from tests.support.fixtures import unzip_fixture
from tests.support.java_queries import rows as all_rows
from tests.support.oracle import hudi_read
from tests.support.partial_tables import Delete, Put, build, compact_with_late_writes
from tests.support.strategy_candidates import slice_

REWRITTEN = ("_hoodie_commit_seqno", "_hoodie_file_name")   # a compaction gives each row a new file and number


def rows(table: pa.Table, skip: tuple[str, ...] = REWRITTEN) -> list[str]:
    return all_rows(table, skip)


@pytest.mark.parametrize("name", ["table_partial_update", "table_partial_update_event_time"])
def test_java_table_compacts_in_place_with_hudis_snapshot_unchanged(tmp_path, name):
    path = str(unzip_fixture(name, tmp_path / "t"))
    snapshot = hudi_read(path)
    plan = schedule_compaction(path, strategy="event_time", threshold_ms=MAX_MS - 999)
    assert plan.written
    run_compaction(path, local=True)
    assert Timeline.load(path).commit_metadata(Timeline.load(path).get(plan.instant)[0]).is_compaction
    assert rows(hudi_read(path)) == rows(snapshot)
    assert rows(read_arrow(path)) == rows(snapshot)
    # every log was folded: the new base alone is the snapshot, for both readers
    assert rows(hudi_read(path, "read_optimized")) == rows(snapshot)
    assert rows(read_arrow(path, "read_optimized")) == rows(snapshot)


# ---------------------------------------------------------------------------------------------- planning

def test_log_event_times_flag_partial_logs_and_do_not_guess_what_they_lack(tmp_path):
    """The header scan flags a log with a partial block; a partial block without the event-time field (the
    ordering field `ts` here) leaves the log's minimum unknown: its records keep event times it does not hold."""
    for name, carries_ts in (("table_partial_update", False), ("table_partial_update_event_time", True)):
        view = FileSystemView(str(unzip_fixture(name, tmp_path / name)))
        times = resolve_log_event_times(view, view.timeline, view.latest_slices())
        assert times and all(t.partial for t in times.values())
        assert all((t.min_ms is not None) == carries_ts for t in times.values()), name


def test_a_slice_with_a_partial_log_is_compacted_whole():
    """A prefix folded into the base with the rest replayed after it would read differently (module doc of
    engine.compaction.carry_forward): the event-time cut is widened to every log of the slice."""
    sl = slice_("a", [100, 500, 600])
    strat = EventTimeBasedCompactionStrategy(200)
    assert [len(strat.plan([sl])[0].to_remain)] == [2]
    partial = dataclasses.replace(sl, logs=(sl.logs[0], dataclasses.replace(sl.logs[1], partial=True), sl.logs[2]))
    (op,) = strat.plan([partial])
    assert op.to_compact == partial.logs and op.to_remain == ()
    assert strat.plan([dataclasses.replace(partial, logs=partial.logs[1:])]) == []   # nothing at or before T


def test_exact_mode_refuses_a_group_with_partial_blocks(tmp_path):
    path = str(unzip_fixture("table_partial_update_event_time", tmp_path / "t"))
    with pytest.raises(ConfigError, match="exact mode cannot split partial-update log blocks"):
        schedule_compaction(path, strategy="event_time", threshold_ms=MAX_MS - 999, exact=True)
    assert not Timeline.load(path).pending_compactions()


# --------------------------------------------------------------------------- writes while the plan is pending

BASE = [("k0", {"ts": 3, "a": "a-0", "b": "b-0"}), ("k1", {"ts": 3, "a": "a-1", "b": "b-1"})]
HISTORIES = {
    # k1's fold ends on a partial record without ts: no ordering value, so the later full record (ts 0) wins and
    # the ordered delete (2) after it deletes; replayed with its row's ts 4 the winner would survive both.
    "unordered winner": ([Put({"k1": {"ts": 4, "a": None, "b": "b0"}}), Put({"k1": {"a": "a2"}}, ("a",))],
                         [Put({"k1": {"ts": 0, "a": "a9", "b": "b9"}}), Delete(("k1",), 2)]),
    # commit time: a partial record after the folded delete takes the old base row's other columns
    "partial after a delete": ([Delete(("k0",))], [Put({"k0": {"b": "b9"}}, ("b",))]),
    # event time: the later partial record loses on ts yet fills b, which the folded winner lacks
    "losing partial fills": ([Put({"k0": {"ts": 5, "a": "a1"}}, ("ts", "a"))],
                             [Put({"k0": {"ts": 4, "b": "b9"}}, ("ts", "b"))]),
}


@pytest.mark.parametrize("mode", [EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING])
@pytest.mark.parametrize("history", list(HISTORIES))
def test_partial_writes_into_the_pending_slice_read_as_before_the_run(tmp_path, mode, history):
    """Logs written while the plan is pending follow the new base once it completes; the folded winners their
    keys meet are withheld (replayed, the old base row kept), so hudi 0.5.0 reads what it read before."""
    folded, late = HISTORIES[history]
    path, instants = build(tmp_path / "t", mode, BASE, folded)
    compaction, before = compact_with_late_writes(path, late)
    assert rows(hudi_read(path), ("_hoodie_file_name",)) == rows(before, ("_hoodie_file_name",))
    assert rows(read_arrow(path), ("_hoodie_file_name",)) == rows(before, ("_hoodie_file_name",))
    assert any(".log.1_" in n for n in os.listdir(path) if compaction in n)   # the carry-forward log


# ---------------------------------------------------------------------------------------------- the split

SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("w", pa.string())])


def test_split_withholds_partial_winners_met_later_as_partial_items():
    """k: a partial winner lacking w and without ordering (its ts is the earlier record's) meets a later record:
    withheld as a partial item, then its row again without ts; j meets nothing later and goes into the base."""
    first = DataItem(pa.table({"_hoodie_record_key": ["k", "j"], "ts": [4, 1], "v": ["v1", "j1"]},
                              schema=SCHEMA.remove(3)), partial=True)
    second = DataItem(pa.table({"_hoodie_record_key": ["k"], "v": ["v2"]}, schema=SCHEMA.remove(3).remove(1)),
                      partial=True)
    later = DeleteItem(pa.array(["k"]), pa.array([2], pa.int64()), pa.array([False]))
    split = split_slice([first, second], [later], SplitSpec(EVENT_TIME_ORDERING, "ts", None, SCHEMA))
    assert split.base_winners.keys.to_pylist() == ["j"]
    assert [(i.partial, i.records.column_names, i.records.to_pylist()) for i in split.carry] == [
        (True, ["_hoodie_record_key", "ts", "v"], [{"_hoodie_record_key": "k", "ts": 4, "v": "v2"}]),
        (True, ["_hoodie_record_key", "v"], [{"_hoodie_record_key": "k", "v": "v2"}])]
    assert np.array_equal(split.base_winners.absent["w"], [True])
