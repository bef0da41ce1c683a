"""A two-partition table with known event times, and a hand-made event-time compaction in the exact on-disk
format engine/compaction produces (shared by the freshness, metrics and compaction-history tests)."""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine import logformat
from engine.config.eventtime import parse_time
from engine.config.layout import create_table
from engine.config.properties import load_table_config, save_table_config
from engine.config.schema import arrow_schema, schema_with_meta, table_read_schema
from engine.io.naming import LogFileName, new_instant_time
from engine.read.slice_reader import ReadContext, SliceRef, read_slice
from engine.slices.fsview import FileSystemView
from engine.timeline import avro_models
from engine.timeline.instants import (
    COMPACTION,
    DELTACOMMIT,
    State,
    Timeline,
    commit_metadata_json,
    complete,
    create_requested,
    transition_to_inflight,
)
from engine.timeline.metadata import WriteStat

T = parse_time("2013-06-01T00:00:00Z")
# write 1 (all ≤ T) and write 2 (all > T), per partition: (id, event time)
W1 = {"eu": [("a", "2013-05-31T10:00:00Z"), ("b", "2013-05-31T20:00:00Z")], "us": [("c", "2013-05-31T12:00:00Z")]}
W2 = {"eu": [("d", "2013-06-02T01:00:00Z")], "us": [("e", "2013-06-03T00:00:00Z")]}


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(parse_time(text) / 1000, tz=dt.UTC)


def write_rows(spark, path: str, rows: dict[str, list[tuple[str, str]]]) -> str:
    """Upsert {partition: [(id, ISO event time)]} as one deltacommit; returns its instant."""
    from engine.write.pipeline import write_dataframe

    data = [(rid, region, ts(when), f"v-{rid}") for region, recs in rows.items() for rid, when in recs]
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
    ctx = ReadContext(table_read_schema(cfg, timeline.latest_schema()), cfg.merge_mode, cfg.ordering_field,
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
        stats.setdefault(part, []).append(WriteStat(
            file_id=fid, path=f"{part}/{base}", partition_path=part, num_writes=rows.num_rows,
            total_log_records=rows.num_rows, total_log_files_compacted=len(logs),
            total_write_bytes=os.path.getsize(os.path.join(pdir, base))).to_json())
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
           "ts": ts(event_iso), "val": "x"}
    record = pa.Table.from_pylist([row], schema=arrow_schema(schema))
    logformat.append_blocks(os.path.join(path, partition, name),
                            [logformat.encode_data_block(record, schema, instant)])  # no min/max attrs
    stat = WriteStat(file_id=sl.file_id, path=f"{partition}/{name}", partition_path=partition, num_writes=1,
                      log_version=version, log_files=(name,)).to_json()
    complete(path, instant, DELTACOMMIT, commit_metadata_json({partition: [stat]}, schema=timeline.latest_schema(),
                                                              operation_type="UPSERT"))
    return instant
