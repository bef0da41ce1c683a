"""Compaction history: pending (requested, inflight) and completed compactions, with per-operation detail."""
from __future__ import annotations

import json
import os

import pytest

from engine.compaction.history import describe_compaction, list_compactions
from engine.errors import TidemarkError
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import COMPACTION, Timeline, transition_to_inflight
from tests.support.event_time_tables import T, build_table, copy_table, simulate_run, simulate_schedule


def _list(path: str) -> list[dict]:
    """The history as JSON-ready dicts (ISO-8601 times), as the CLI and the API print it."""
    return [c.to_dict() for c in list_compactions(path)]


@pytest.fixture(scope="module")
def base_table(spark_session, tmp_path_factory) -> tuple[str, str, str]:
    path = str(tmp_path_factory.mktemp("history") / "t")
    w1, w2 = build_table(spark_session, path)
    return path, w1, w2


def _logs_by_partition(path: str) -> dict[str, list[str]]:
    """Log names of the latest slices per partition, in log order (W1's log, then W2's)."""
    return {sl.partition_path: [lf.name for lf in sl.log_files] for sl in FileSystemView(path).latest_slices()}


def test_no_compactions(base_table) -> None:
    assert _list(base_table[0]) == []


def test_requested_inflight_completed(base_table, tmp_path) -> None:
    path = copy_table(base_table[0], tmp_path / "t")
    logs = _logs_by_partition(path)
    instant, _ = simulate_schedule(path, T)

    [row] = _list(path)
    assert row == {
        "instant": instant, "scheduled_at": row["scheduled_at"], "state": "requested",
        "threshold": "2013-06-01T00:00:00.000Z", "strategy": "event_time", "carry_over": "symlink", "exact": False,
        "file_groups": 2, "logs_compacted": 2, "logs_carried": 2, "records_written": None,
        "ro_completion_time": None, "ro_freshness_time": None,
    }
    transition_to_inflight(path, instant, COMPACTION)
    assert [r["state"] for r in _list(path)] == ["inflight"]

    simulate_run(path, instant, completion_ms=T + 1, freshness_ms=T - 1)
    [row] = _list(path)
    assert row["state"] == "completed" and row["records_written"] == 3  # a, b (eu) and c (us)
    assert row["ro_completion_time"] == "2013-06-01T00:00:00.001Z"
    assert row["ro_freshness_time"] == "2013-05-31T23:59:59.999Z"
    assert (row["file_groups"], row["logs_compacted"], row["logs_carried"]) == (2, 2, 2)

    detail = describe_compaction(path, instant).to_dict()
    ops = {op["partition"]: op for op in detail["operations"]}
    assert set(ops) == {"eu", "us"}
    for part, op in ops.items():
        assert op["logs_compacted"] == [logs[part][0]]
        [carried] = op["logs_carried"]
        assert carried["target"] == logs[part][1] and carried["mode"] == "symlink"
        assert os.readlink(os.path.join(path, part, carried["name"])) == carried["target"]
        assert os.path.isfile(os.path.join(path, part, op["new_base_file"]))
    assert (ops["eu"]["records_written"], ops["us"]["records_written"]) == (2, 1)
    json.dumps(detail)


def test_describe_refuses_non_compactions(base_table) -> None:
    path, w1, _ = base_table
    with pytest.raises(TidemarkError, match=f"{w1} is not a compaction on the active timeline"):
        describe_compaction(path, w1)
    with pytest.raises(TidemarkError, match="not an instant time"):
        describe_compaction(path, "yesterday")


def test_real_compactions_listed_oldest_first(base_table, spark_session, tmp_path) -> None:
    from engine.compaction import run_compaction, schedule_compaction
    from tests.support.event_time_tables import write_rows

    path = copy_table(base_table[0], tmp_path / "t")
    first = schedule_compaction(path, strategy="event_time", threshold_ms=T, carry_over="copy")
    assert [(r["instant"], r["state"], r["carry_over"]) for r in _list(path)] == \
        [(first.instant, "requested", "copy")]
    run_compaction(path, spark=spark_session)
    write_rows(spark_session, path, {"eu": [("p", "2013-06-10T00:00:00Z")]})
    second = schedule_compaction(path, strategy="event_time", threshold_ms=T + 86_400_000 * 30, carry_over="symlink")

    rows = _list(path)
    assert [(r["instant"], r["state"]) for r in rows] == [(first.instant, "completed"), (second.instant, "requested")]
    done, pending = rows
    assert done["records_written"] == 3 and done["logs_compacted"] == 2 and done["logs_carried"] == 2
    assert done["carry_over"] == "copy" and done["ro_completion_time"] == "2013-06-02T00:59:59.999Z"
    # Second plan: eu has the copied W2 log and the new log, us has the copied W2 log; nothing left to carry.
    assert pending["threshold"] == "2013-07-01T00:00:00.000Z"
    assert (pending["file_groups"], pending["logs_compacted"], pending["logs_carried"]) == (2, 3, 0)
    for op in describe_compaction(path, first.instant).to_dict()["operations"]:
        [carried] = op["logs_carried"]
        copy = os.path.join(path, op["partition"], carried["name"])
        assert carried["mode"] == "copy" and os.path.isfile(copy) and not os.path.islink(copy)
    assert Timeline.load(path).pending_compactions()[0].timestamp == second.instant
