"""Cancelling a running compaction (`should_stop`): no further file group starts, the inflight plan is
rolled back, nothing is committed — hudi 0.5.0 reads the same snapshot and read-optimized view as before —
and the table can be compacted again at once."""
from __future__ import annotations

import pytest

from engine import Cancelled, Table
from engine.compaction import in_process
from engine.read.query import read_arrow
from tests.support.oracle import hudi_read, rows_by_key


@pytest.fixture
def demo_path(tmp_path, spark):
    from engine.demo import run_demo

    path = tmp_path / "flights"
    run_demo(str(path), spark, batches=2)
    return path


def views(path) -> tuple[dict, dict]:
    snapshot = rows_by_key(read_arrow(str(path), "snapshot"))
    assert snapshot == rows_by_key(hudi_read(path, "snapshot"))
    ro = rows_by_key(hudi_read(path, "read_optimized"))
    assert ro == rows_by_key(read_arrow(str(path), "read_optimized"))
    return snapshot, ro


@pytest.mark.parametrize("local", [False, True], ids=["spark", "in_process"])
def test_a_cancelled_compaction_rolls_back_and_the_table_compacts_again(demo_path, spark, local):
    table = Table.open(str(demo_path))
    before = views(demo_path)
    timeline_before = [(i.instant, i.action, i.state) for i in table.timeline()]
    plan = table.schedule_compaction(data_latency="0s")
    asked = []

    def stop() -> bool:
        asked.append(True)
        return True

    with pytest.raises(Cancelled) as cancelled:
        table.run_compaction(plan.instant, should_stop=stop, local=local)
    assert asked and cancelled.value.instant == plan.instant
    assert "rolled back and nothing was committed" in str(cancelled.value)
    assert [c for c in table.compactions() if c.instant == plan.instant] == []
    assert views(demo_path) == before
    after = [(i.instant, i.action, i.state) for i in table.timeline() if i.action != "rollback"]
    assert after == timeline_before, "only the rollback instant was added"

    again = table.schedule_compaction(data_latency="0s")
    result = table.run_compaction(again.instant, should_stop=lambda: False, local=local)
    assert result.instant == again.instant and result.base_files
    assert views(demo_path)[0] == before[0]


def test_an_in_process_run_stopped_between_file_groups_rolls_back_what_it_wrote(demo_path, spark, monkeypatch):
    monkeypatch.setattr(in_process, "cpus", lambda: 1)   # one group at a time: the stop comes after the first
    table = Table.open(str(demo_path))
    before = views(demo_path)
    plan = table.schedule_compaction(data_latency="0s")
    assert len(plan.operations) > 1
    finished: list[int] = []
    with pytest.raises(Cancelled) as cancelled:
        table.run_compaction(plan.instant, on_progress=lambda done, total, unit: finished.append(done),
                             should_stop=lambda: bool(finished) and finished[-1] >= 1, local=True)
    assert f"cancelled after 1 of {len(plan.operations)} file groups" in str(cancelled.value)
    assert not [p for p in demo_path.rglob(f"*{plan.instant}*") if ".hoodie" not in p.parts], \
        "the finished group's base file and carried logs were rolled back"
    assert views(demo_path) == before
