"""Strategies, log event-time resolution, plan scheduling and the RO-time arithmetic (no Spark needed)."""
from __future__ import annotations

import json
import os

import pytest

from engine import logformat
from engine.compaction import (
    EventTimeBasedCompactionStrategy,
    SizeBasedStrategy,
    UnboundedStrategy,
    compute_ro_times,
    resolve_log_event_times,
    run_compaction,
    schedule_compaction,
    strategy_for,
)
from engine.compaction import plan as plan_mod
from engine.config import eventtime
from engine.config.layout import create_table
from engine.errors import ConfigError, TidemarkError
from engine.io.naming import instant_to_millis
from engine.services.rollback import rollback
from engine.slices.fsview import FileSystemView
from engine.timeline import avro_models
from engine.timeline.instants import Timeline
from tests.support.fixtures import unzip_fixture
from tests.support.inline_spark import InlineSpark
from tests.support.strategy_candidates import slice_
from tests.support.table_model import E, new_table, read_optimized, snapshot, write

MB = 1024 * 1024
LOG_TS = 1695046462179  # `ts` of the single update in v6_trips_8i1u's log


# ------------------------------------------------------------------------------------------ strategies

def test_event_time_compacts_the_prefix_up_to_the_last_log_at_or_before_t():
    sl = slice_("a", [100, 300, 150, 500, 400])
    to_compact, to_remain = EventTimeBasedCompactionStrategy(200).filter_log_files(sl)
    # 300 > T is compacted too: it sits before 150 ≤ T, and only a prefix keeps merge order safe.
    assert [lf.min_event_time for lf in to_compact] == [100, 300, 150]
    assert [lf.min_event_time for lf in to_remain] == [500, 400]


def test_event_time_unknown_counts_as_at_or_before_t():
    sl = slice_("a", [300, None, 500])
    to_compact, to_remain = EventTimeBasedCompactionStrategy(200).filter_log_files(sl)
    assert [lf.version for lf in to_compact] == [1, 2] and [lf.version for lf in to_remain] == [3]


def test_event_time_nothing_at_or_before_t_and_everything():
    strat = EventTimeBasedCompactionStrategy(200)
    assert strat.filter_log_files(slice_("a", [300, 250])) == ((), slice_("a", [300, 250]).logs)
    assert strat.plan([slice_("a", [300, 250])]) == []
    ops = strat.plan([slice_("a", [100, 150]), slice_("b", [900])])
    assert [op.slice.file_id for op in ops] == ["a"] and ops[0].to_remain == ()
    assert ops[0].metrics["TOTAL_LOG_FILES"] == 2.0 and ops[0].metrics["TOTAL_LOG_FILES_SIZE"] == 200.0


def test_unbounded_takes_every_log():
    ops = UnboundedStrategy().plan([slice_("a", [1, 2]), slice_("b", [None])])
    assert [(op.slice.file_id, len(op.to_compact), len(op.to_remain)) for op in ops] == [("a", 2, 0), ("b", 1, 0)]


def test_size_based_threshold_order_and_io_bound():
    slices = [slice_("small", [1], [10]), slice_("big", [1, 2], [3 * MB, 3 * MB], base_size=4 * MB),
              slice_("mid", [1], [2 * MB], base_size=MB)]
    ops = SizeBasedStrategy(threshold_bytes=1000, target_io_mb=512_000).plan(slices)
    assert [op.slice.file_id for op in ops] == ["big", "mid"]          # small is under the threshold
    bounded = SizeBasedStrategy(threshold_bytes=0, target_io_mb=5).plan(slices)
    assert [op.slice.file_id for op in bounded] == ["big"]             # big alone is 14 MB of IO > 5 MB
    assert bounded[0].metrics["TOTAL_IO_MB"] == pytest.approx((4 + 6) + 4)


def test_strategy_for_and_bad_parameters():
    assert isinstance(strategy_for("unbounded"), UnboundedStrategy)
    assert strategy_for("event_time", threshold_ms=5).threshold_ms == 5
    assert strategy_for("size", threshold_bytes=1, target_io_mb=2).target_io_mb == 2
    with pytest.raises(ConfigError, match="unknown compaction strategy 'daybased'"):
        strategy_for("daybased")
    with pytest.raises(ConfigError, match="threshold"):
        strategy_for("event_time", threshold_ms=None)
    with pytest.raises(ConfigError, match="bad parameters"):
        strategy_for("event_time", foo=1)


# -------------------------------------------------------------------------------------- RO time math

def test_ro_times():
    # completion just below the earliest remaining log, never below T; freshness is monotone.
    assert compute_ro_times(100, [150, 300], 120, None) == (149, 120)
    assert compute_ro_times(100, [50], 120, (None, 200)) == (100, 200)          # late log: clamp to T
    assert compute_ro_times(100, [], 120, None) == (120, 120)                   # nothing left: max(T, freshness)
    assert compute_ro_times(100, [], 90, None) == (100, 90)
    assert compute_ro_times(100, [None, 300], 120, None) == (100, 120)          # unknown log: only T
    assert compute_ro_times(None, [], 120, None) == (120, 120)
    assert compute_ro_times(None, [None], None, None) == (None, None)


# ---------------------------------------------------------------------- event times of Java-written logs

@pytest.fixture
def trips(tmp_path):
    return str(unzip_fixture("v6_trips_8i1u", tmp_path / "t"))


def test_java_logs_fall_back_to_decoding_the_ordering_field(trips):
    view = FileSystemView(trips)
    slices = view.latest_slices()
    times = resolve_log_event_times(view, view.timeline, slices)
    assert len(times) == 1
    (path, t), = times.items()
    # The Java deltacommit has minEventTime null and no header attribute: decoded from `ts` (precombine).
    assert t.source == "decoded" and t.min_ms == t.max_ms == LOG_TS


def test_write_stats_are_used_before_decoding(trips):
    timeline = Timeline.load(trips)
    inst = timeline.completed()[-1]
    path = timeline.instant_path(inst)
    meta = json.load(open(path))
    for stats in meta["partitionToWriteStats"].values():
        for s in stats:
            s["minEventTime"], s["maxEventTime"] = 5, 6
    with open(path, "w") as fh:
        json.dump(meta, fh)
    view = FileSystemView(trips)
    (t,) = resolve_log_event_times(view, view.timeline, view.latest_slices()).values()
    assert (t.min_ms, t.max_ms, t.source) == (5, 6, "write_stats")


# --------------------------------------------------------------------------------------- scheduling

def test_schedule_writes_a_plan_with_metrics_and_metadata(trips):
    sp = schedule_compaction(trips, threshold_ms=LOG_TS, carry_over="copy")
    assert sp.written and len(sp.operations) == 1
    plan = Timeline.load(trips).read_compaction_plan(sp.instant)
    op = plan["operations"][0]
    assert op["partitionPath"] == "city=san_francisco" and op["baseInstantTime"] == "20250331030642808"
    assert op["dataFilePath"].endswith("_20250331030642808.parquet") and len(op["deltaFilePaths"]) == 1
    assert op["symlinkOperations"] == []
    assert set(op["metrics"]) == {"TOTAL_LOG_FILES", "TOTAL_IO_READ_MB", "TOTAL_LOG_FILES_SIZE",
                                  "TOTAL_IO_WRITE_MB", "TOTAL_IO_MB"}
    extra = plan["extraMetadata"]
    assert extra["tidemark.threshold"] == str(LOG_TS) and extra["tidemark.strategy"] == "event_time"
    assert extra["tidemark.carryOver"] == "copy" and extra["tidemark.exact"] == "false"
    assert json.loads(extra["tidemark.eventTimeSources"]) == {"header": 0, "write_stats": 0, "decoded": 1, "none": 0}


def test_nothing_to_compact_writes_no_plan(trips):
    sp = schedule_compaction(trips, threshold_ms=LOG_TS - 1)
    assert not sp.written and sp.operations == [] and sp.instant is None and "no plan written" in sp.message
    assert f"threshold {eventtime.iso(LOG_TS - 1)})" in sp.message   # a time a person reads, not epoch millis
    assert Timeline.load(trips).pending_compactions() == []


def test_threshold_from_data_latency(trips):
    sp = schedule_compaction(trips, data_latency_ms=3_600_000)
    assert sp.threshold_ms == instant_to_millis(sp.instant) - 3_600_000


def test_threshold_from_table_setting(trips):
    sp = schedule_compaction(trips, settings={"hoodie.compaction.event.time.data.latency": "2h"})
    assert sp.threshold_ms == instant_to_millis(sp.instant) - 7_200_000


def test_bad_input_is_refused(trips):
    with pytest.raises(ConfigError, match="needs a threshold"):
        schedule_compaction(trips)
    with pytest.raises(ConfigError, match="carry-over mode 'hardlink'"):
        schedule_compaction(trips, threshold_ms=0, carry_over="hardlink")
    with pytest.raises(ConfigError, match="exact mode needs"):
        schedule_compaction(trips, strategy="unbounded", exact=True)
    with pytest.raises(ConfigError, match="unknown compaction strategy"):
        schedule_compaction(trips, strategy="nope")


def test_symlink_free_file_system_suggests_copy(trips, monkeypatch):
    def no_symlinks(*_args, **_kw):
        raise OSError(95, "Operation not supported")
    monkeypatch.setattr(os, "symlink", no_symlinks)
    with pytest.raises(TidemarkError, match="carry_over='copy'"):
        plan_mod._check_symlinks(trips)


@pytest.mark.parametrize("carry_over", ["symlink", "copy"])
def test_a_carried_log_keeps_its_event_times_in_either_carry_over_mode(tmp_path, carry_over):
    """A carried delete-only log is known only by its write stats; a copy must find them under the name it
    copies (as a link does through its target), or the next plan compacts it although it is after T."""
    path = str(tmp_path / "t")
    new_table(path, history=[("upsert", [(1, E + 1000)]), ("delete", [(1, E + 5000)])])
    assert schedule_compaction(path, threshold_ms=E + 2000, carry_over=carry_over).written
    run_compaction(path, spark=InlineSpark())
    again = schedule_compaction(path, threshold_ms=E + 2000, carry_over=carry_over, preview=True)
    assert again.record is None, "the carried delete log (event time E+5000 > T) was planned again"


def test_nothing_to_compact_once_every_write_is_rolled_back(tmp_path):
    """Masked logs and rollback command blocks are all that is left: a plan over them could never run."""
    path = str(tmp_path / "t")
    new_table(path, history=[("upsert", [(0, E + 1000)])])
    second = write(path, "upsert", [(0, E + 2000), (3, E + 1500)])
    rollback(path, second)
    rollback(path, Timeline.load(path).completed()[0].timestamp)
    planned = schedule_compaction(path, threshold_ms=E + 5000)
    assert not planned.written and "no completed write" in planned.message
    assert not Timeline.load(path).pending_compactions()


# ------------------------------------------------------- Hudi 1.1's event-time watermark (table version 8)

def _v8_table_without_header_carrier(path: str, history) -> None:
    """A v8 table whose logs carry no Tidemark event-time attributes (no event-time field configured: what a Java
    writer leaves), planned by its ordering field `ts` as Java tables are."""
    create_table(path, name="j", record_keys=["id"], ordering_field="ts", event_time_field="", table_version=8,
                 settings={"hoodie.bucket.index.num.buckets": "1"})
    for op, rows in history:
        write(path, op, rows)


def _stamp_watermarks_as_java_1_1(path: str, override: dict[str, tuple[int, int]] | None = None) -> None:
    """Give every completed deltacommit's write stats the per-write min/max event time Java 1.1 records with
    `hoodie.write.track.event.time.watermark=true`: HoodieWriteHandle.getRecordMetadata stamps each record's
    event-time value, WriteStatus.markSuccess parses it (10 digits: seconds, 13: millis) and
    HoodieWriteStat.setMinEventTime/setMaxEventTime fold it into the stat as epoch millis (Avro long, null when no
    record had one) — nothing goes to extraMetadata. `override` gives chosen values per log name."""
    timeline = Timeline.load(path)
    for inst in timeline.completed():
        if inst.action != "deltacommit":
            continue
        doc = timeline.read_commit_metadata(inst)
        for stats in doc["partitionToWriteStats"].values():
            for s in stats:
                name = s["path"].rsplit("/", 1)[-1]
                contents = logformat.read_log_file(os.path.join(path, s["path"]), columns=["ts"])
                values = [v for b in contents.blocks if isinstance(b, logformat.DataBlock)
                          for v in b.records.column("ts").to_pylist()]
                lo_hi = (override or {}).get(name) or ((min(values), max(values)) if values else (None, None))
                s["minEventTime"], s["maxEventTime"] = lo_hi
        with open(timeline.instant_path(inst), "wb") as fh:   # the same v8 Avro our own commit writer produces
            fh.write(avro_models.commit_metadata_avro(doc))


def test_v8_java_watermarks_plan_logs_without_a_header_carrier(tmp_path):
    path = str(tmp_path / "t")
    history = [("upsert", [(i, E + 1000 + i) for i in range(4)]), ("upsert", [(1, E + 3000)]),
               ("upsert", [(2, E + 5000), (5, E + 5100)])]
    _v8_table_without_header_carrier(path, history)
    view = FileSystemView(path)
    logs = sorted(view.latest_slices()[0].log_files, key=lambda lf: lf.name)
    assert [t.source for t in resolve_log_event_times(view, view.timeline, view.latest_slices()).values()] == \
        ["decoded"] * 3   # no watermark: the logs are decoded once, as before

    _stamp_watermarks_as_java_1_1(path)
    view = FileSystemView(path)
    times = resolve_log_event_times(view, view.timeline, view.latest_slices())
    assert [(times[lf.path].min_ms, times[lf.path].max_ms, times[lf.path].source) for lf in logs] == [
        (E + 1000, E + 1003, "write_stats"), (E + 3000, E + 3000, "write_stats"), (E + 5000, E + 5100, "write_stats")]

    before = snapshot(path)
    sp = schedule_compaction(path, strategy="event_time", threshold_ms=E + 3000, carry_over="copy")
    (op,) = sp.operations
    assert op["deltaFilePaths"] == [logs[0].name, logs[1].name]    # exactly the logs at or before T
    assert [s["symlink"] for s in op["symlinkOperations"]] and len(op["symlinkOperations"]) == 1
    extra = Timeline.load(path).read_compaction_plan(sp.instant)["extraMetadata"]
    assert json.loads(extra["tidemark.eventTimeSources"]) == {"header": 0, "write_stats": 3, "decoded": 0, "none": 0}
    run_compaction(path, spark=InlineSpark())
    assert snapshot(path) == before                       # hudi 0.5.0 agrees, and nothing changed
    assert read_optimized(path) == {"k0": E + 1000, "k1": E + 3000, "k2": E + 1002, "k3": E + 1003}


def test_v8_java_watermark_does_not_bound_deletes_without_event_times(tmp_path):
    """Java's stat counts only records carrying the event-time field; Spark SQL's deletes carry none, so a stat
    beside deletes says nothing about them: the log stays unknown (must compact), as without a watermark."""
    path = str(tmp_path / "t")
    _v8_table_without_header_carrier(path, [("upsert", [(0, E + 1000)]), ("delete", [(0, E + 5000)])])
    view = FileSystemView(path)
    delete_log = max(view.latest_slices()[0].log_files, key=lambda lf: lf.name).name
    _stamp_watermarks_as_java_1_1(path, override={delete_log: (E + 6000, E + 6000)})
    view = FileSystemView(path)
    times = {os.path.basename(p): t for p, t in
             resolve_log_event_times(view, view.timeline, view.latest_slices()).items()}
    assert times[delete_log].source == "none" and times[delete_log].min_ms is None
    assert {t.source for n, t in times.items() if n != delete_log} == {"write_stats"}
