"""Archival of the active timeline (engine.services.archive, archive_log, lsm_history): bounded by Hudi's keys,
stopped by what later work needs, read back, and safe across a kill -9 at each step — with hudi 0.5.0 reading the
same rows before and after."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.errors import ConfigError
from engine.io import faults
from engine.read.query import QuerySpec, read_arrow
from engine.services.archive import archived_instants
from engine.timeline import archive_log, layout_v8
from engine.timeline.instants import COMMIT_ACTIONS, DELTACOMMIT, Timeline
from tests.support.java_queries import assert_same
from tests.support.oracle import hudi_read

ROOT = Path(__file__).resolve().parents[3]
T0_MS = 1_735_689_600_000
SMALL = {"hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6"}


def _table(tmp_path: Path, version: int, **settings: str) -> Table:
    return Table.create(str(tmp_path / f"v{version}"), name="t", record_keys=["id"], ordering_field="seq",
                        event_time_field="event_time", partition_fields=["region"], table_version=version,
                        settings={**SMALL, **settings})


def _write(table: Table, tmp_path: Path, n: int):
    keys = [(n * 3 + k) % 20 for k in range(5)]
    path = tmp_path / "batch.parquet"
    pq.write_table(pa.table({
        "id": [f"k{k}" for k in keys], "region": ["eu" if k % 2 else "us" for k in keys],
        "seq": pa.array([n] * 5, pa.int64()),
        "event_time": pa.array([T0_MS + n * 1000 + k for k in keys], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
    }), path)
    return table.write([str(path)], local=True)


def _feed(table: Table, tmp_path: Path, commits: int, compact_every: int = 15) -> list[str]:
    written = []
    for n in range(commits):
        out = _write(table, tmp_path, n)
        assert out.services is not None and not out.services.errors, out.services
        written.append(out.instant)
        if (n + 1) % compact_every == 0:   # event time: logs below the threshold fold, the others carry over
            plan = table.schedule_compaction(strategy="event_time", threshold=T0_MS + (n - 3) * 1000)
            if plan.instant is not None:
                table.run_compaction(plan.instant)
    return written


def _reads_like_hudi(path: str) -> None:
    assert_same(read_arrow(path, "snapshot"), hudi_read(path), "snapshot")
    assert_same(read_arrow(path, "read_optimized"), hudi_read(path, "read_optimized"), "read_optimized")


@pytest.mark.parametrize("version", [6, 8, 9])
def test_a_long_lived_table_keeps_a_bounded_timeline_and_reads_like_hudi(tmp_path: Path, version: int) -> None:
    table = _table(tmp_path, version)
    written = _feed(table, tmp_path, 60)
    timeline = Timeline.load(table.path)
    commits = [i for i in timeline.completed() if i.action in COMMIT_ACTIONS]
    # keep.max, plus the commits since the latest compaction (kept with it, as Java keeps them for a MOR table)
    assert len(commits) <= 6 + 15 + 1 and len(timeline.instants) <= 2 * (6 + 15 + 1)
    archived = {i.instant for i in table.timeline(archived=True) if i.archived}
    assert set(written) <= archived | {i.timestamp for i in timeline.instants}
    assert len(archived & set(written)) >= 40
    _reads_like_hudi(table.path)
    assert sorted(r["id"] for r in hudi_read(table.path).to_pylist()) == sorted(f"k{k}" for k in range(20))


def test_the_v6_archive_is_hoodie_archived_meta_entries(tmp_path: Path) -> None:
    table = _table(tmp_path, 6)
    written = _feed(table, tmp_path, 20)
    folder = Timeline.load(table.path).archive_folder
    assert [n for n in os.listdir(folder) if n.startswith(".commits_.archive.")] == [".commits_.archive.1_1-0-1"]
    entries = list(archive_log.read_entries(folder))
    done = [e for e in entries if e["actionType"] == DELTACOMMIT and e["actionState"] == "COMPLETED"]
    assert done and all(e["hoodieCommitMetadata"]["partitionToWriteStats"] for e in done)
    assert {e["commitTime"] for e in done} <= set(written)
    assert {e["actionState"] for e in entries} >= {"REQUESTED", "INFLIGHT", "COMPLETED"}


def test_the_v8_history_is_java_lsm_layout(tmp_path: Path) -> None:
    table = _table(tmp_path, 8)
    _feed(table, tmp_path, 40)
    history = Timeline.load(table.path).history_folder
    assert history is not None
    names = os.listdir(history)
    assert "_version_" in names and f"manifest_{layout_v8.snapshot_version(history)}" in names
    files = layout_v8.manifest_files(history)
    assert files and all(layout_v8.history_file_range(f) is not None for f in files)
    meta = pq.read_table(os.path.join(history, files[0]))
    assert meta.column_names == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
    completions = layout_v8.history_completion_times(history)
    assert all(meta.column("completionTime").to_pylist()) and completions


def test_a_pending_compaction_stops_archival_before_it(tmp_path: Path) -> None:
    table = _table(tmp_path, 6)
    _feed(table, tmp_path, 8)
    plan = table.schedule_compaction(strategy="unbounded")
    assert plan.instant is not None
    _feed(table, tmp_path, 12, compact_every=1000)
    timeline = Timeline.load(table.path)
    before = [i for i in timeline.completed() if i.action in COMMIT_ACTIONS and i.timestamp < plan.instant]
    assert before, "the last commit before the pending compaction stays, so the timeline starts before it"
    assert all(a.timestamp < before[-1].timestamp for a in archived_instants(timeline))
    table.run_compaction(plan.instant)
    _reads_like_hudi(table.path)


def test_the_latest_clean_and_compaction_stay_reachable(tmp_path: Path) -> None:
    table = _table(tmp_path, 8)
    _feed(table, tmp_path, 45)
    timeline = Timeline.load(table.path)
    clean = timeline.last_completed(frozenset({"clean"}))
    assert clean is not None
    retain = timeline.clean_record(clean.timestamp).earliest_commit_to_retain
    assert not retain or any(i.timestamp <= retain for i in timeline.instants if i.action in COMMIT_ACTIONS)
    assert table.compactions(), "the latest compaction is still on the active timeline"
    assert table.freshness().ro_completion_time is not None


def test_archival_settings_are_checked(tmp_path: Path) -> None:
    table = _table(tmp_path, 6, **{"hoodie.keep.min.commits": "6", "hoodie.keep.max.commits": "6"})
    with pytest.raises(ConfigError, match="hoodie.keep.min.commits"):
        table.archive()
    table = Table.create(str(tmp_path / "b"), name="b", record_keys=["id"], ordering_field="seq",
                         event_time_field="event_time", settings={"hoodie.keep.min.commits": "5",
                                                                  "hoodie.keep.max.commits": "8"})
    with pytest.raises(ConfigError, match="hoodie.cleaner.commits.retained"):
        table.archive()


def test_an_incremental_read_into_the_archive_is_refused_naming_it(tmp_path: Path) -> None:
    table = _table(tmp_path, 6)
    _feed(table, tmp_path, 30)
    with pytest.raises(ConfigError, match="archived"):
        read_arrow(table.path, QuerySpec("incremental", begin="0"))


_CHILD = "import sys; from engine import Table; Table.open(sys.argv[1]).archive()"


@pytest.mark.parametrize("version,fault", [(6, "archive:written"), (6, "archive:deleting@3"),
                                           (8, "archive:written"), (8, "archive:deleting@3")])
def test_kill_9_during_archival(tmp_path: Path, version: int, fault: str) -> None:
    table = _table(tmp_path, version, **{"hoodie.archive.automatic": "false"})
    _feed(table, tmp_path, 30)
    before = read_arrow(table.path, "snapshot")
    env = {**os.environ, faults.ENV: fault, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _CHILD, table.path], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == faults.EXIT_CODE, done.stderr
    assert_same(read_arrow(table.path, "snapshot"), before, "after the kill")
    _reads_like_hudi(table.path)
    assert table.archive().archived, "the next archival redoes the job"
    timeline = Timeline.load(table.path)
    assert len([i for i in timeline.completed() if i.action in COMMIT_ACTIONS]) <= 6 + 15 + 1
    listed = [i.timestamp for i in archived_instants(timeline)]
    assert len(listed) == len(set(listed)), "an instant archived twice is listed once"
    assert_same(read_arrow(table.path, "snapshot"), before, "after the redo")
    _reads_like_hudi(table.path)
