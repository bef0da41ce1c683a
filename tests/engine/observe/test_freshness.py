"""RO freshness report: no guarantee before an event-time compaction, "holds" after it, "broken" by late data."""
from __future__ import annotations

import json
import os

import pytest

from engine.config.eventtime import parse_time
from engine.observe.freshness import freshness_report
from tests.support.event_time_tables import T, build_table, copy_table, simulate_run, simulate_schedule, write_headerless_block, write_rows
from tests.support.event_time_tables import ts as _ts


def _report(path: str) -> dict:
    """The report as JSON-ready dict (times as ISO-8601 strings), as the CLI and the API print it."""
    return freshness_report(path).to_dict()


@pytest.fixture(scope="module")
def base_table(spark_session, tmp_path_factory) -> tuple[str, str, str]:
    path = str(tmp_path_factory.mktemp("fresh") / "t")
    w1, w2 = build_table(spark_session, path)
    return path, w1, w2


def test_no_event_time_compaction_means_no_guarantee(base_table) -> None:
    report = _report(base_table[0])
    assert report["guarantee"] == "none"
    assert report["ro_completion_time"] is None and report["threshold"] is None
    assert report["compaction_instant"] is None and report["late_records"] == 0 and report["late_instants"] == []
    assert "no event-time compaction" in report["message"]
    json.dumps(report)  # JSON-ready


def test_simulated_compaction_holds_then_late_data_breaks_it(base_table, spark_session, tmp_path) -> None:
    path = copy_table(base_table[0], tmp_path / "t")
    instant, _ = simulate_schedule(path, T)
    # A pending plan promises nothing yet.
    assert _report(path)["guarantee"] == "none"
    completion = parse_time("2013-06-02T01:00:00Z") - 1  # just below the smallest carried log
    simulate_run(path, instant, completion_ms=completion, freshness_ms=parse_time("2013-05-31T20:00:00Z"))

    report = _report(path)
    assert report["guarantee"] == "holds", report["message"]
    assert report["threshold"] == "2013-06-01T00:00:00.000Z"
    assert report["ro_completion_time"] == "2013-06-02T00:59:59.999Z"
    assert report["ro_freshness_time"] == "2013-05-31T20:00:00.000Z"
    assert report["compaction_instant"] == instant and report["source"] == "commit"
    assert report["late_records"] == 0 and report["late_min_event_time"] is None
    assert report["message"] == "RO view holds all data with event time ≤ 2013-06-02T00:59:59.999Z"

    # Not late: after the completion time. Late: ≤ T, exactly T, and inside (T, completion].
    w3 = write_rows(spark_session, path, {"eu": [("f", "2013-05-30T08:00:00Z"), ("g", "2013-06-05T00:00:00Z")],
                                          "us": [("h", "2013-05-31T23:00:00Z"), ("i", "2013-06-01T00:00:00Z")]})
    w4 = write_rows(spark_session, path, {"us": [("j", "2013-06-01T12:00:00Z"), ("k", "2013-06-09T00:00:00Z")]})
    report = _report(path)
    assert report["guarantee"] == "broken"
    assert report["late_records"] == 4
    assert report["late_min_event_time"] == "2013-05-30T08:00:00.000Z"
    assert report["late_instants"] == sorted([w3, w4])
    assert report["late_unknown_blocks"] == 0
    assert report["message"].startswith("guarantee broken: 4 records with event time ≤ 2013-06-02T00:59:59.999Z "
                                        "(earliest 2013-05-30T08:00:00.000Z) arrived after compaction " + instant)


def test_properties_fallback_and_unknown_blocks(base_table, tmp_path) -> None:
    path = copy_table(base_table[0], tmp_path / "t")
    instant, _ = simulate_schedule(path, T)
    simulate_run(path, instant)  # no explicit completion time: T is the promise
    # The commit leaves the active timeline (archived): hoodie.properties still carries the promise.
    for name in os.listdir(os.path.join(path, ".hoodie")):
        if name.startswith(instant):
            os.unlink(os.path.join(path, ".hoodie", name))
    report = _report(path)
    assert report["source"] == "properties" and report["compaction_instant"] == instant
    assert report["guarantee"] == "holds" and report["ro_completion_time"] == "2013-06-01T00:00:00.000Z"

    late = write_headerless_block(path, "eu", "z", "2013-05-01T00:00:00Z")
    report = _report(path)
    # Never a silent lie: the block's event time is unknown, so the message says the check is incomplete.
    assert report["late_unknown_blocks"] == 1 and report["late_records"] == 0
    assert report["guarantee"] == "holds"
    assert "unverified: 1 log block" in report["message"] and late in report["message"]


def test_real_event_time_compaction_end_to_end(base_table, spark_session, tmp_path) -> None:
    from engine.compaction import run_compaction, schedule_compaction

    path = copy_table(base_table[0], tmp_path / "t")
    scheduled = schedule_compaction(path, strategy="event_time", threshold_ms=T, carry_over="symlink")
    assert _report(path)["guarantee"] == "none"  # scheduled is not compacted
    run_compaction(path, spark=spark_session)
    report = _report(path)
    assert report["guarantee"] == "holds" and report["compaction_instant"] == scheduled.instant
    assert report["threshold"] == "2013-06-01T00:00:00.000Z"
    assert report["ro_completion_time"] == "2013-06-02T00:59:59.999Z"  # just below record "d", still in a log
    assert report["ro_freshness_time"] == "2013-05-31T20:00:00.000Z"   # record "b", the newest compacted

    late = write_rows(spark_session, path, {"eu": [("m", "2013-05-29T00:00:00Z"), ("n", "2013-07-01T00:00:00Z")],
                                            "us": [("c", "2013-05-31T12:30:00Z")]})  # an update of "c", late too
    report = _report(path)
    assert report["guarantee"] == "broken" and report["late_records"] == 2
    assert report["late_min_event_time"] == "2013-05-29T00:00:00.000Z" and report["late_instants"] == [late]

    # A later full compaction takes the late records into base files: the guarantee of T holds again, and the
    # RO times are the ones that compaction measured (no log left: everything up to the newest record).
    full = schedule_compaction(path, strategy="unbounded")
    run_compaction(path, spark=spark_session)
    report = _report(path)
    assert report["guarantee"] == "holds" and report["late_records"] == 0
    assert report["compaction_instant"] == scheduled.instant != full.instant  # T still comes from the event-time one
    assert report["threshold"] == "2013-06-01T00:00:00.000Z"
    assert report["ro_completion_time"] == report["ro_freshness_time"] == "2013-07-01T00:00:00.000Z"


def delete_rows(spark, path: str, rows: dict[str, list[tuple[str, str]]]) -> str:
    """Delete {partition: [(id, ISO event time)]} as one deltacommit (the ordering value is the event time)."""
    from engine.write.pipeline import write_dataframe

    data = [(rid, region, _ts(ts)) for region, recs in rows.items() for rid, ts in recs]
    return write_dataframe(path, spark.createDataFrame(data, "id string, region string, ts timestamp"), "delete").instant


def test_late_deletes_break_the_guarantee(base_table, spark_session, tmp_path) -> None:
    """Issue 9 case 5: a delete with event time ≤ the completion time, written after the compaction, is late
    data — the RO view still holds the row it deletes."""
    from engine.compaction import run_compaction, schedule_compaction

    path = copy_table(base_table[0], tmp_path / "t")
    schedule_compaction(path, strategy="event_time", threshold_ms=T, carry_over="copy")
    run_compaction(path, spark=spark_session)
    assert _report(path)["guarantee"] == "holds"
    on_time = delete_rows(spark_session, path, {"us": [("e", "2013-07-01T00:00:00Z")]})   # after the completion
    report = _report(path)
    assert report["guarantee"] == "holds" and report["late_records"] == 0, on_time
    late = delete_rows(spark_session, path, {"eu": [("a", "2013-05-31T11:00:00Z")]})
    report = _report(path)
    assert report["guarantee"] == "broken" and report["late_records"] == report["late_deletes"] == 1
    assert report["late_min_event_time"] == "2013-05-31T11:00:00.000Z" and report["late_instants"] == [late]
    assert "1 of them deletes" in report["message"]


def test_only_the_logs_late_writes_appended_to_are_read(base_table, spark_session, tmp_path, monkeypatch) -> None:
    """Late data can only be in logs a write after the compaction appended to (its write stats name them): the
    other logs of the latest slices are not read, and those are read together."""
    from engine import logformat
    from engine.timeline.instants import Timeline

    path = copy_table(base_table[0], tmp_path / "t")
    instant, _ = simulate_schedule(path, T)
    simulate_run(path, instant, completion_ms=parse_time("2013-06-02T01:00:00Z") - 1,
                 freshness_ms=parse_time("2013-05-31T20:00:00Z"))
    late = write_rows(spark_session, path, {"us": [("j", "2013-06-01T12:00:00Z")]})
    timeline = Timeline.load(path)
    named = {n for i in timeline.completed() if i.timestamp == late
             for stat in timeline.commit_metadata(i).write_stats for n in stat.names}
    calls: list[list[str]] = []
    real = logformat.scan_log_files

    def spy(items):  # type: ignore[no-untyped-def]
        items = list(items)
        calls.append([os.path.basename(p) for p, _ in items])
        return real(items)

    monkeypatch.setattr(logformat, "scan_log_files", spy)
    report = _report(path)
    assert report["guarantee"] == "broken" and report["late_records"] == 1
    assert len(calls) == 1 and set(calls[0]) == named
