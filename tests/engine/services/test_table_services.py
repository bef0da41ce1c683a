"""The services that follow a commit (engine.services.table_services): the automatic clean after writes and
compactions with each of Hudi's policies, async, every N commits; a busy lock or a failing clean never fails the
committed write; a kill -9 inside an automatic clean is finished by the next write."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.io import faults
from engine.io.naming import instant_to_millis
from engine.services import clean as clean_module
from engine.timeline.instants import CLEAN, State, Timeline
from tests.support.oracle import hudi_read

ROOT = Path(__file__).resolve().parents[3]
T0_MS = 1_735_689_600_000


def _table(tmp_path: Path, **settings: str) -> Table:
    return Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="seq",
                        event_time_field="event_time", partition_fields=["region"],
                        settings={"hoodie.cleaner.commits.retained": "1", **settings})


def _write(table: Table, tmp_path: Path, seq: int, keys: range = range(6)):
    path = tmp_path / f"b{seq}.parquet"
    pq.write_table(pa.table({
        "id": [f"k{k}" for k in keys], "region": ["eu" if k % 2 else "us" for k in keys],
        "seq": pa.array([seq] * len(keys), pa.int64()),
        "event_time": pa.array([T0_MS + seq * 1000 + k for k in keys], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
    }), path)
    return table.write([str(path)], local=True)


def _compacted(tmp_path: Path, **settings: str) -> Table:
    """A table of three writes, then a compaction of them all."""
    table = _table(tmp_path, **settings)
    for seq in range(3):
        _write(table, tmp_path, seq)
    _compact(table)
    return table


def _compact(table: Table):
    table.schedule_compaction(strategy="unbounded")
    return table.run_compaction()


def _cleans(table: Table) -> list[str]:
    return [i.timestamp for i in Timeline.load(table.path).completed() if i.action == CLEAN]


def _data_files(table: Table) -> set[str]:
    return {p.name for p in Path(table.path).rglob("*")
            if p.is_file() and ".hoodie" not in p.parts and p.name != ".hoodie_partition_metadata"}


def _seqs(table: Table) -> dict[str, int]:
    rows = hudi_read(table.path).to_pylist()
    return {r["id"]: r["seq"] for r in rows}


def test_a_compaction_cleans_the_slices_it_made_old(tmp_path: Path) -> None:
    table = _table(tmp_path)
    for seq in range(3):
        _write(table, tmp_path, seq)
    before = _data_files(table)
    result = _compact(table)
    assert result.services is not None and result.services.errors == []
    _write(table, tmp_path, 3)
    out = _write(table, tmp_path, 4)
    assert out.services is not None and out.services.clean is not None
    assert _cleans(table), "an automatic clean instant completed"
    assert not before & _data_files(table), "the pre-compaction logs went once a later commit was retained"
    assert _seqs(table) == {f"k{k}": 4 for k in range(6)}


def test_automatic_clean_can_be_switched_off(tmp_path: Path) -> None:
    table = _compacted(tmp_path, **{"hoodie.clean.automatic": "false"})
    out = _write(table, tmp_path, 3)
    _write(table, tmp_path, 4)
    assert out.services is not None and out.services.clean is None
    assert _cleans(table) == []


def test_keep_latest_file_versions_from_the_table(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                "hoodie.cleaner.fileversions.retained": "1"})
    for seq in range(2):
        _write(table, tmp_path, seq)
    before = _data_files(table)
    result = _compact(table)
    assert result.services is not None and result.services.clean is not None
    assert result.services.clean.policy == "KEEP_LATEST_FILE_VERSIONS"
    assert not before & _data_files(table), "one version kept: the compacted slice alone"


def test_keep_latest_by_hours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path, **{"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "1",
                                "hoodie.clean.automatic": "false"})
    for seq in range(2):
        _write(table, tmp_path, seq)
    old = _data_files(table)
    _compact(table)
    _write(table, tmp_path, 2)
    last = _write(table, tmp_path, 3).instant
    assert table.clean().instant is None, "every commit is within the hour: nothing to clean"
    # An hour on, only the last write is within the window: the slice before the compaction goes.
    later = (instant_to_millis(last) + 3_600_000) / 1000
    monkeypatch.setattr(clean_module.time, "time", lambda: later)
    result = table.clean()
    assert result.policy == "KEEP_LATEST_BY_HOURS" and result.earliest_instant_to_retain == last
    assert not old & _data_files(table)
    assert _seqs(table) == {f"k{k}": 3 for k in range(6)}


def test_clean_every_n_commits(tmp_path: Path) -> None:
    table = _compacted(tmp_path, **{"hoodie.clean.max.commits": "3"})
    ran = [(_write(table, tmp_path, seq).services.clean is not None) for seq in range(3, 7)]
    # Java's rule: a clean is attempted once 3 commits completed since the last clean instant (one that finds
    # nothing to delete writes none, so the next commit attempts again).
    assert ran == [True, False, False, True], ran
    assert len(_cleans(table)) == 1


def test_async_clean_overlaps_the_write_and_is_waited_for(tmp_path: Path) -> None:
    table = _compacted(tmp_path, **{"hoodie.clean.async": "true"})
    _write(table, tmp_path, 3)
    out = _write(table, tmp_path, 4)
    assert out.services is not None and out.services.clean is not None and out.services.errors == []
    assert not [i for i in Timeline.load(table.path).pending() if i.action == CLEAN]


class _GrantOnce:
    """A lock granted to the write and refused to everything after it (another writer got in between)."""

    def __init__(self) -> None:
        self.granted = 0
        self.held = False

    def acquire(self, timeout_s: float) -> bool:
        self.granted += 1
        self.held = self.granted == 1
        return self.held

    def release(self) -> None:
        self.held = False

    def is_held(self) -> bool:
        return self.held


def test_a_busy_lock_skips_the_clean_and_the_write_stands(tmp_path: Path) -> None:
    table = _compacted(tmp_path)
    path = tmp_path / "b9.parquet"
    _write(table, tmp_path, 9)
    out = table.write([str(path)], local=True, lock=_GrantOnce())
    assert out.services is not None and out.services.clean is None
    assert out.services.skipped and "clean" in out.services.skipped[0]
    assert Timeline.load(table.path).is_completed(out.instant)


def test_a_failing_clean_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _compacted(tmp_path)
    monkeypatch.setenv(faults.ENV, "clean:inflight:raise")
    out = _write(table, tmp_path, 4)
    assert out.services is not None and out.services.errors and "injected fault" in out.services.errors[0]
    assert Timeline.load(table.path).is_completed(out.instant)
    assert _seqs(table) == {f"k{k}": 4 for k in range(6)}
    monkeypatch.delenv(faults.ENV)
    nxt = _write(table, tmp_path, 5)
    assert nxt.services is not None and nxt.services.clean is not None and nxt.services.clean.resumed, \
        "the next write's clean finished the one left inflight"


_CHILD = """
import sys, pyarrow as pa, pyarrow.parquet as pq
from engine import Table
table = Table.open(sys.argv[1])
table.write([sys.argv[2]], local=True)
"""


def test_kill_9_inside_an_automatic_clean(tmp_path: Path) -> None:
    table = _compacted(tmp_path)
    batch = tmp_path / "kill.parquet"
    pq.write_table(pq.read_table(tmp_path / "b2.parquet").set_column(2, "seq", pa.array([7] * 6, pa.int64())), batch)
    env = {**os.environ, faults.ENV: "clean:deleting@2", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _CHILD, table.path, str(batch)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == faults.EXIT_CODE, done.stderr
    timeline = Timeline.load(table.path)
    assert [i for i in timeline.instants if i.action == CLEAN and i.state is State.INFLIGHT], "killed mid-clean"
    assert _seqs(table) == {f"k{k}": 7 for k in range(6)}, "the write committed before its clean"
    out = _write(table, tmp_path, 8)
    assert out.services is not None and out.services.clean is not None and out.services.clean.resumed
    assert not Timeline.load(table.path).pending()
    assert _seqs(table) == {f"k{k}": 8 for k in range(6)}
