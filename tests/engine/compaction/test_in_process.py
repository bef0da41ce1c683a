"""A compaction run's file groups on this process's threads (engine.compaction.in_process): the Spark job's
contract — start order, results in plan order, a write token per file group, progress, stop and failure leave
nothing running — and the same table as a run on Spark."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table, placement
from engine.compaction import in_process
from engine.compaction import plan as planning
from engine.errors import ConfigError
from engine.progress import Stopped
from engine.read.query import read_arrow
from engine.write import pipeline
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.placement_tables import INSTANTS, new_table, rows


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(in_process, "cpus", lambda: 2)


def test_results_in_item_order_with_a_token_per_start_slot(two_cpus):
    items = list("abcde")
    order = [4, 2, 0, 1, 3]
    seen: list[tuple[int, int, str]] = []

    def work(item: str) -> tuple[str, str | None]:
        time.sleep(0.01)
        return item, in_process.write_token()

    out = in_process.run_here(items, order, work, lambda d, t, u: seen.append((d, t, u)), None, "file groups")
    assert [item for item, _ in out] == items
    assert {item: token for item, token in out} == {items[i]: f"{slot}-0-0" for slot, i in enumerate(order)}
    assert in_process.write_token() is None
    assert seen[0] == (0, 5, "file groups") and seen[-1] == (5, 5, "file groups")
    assert [d for d, _, _ in seen] == sorted({d for d, _, _ in seen})


def test_on_threads_keeps_order_and_raises_once_every_thread_ended():
    """A Spark task's share of small groups: results in order; after a failure no further group starts, and the
    failure is raised only once the running ones ended, so none is still writing when Spark retries the task or
    the run rolls back."""
    assert in_process.on_threads([3, 1, 2], lambda x: x * 10, threads=2) == [30, 10, 20]
    started: list[int] = []
    finished: list[int] = []

    def work(x: int) -> int:
        started.append(x)
        if x == 0:
            time.sleep(0.05)   # group 1 is running by then
            raise ValueError("group 0 failed")
        time.sleep(0.2)
        finished.append(x)
        return x

    with pytest.raises(ValueError, match="group 0 failed"):
        in_process.on_threads([0, 1, 2, 3], work, threads=2)
    assert sorted(started) == [0, 1] and finished == [1]


@pytest.mark.parametrize("per_cpu", [1, 2])
def test_at_most_per_cpu_groups_per_cpu_run_at_once(two_cpus, per_cpu):
    """An object-store run keeps two groups per CPU in flight (one's round trips, the other's work); a local one."""
    lock = threading.Lock()
    now, most = [0], [0]

    def work(item: str) -> str:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.03)
        with lock:
            now[0] -= 1
        return item

    assert in_process.run_here(list("abcdefgh"), range(8), work, None, None, "file groups", per_cpu) == list("abcdefgh")
    assert most[0] == 2 * per_cpu


def test_a_stop_starts_nothing_more_and_waits_for_the_running(two_cpus):
    started: list[str] = []
    finished: list[str] = []
    lock = threading.Lock()

    def work(item: str) -> str:
        with lock:
            started.append(item)
        time.sleep(0.05)
        with lock:
            finished.append(item)
        return item

    with pytest.raises(Stopped) as stopped:
        in_process.run_here(list("abcdef"), range(6), work, None, lambda: bool(finished), "file groups")
    assert sorted(started) == sorted(finished), "nothing still running when Stopped is raised"
    assert stopped.value.done == len(finished) == len(started) == 2, "the two running finished, none started after"


def test_a_failure_is_raised_once_the_running_have_ended(two_cpus):
    ended: list[str] = []

    def work(item: str) -> str:
        if item == "a":
            raise ValueError("group a is damaged")
        time.sleep(0.1)
        ended.append(item)
        return item

    with pytest.raises(ValueError, match="group a is damaged"):
        in_process.run_here(list("abcdef"), range(6), work, None, None, "file groups")
    assert ended == ["b"], "b was running and finished; nothing started after the failure"


def test_a_failure_after_a_stop_counts_as_stopped(two_cpus):
    """As a cancelled Spark job group: a group failing once the stop was asked ends the run as Stopped."""
    asked = threading.Event()

    def work(item: str) -> str:
        if item == "b":
            asked.wait(2)
            raise OSError("interrupted")
        asked.set()
        return item

    with pytest.raises(Stopped) as stopped:
        in_process.run_here(list("abcd"), range(4), work, None, asked.is_set, "file groups")
    assert stopped.value.done == 1


def test_stop_before_the_first_start():
    with pytest.raises(Stopped) as stopped:
        in_process.run_here(["a"], [0], lambda item: item, None, lambda: True, "file groups")
    assert stopped.value.done == 0


# ------------------------------------------------------------------------------------------ same table

_STAGE = re.compile(r"(_\d+)-\d+-(\d+)([_.]|$)")   # a write token <slot>-<stage>-<attempt> in a file name


DAY = 86_400_000


def _batch(keys: range, seq: int, day: int) -> pa.Table:
    """rows(keys, seq) with event times moved `day` days on."""
    t = rows(keys, seq)
    ts = pa.array(t.column("ts").cast(pa.int64()).to_numpy() + day * DAY).cast(t.schema.field("ts").type)
    return t.set_column(t.schema.get_field_index("ts"), "ts", ts)


def _compacted(path: Path, tmp: Path, local: bool, monkeypatch) -> Table:
    """Three writes, then an exact event-time compaction with copy carry-over and T half a day on: every group
    folds its first two logs (the second brings late records of day 0), spills the second's records of day 1 (where
    it has any) into a carry-forward log and carries its third log (day 2) over."""
    table = new_table(path)
    instants = iter(INSTANTS)
    monkeypatch.setattr(pipeline, "new_instant_time", lambda after=None: next(instants))
    monkeypatch.setattr(planning, "new_instant_time", lambda after=None: "20260101000300000")
    batches = (_batch(range(2000), 1, 0),
               pa.concat_tables([_batch(range(0, 2000, 3), 2, 1), _batch(range(1, 2000, 5), 3, 0)]),
               _batch(range(0, 2000, 7), 4, 2))
    for i, batch in enumerate(batches):
        source = tmp / f"in{i}.parquet"
        pq.write_table(batch, source)
        table.write(str(source), local=True)
    plan = table.schedule_compaction(threshold=1_700_000_000_000 + DAY // 2, carry_over="copy", exact=True)
    assert plan.instant is not None
    table.run_compaction(plan.instant, local=local)
    return table


def _data_files(root: Path) -> list[str]:
    return sorted(_STAGE.sub(r"\1-S-\2\3", f.relative_to(root).as_posix()) for f in root.rglob("*")
                  if f.is_file() and ".hoodie" not in f.parts and not f.name.startswith(".hoodie_partition"))


def _base_files(root: Path) -> dict[str, dict]:
    out = {}
    for f in sorted(root.rglob("*.parquet")):
        table = pq.read_table(f)
        names = {_STAGE.sub(r"\1-S-\2\3", n) for n in table.column("_hoodie_file_name").to_pylist()}
        out[_STAGE.sub(r"\1-S-\2\3", f.relative_to(root).as_posix())] = {
            "rows": rows_by_key(table.drop_columns(["_hoodie_file_name"])), "file_names": names}
    return out


def test_in_process_and_spark_runs_write_the_same_table(tmp_path, spark, monkeypatch):
    here = _compacted(tmp_path / "here", tmp_path, True, monkeypatch)
    there = _compacted(tmp_path / "there", tmp_path, False, monkeypatch)
    ours, theirs = _base_files(Path(here.path)), _base_files(Path(there.path))
    assert len(ours) == 8 and sorted(ours) == sorted(theirs)   # 2 partitions x 4 buckets
    assert ours == theirs
    names = _data_files(Path(here.path))
    assert names == _data_files(Path(there.path))
    # the day-1 records have keys divisible by 3: all in region us, a carry-forward log in each of its 4 groups
    assert len([n for n in names if "_20260101000300000.log.1_" in n]) == 4
    assert len([n for n in names if "_20260101000300000.log.2_" in n]) == 8, "a carried log per group"
    for query in ("snapshot", "read_optimized"):
        assert rows_by_key(read_arrow(here.path, query)) == rows_by_key(read_arrow(there.path, query))
    for query in ("snapshot", "read_optimized"):
        assert rows_by_key(hudi_read(here.path, query)) == rows_by_key(hudi_read(there.path, query))


def test_a_bad_size_limit_refuses_the_run_before_the_plan_goes_inflight(tmp_path, monkeypatch):
    table = new_table(tmp_path / "t")
    pq.write_table(rows(range(100), 1), tmp_path / "in.parquet")
    table.write(str(tmp_path / "in.parquet"), local=True)
    plan = table.schedule_compaction(strategy="unbounded")
    monkeypatch.setattr(placement, "spark_running", lambda: False)
    monkeypatch.setenv(placement.MAX_COMPACTION_MB_ENV, "lots")
    with pytest.raises(ConfigError, match=placement.MAX_COMPACTION_MB_ENV):
        table.run_compaction(plan.instant)
    assert [c.state for c in table.compactions() if c.instant == plan.instant] == ["requested"]
