"""Backlog metrics: counts match the files on disk exactly, carried-over links count, the stored dict keeps them."""
from __future__ import annotations

import glob
import json
import os

import pytest

from engine.config.eventtime import parse_time
from engine.observe.metrics import backlog_metrics
from tests.support.event_time_tables import T, build_table, copy_table, simulate_run, simulate_schedule


def _metrics(path: str) -> dict:
    """The metrics as JSON-ready dict (ISO times plus min_event_time_ms), as the CLI and the API print them."""
    return backlog_metrics(path).to_dict()


def _logs_on_disk(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "*", ".*.log.*")))


@pytest.fixture(scope="module")
def base_table(spark_session, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("metrics") / "t")
    build_table(spark_session, path)
    return path


def test_metrics_before_compaction_match_disk(base_table) -> None:
    m = _metrics(base_table)
    logs = _logs_on_disk(base_table)
    assert len(logs) == 4  # two writes x two partitions, a new log version per write
    assert m["file_slices"] == 2 and m["file_slices_with_logs"] == 2
    assert m["remaining_log_files"] == 4
    assert m["remaining_log_bytes"] == sum(os.path.getsize(p) for p in logs)
    assert m["min_event_time"] == "2013-05-31T10:00:00.000Z"  # smallest event time written (record "a")
    assert m["min_event_time_ms"] == parse_time("2013-05-31T10:00:00Z")
    assert m["carried_over_log_files"] == 0
    assert m["log_event_time_sources"] == {"header": 4, "write_stats": 0, "decoded": 0, "none": 0}
    assert m["pending_compactions"] == 0 and m["pending_compaction_instants"] == []
    json.dumps(m)


def test_pending_then_completed_compaction(base_table, tmp_path) -> None:
    path = copy_table(base_table, tmp_path / "t")
    instant, _ = simulate_schedule(path, T)
    m = _metrics(path)
    # Scheduled but not run: nothing left the logs yet.
    assert m["pending_compactions"] == 1 and m["pending_compaction_instants"] == [instant]
    assert m["remaining_log_files"] == 4 and m["min_event_time"] == "2013-05-31T10:00:00.000Z"

    simulate_run(path, instant)
    m = _metrics(path)
    links = [p for p in _logs_on_disk(path) if os.path.islink(p)]
    assert len(links) == 2  # W2's logs carried into slice C
    assert m["pending_compactions"] == 0
    assert m["file_slices"] == 2 and m["file_slices_with_logs"] == 2
    assert m["remaining_log_files"] == 2 and m["carried_over_log_files"] == 2
    # Sizes follow the links to their targets (a symlink's own size is the length of its target name).
    assert m["remaining_log_bytes"] == sum(os.stat(p).st_size for p in links)
    assert m["remaining_log_bytes"] != sum(os.lstat(p).st_size for p in links)
    assert m["min_event_time"] == "2013-06-02T01:00:00.000Z"  # record "d", the oldest data still in a log


def test_metrics_dict_keeps_every_figure_through_json(base_table) -> None:
    """The dict the control plane stores and /metrics exports (webapp.api.table_gauges reads the stored sample):
    through JSON it keeps every figure, and its ISO min event time and millis agree."""
    metrics = backlog_metrics(base_table)
    m = json.loads(json.dumps(metrics.to_dict()))
    assert parse_time(m["min_event_time"]) == m["min_event_time_ms"] == parse_time("2013-05-31T10:00:00Z")
    assert (m["remaining_log_files"], m["file_slices_with_logs"], m["pending_compactions"]) == (4, 2, 0)
    assert m["remaining_log_bytes"] == metrics.remaining_log_bytes == sum(os.path.getsize(p)
                                                                          for p in _logs_on_disk(base_table))
    assert m["log_event_time_sources"]["header"] == 4 and m["corrupt_log_blocks"] == 0


def test_real_compaction_end_to_end(base_table, spark_session, tmp_path) -> None:
    from engine.compaction import run_compaction, schedule_compaction

    path = copy_table(base_table, tmp_path / "t")
    scheduled = schedule_compaction(path, strategy="event_time", threshold_ms=T, carry_over="copy")
    assert _metrics(path)["pending_compaction_instants"] == [scheduled.instant]
    run_compaction(path, spark=spark_session)
    m = _metrics(path)
    # The copies named with the compaction instant are the remaining logs; the originals stay in the old slice.
    copies = [p for p in _logs_on_disk(path) if f"_{scheduled.instant}.log." in os.path.basename(p)]
    assert len(copies) == 2 and not any(os.path.islink(p) for p in copies)
    assert m["remaining_log_files"] == 2 and m["carried_over_log_files"] == 2   # copies are carried over too
    assert m["remaining_log_bytes"] == sum(os.path.getsize(p) for p in copies)
    assert m["min_event_time"] == "2013-06-02T01:00:00.000Z" and m["pending_compactions"] == 0
    assert m["log_event_time_sources"]["header"] == 2
