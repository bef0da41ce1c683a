"""RO freshness report: no guarantee before an event-time compaction, "holds" after it, "broken" by late data.

The table helpers here (a two-partition table with known event times, and a hand-made event-time compaction in
the exact on-disk format engine/compaction produces) are shared with test_metrics and test_compaction_history.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import avro_models, logformat
from engine.eventtime import parse_time
from engine.freshness import freshness_report
from engine.fsview import FileSystemView
from engine.naming import LogFileName, new_instant_time
from engine.properties import load_table_config, save_table_config
from engine.schema import arrow_schema, schema_with_meta, table_read_schema
from engine.slice_reader import ReadContext, SliceRef, read_slice
from engine.table import create_table
from engine.timeline import (COMPACTION, DELTACOMMIT, State, Timeline, commit_metadata_json, complete, create_requested,
                             transition_to_inflight, write_stat)

T = parse_time("2013-06-01T00:00:00Z")
# write 1 (all ≤ T) and write 2 (all > T), per partition: (id, event time)
W1 = {"eu": [("a", "2013-05-31T10:00:00Z"), ("b", "2013-05-31T20:00:00Z")], "us": [("c", "2013-05-31T12:00:00Z")]}
W2 = {"eu": [("d", "2013-06-02T01:00:00Z")], "us": [("e", "2013-06-03T00:00:00Z")]}


# ------------------------------------------------------------------------------------------ table helpers

@pytest.fixture(scope="module")
def spark_session():
    from engine.spark import get_spark

    return get_spark()


def _ts(text: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(parse_time(text) / 1000, tz=dt.timezone.utc)


def write_rows(spark, path: str, rows: dict[str, list[tuple[str, str]]]) -> str:
    """Upsert {partition: [(id, ISO event time)]} as one deltacommit; returns its instant."""
    from engine.write import write_dataframe

    data = [(rid, region, _ts(ts), f"v-{rid}") for region, recs in rows.items() for rid, ts in recs]
    df = spark.createDataFrame(data, "id string, region string, ts timestamp, val string")
    return write_dataframe(path, df).instant


def build_table(spark, path: str) -> tuple[str, str]:
    """The shared starting point: W1 then W2 into a table with one bucket per partition. Returns both instants."""
    create_table(path, name="fresh", record_keys=["id"], ordering_field="ts", event_time_field="ts",
                 partition_fields=["region"], settings={"hoodie.bucket.index.num.buckets": "1"})
    return write_rows(spark, path, W1), write_rows(spark, path, W2)


def copy_table(src: str, dest: Path) -> str:
    shutil.copytree(src, dest, symlinks=True)  # carried-over logs are relative links: keep them links
    return str(dest)


def _header_min(path: str) -> int | None:
    mins = [b.min_event_time for b in logformat.scan_log_file(path).blocks if b.min_event_time is not None]
    return min(mins) if mins else None


def simulate_schedule(path: str, threshold_ms: int, carry: str = "symlink") -> tuple[str, dict]:
    """Write `C.compaction.requested` like engine/compaction: logs with min event time ≤ T compacted, rest carried."""
    timeline = Timeline.load(path)
    instant = new_instant_time(after=max(i.timestamp for i in timeline.instants))
    ops, sources = [], {}
    for sl in FileSystemView(path, timeline).latest_slices():
        compacted = [lf for lf in sl.log_files if (_header_min(lf.path) or 0) <= threshold_ms]
        carried = [lf for lf in sl.log_files if lf not in compacted]
        if not compacted:
            continue
        links = [(LogFileName(sl.file_id, instant, k, "0-0-0").name, lf.name) for k, lf in enumerate(carried, 1)]
        ops.append(avro_models.compaction_operation(
            base_instant=sl.base_instant, file_id=sl.file_id, partition_path=sl.partition_path,
            delta_file_names=[lf.name for lf in compacted],
            data_file_name=sl.base_file.name if sl.base_file else None, symlink_operations=links))
        sources.update({lf.name: "header" for lf in sl.log_files})
    plan = {"operations": ops, "extraMetadata": {
        "tidemark.threshold": str(threshold_ms), "tidemark.strategy": "event_time", "tidemark.carryOver": carry,
        "tidemark.exact": "false", "tidemark.eventTimeSources": json.dumps(sources)}}
    create_requested(path, instant, COMPACTION, avro_models.write_compaction_plan(plan))
    return instant, plan


def simulate_run(path: str, instant: str, completion_ms: int | None = None, freshness_ms: int | None = None) -> dict:
    """Execute a simulated plan: base files from the compacted logs, symlinks for carried logs, `C.commit`, props."""
    timeline = Timeline.load(path)
    plan = timeline.read_compaction_plan(instant)
    if all(i.state is State.REQUESTED for i in timeline.get(instant)):
        transition_to_inflight(path, instant, COMPACTION)
    cfg = load_table_config(path)
    ctx = ReadContext(table_read_schema(cfg, timeline), cfg.merge_mode, cfg.ordering_field,
                      frozenset(i.timestamp for i in timeline.completed()))
    stats: dict[str, list[dict]] = {}
    carried: list[dict] = []
    for op in plan["operations"]:
        part, fid = op["partitionPath"], op["fileId"]
        pdir = os.path.join(path, part)
        logs = tuple(os.path.join(pdir, n) for n in op["deltaFilePaths"])
        rows = pa.concat_tables(list(read_slice(SliceRef(part, fid, op["baseInstantTime"], None, logs), ctx)))
        base = f"{fid}_0-0-0_{instant}.parquet"
        pq.write_table(rows, os.path.join(pdir, base))
        for link in op["symlinkOperations"] or []:
            os.symlink(link["target"], os.path.join(pdir, link["symlink"]))
            carried.append({"partitionPath": part, "fileId": fid, **link, "mode": "symlink"})
        stats.setdefault(part, []).append(write_stat(
            file_id=fid, path=f"{part}/{base}", partition_path=part, num_writes=rows.num_rows,
            total_log_records=rows.num_rows, total_log_files_compacted=len(logs),
            total_write_bytes=os.path.getsize(os.path.join(pdir, base))))
    completion = completion_ms if completion_ms is not None else int(plan["extraMetadata"]["tidemark.threshold"])
    extra = {"tidemark.threshold": plan["extraMetadata"]["tidemark.threshold"], "tidemark.strategy": "event_time",
             "tidemark.carryOver": json.dumps(carried), "tidemark.exact": "false",
             "tidemark.roCompletionTime": str(completion)}
    if freshness_ms is not None:
        extra["tidemark.roFreshnessTime"] = str(freshness_ms)
    complete(path, instant, COMPACTION, commit_metadata_json(
        stats, schema=timeline.latest_schema(), operation_type="COMPACT", compacted=True, extra=extra))
    cfg.props.update({"tidemark.ro.completion.time": str(completion), "tidemark.ro.threshold": extra["tidemark.threshold"],
                      "tidemark.ro.compaction.instant": instant,
                      **({"tidemark.ro.freshness.time": str(freshness_ms)} if freshness_ms is not None else {})})
    save_table_config(cfg)
    return extra


def write_headerless_block(path: str, partition: str, rid: str, event_iso: str) -> str:
    """A deltacommit whose log block has no tidemark event-time attributes (as another writer would leave it)."""
    timeline = Timeline.load(path)
    instant = new_instant_time(after=max(i.timestamp for i in timeline.instants))
    create_requested(path, instant, DELTACOMMIT)
    transition_to_inflight(path, instant, DELTACOMMIT)
    sl = next(s for s in FileSystemView(path, timeline).latest_slices() if s.partition_path == partition)
    version = max((lf.version for lf in sl.log_files if lf.base_instant == sl.base_instant), default=0) + 1
    name = LogFileName(sl.file_id, sl.base_instant, version, "0-0-0").name
    schema = schema_with_meta(json.loads(timeline.latest_schema()))
    row = {"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_0", "_hoodie_record_key": rid,
           "_hoodie_partition_path": partition, "_hoodie_file_name": sl.file_id, "id": rid, "region": partition,
           "ts": _ts(event_iso), "val": "x"}
    record = pa.Table.from_pylist([row], schema=arrow_schema(schema))
    logformat.append_blocks(os.path.join(path, partition, name),
                            [logformat.encode_data_block(record, schema, instant)])  # no min/max attrs
    stat = write_stat(file_id=sl.file_id, path=f"{partition}/{name}", partition_path=partition, num_writes=1,
                      log_version=version, log_files=[name])
    complete(path, instant, DELTACOMMIT, commit_metadata_json({partition: [stat]}, schema=timeline.latest_schema(),
                                                              operation_type="UPSERT"))
    return instant


# ------------------------------------------------------------------------------------------ tests

@pytest.fixture(scope="module")
def base_table(spark_session, tmp_path_factory) -> tuple[str, str, str]:
    path = str(tmp_path_factory.mktemp("fresh") / "t")
    w1, w2 = build_table(spark_session, path)
    return path, w1, w2


def test_no_event_time_compaction_means_no_guarantee(base_table) -> None:
    report = freshness_report(base_table[0])
    assert report["guarantee"] == "none"
    assert report["ro_completion_time"] is None and report["threshold"] is None
    assert report["compaction_instant"] is None and report["late_records"] == 0 and report["late_instants"] == []
    assert "no event-time compaction" in report["message"]
    json.dumps(report)  # JSON-ready


def test_simulated_compaction_holds_then_late_data_breaks_it(base_table, spark_session, tmp_path) -> None:
    path = copy_table(base_table[0], tmp_path / "t")
    instant, _ = simulate_schedule(path, T)
    # A pending plan promises nothing yet.
    assert freshness_report(path)["guarantee"] == "none"
    completion = parse_time("2013-06-02T01:00:00Z") - 1  # just below the smallest carried log
    simulate_run(path, instant, completion_ms=completion, freshness_ms=parse_time("2013-05-31T20:00:00Z"))

    report = freshness_report(path)
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
    report = freshness_report(path)
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
    report = freshness_report(path)
    assert report["source"] == "properties" and report["compaction_instant"] == instant
    assert report["guarantee"] == "holds" and report["ro_completion_time"] == "2013-06-01T00:00:00.000Z"

    late = write_headerless_block(path, "eu", "z", "2013-05-01T00:00:00Z")
    report = freshness_report(path)
    # Never a silent lie: the block's event time is unknown, so the message says the check is incomplete.
    assert report["late_unknown_blocks"] == 1 and report["late_records"] == 0
    assert report["guarantee"] == "holds"
    assert "unverified: 1 log block" in report["message"] and late in report["message"]


def test_real_event_time_compaction_end_to_end(base_table, spark_session, tmp_path) -> None:
    from engine.compaction import run_compaction, schedule_compaction

    path = copy_table(base_table[0], tmp_path / "t")
    scheduled = schedule_compaction(path, strategy="event_time", threshold_ms=T, carry_over="symlink")
    assert freshness_report(path)["guarantee"] == "none"  # scheduled is not compacted
    run_compaction(path, spark=spark_session)
    report = freshness_report(path)
    assert report["guarantee"] == "holds" and report["compaction_instant"] == scheduled.instant
    assert report["threshold"] == "2013-06-01T00:00:00.000Z"
    assert report["ro_completion_time"] == "2013-06-02T00:59:59.999Z"  # just below record "d", still in a log
    assert report["ro_freshness_time"] == "2013-05-31T20:00:00.000Z"   # record "b", the newest compacted

    late = write_rows(spark_session, path, {"eu": [("m", "2013-05-29T00:00:00Z"), ("n", "2013-07-01T00:00:00Z")],
                                            "us": [("c", "2013-05-31T12:30:00Z")]})  # an update of "c", late too
    report = freshness_report(path)
    assert report["guarantee"] == "broken" and report["late_records"] == 2
    assert report["late_min_event_time"] == "2013-05-29T00:00:00.000Z" and report["late_instants"] == [late]

    # A later full compaction takes the late records into base files: the guarantee of T holds again, and the
    # RO times are the ones that compaction measured (no log left: everything up to the newest record).
    full = schedule_compaction(path, strategy="unbounded")
    run_compaction(path, spark=spark_session)
    report = freshness_report(path)
    assert report["guarantee"] == "holds" and report["late_records"] == 0
    assert report["compaction_instant"] == scheduled.instant != full.instant  # T still comes from the event-time one
    assert report["threshold"] == "2013-06-01T00:00:00.000Z"
    assert report["ro_completion_time"] == report["ro_freshness_time"] == "2013-07-01T00:00:00.000Z"
