"""Compaction planning by log headers vs by decoding every log (event-time resolution).

    python -m bench.bench_compaction_planning [--scale 1.0] [--partitions 2] [--groups 100] [--versions 10]
                                              [--blocks 4] [--records 2500] [--repeat 3] [--keep DIR]

Table: a real v6 MOR table (create_table) with `partitions x groups` bucket file groups, each holding
`versions` log files written by `versions` completed deltacommits (default 2 x 100 x 10 = 2,000 logs of
4 Avro blocks x 2,500 records, the anchors' header-scan shape). The timeline and logs are written
directly (no Spark): per deltacommit one log file is encoded once (its blocks carry the event-time
header attributes, as our writer's do) and copied under every file group's log name; deltacommit v
holds event times of window v, so a threshold in the middle compacts half of each slice's logs.

Timed, warm page cache (one untimed pass of each first), medians of `--repeat`:
- `resolve_headers`: Timeline.load + FileSystemView.latest_slices + resolve_log_event_times (header scan);
- `schedule`: the whole schedule_compaction(strategy="event_time", threshold=middle) (plan file removed
  again, untimed, after each run);
- `decode`: the same listing, then read_log_file(p, columns=[event_time]) of every log + min/max of the
  event-time column over its committed data blocks (planning without header attributes).
Ratio = decode / resolve_headers (target >= 100x). `--scale` multiplies the number of file groups.

Also home of `DirectTable`, a Spark-free builder of valid v6 tables used by the other compaction benches.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
from dataclasses import dataclass, field

import pyarrow as pa

from bench.common import T0_MS, emit, log, median_time, records, scratch_dir, timed, with_meta_columns

TARGET_RATIO = 100.0


# ------------------------------------------------------------------------------ direct table builder

@dataclass
class DirectTable:
    """Write a v6 MOR table's timeline and files directly (no Spark): create_table + completed deltacommits.

    Record columns are bench.common.records' (id, region, seq, event_time, amount, note); partition field
    `region` (hive style), record key `id`, ordering `seq`, event time `event_time`, bucket index.
    """

    path: str
    buckets: int = 4
    name: str = "bench_compaction"
    settings: dict = field(default_factory=dict)

    def create(self) -> None:
        from engine.config.layout import create_table
        from engine.config.schema import schema_with_meta, table_avro_schema

        create_table(self.path, name=self.name, record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                     event_time_field="event_time", merge_mode="event_time", hive_style=True,
                     settings={"hoodie.bucket.index.num.buckets": str(self.buckets), **self.settings})
        self.schema = table_avro_schema(self.name, records(1).schema)
        self.schema_json = json.dumps(self.schema)
        self.log_schema = schema_with_meta(self.schema)

    def new_instant(self) -> str:
        from engine.io.naming import new_instant_time
        from engine.timeline.instants import Timeline

        latest = max((i.timestamp for i in Timeline.load(self.path).instants), default=None)
        return new_instant_time(after=latest)

    def begin(self) -> str:
        from engine.timeline.instants import create_requested, transition_to_inflight

        instant = self.new_instant()
        create_requested(self.path, instant, "deltacommit")
        transition_to_inflight(self.path, instant, "deltacommit", b"")
        return instant

    def commit(self, instant: str, stats: list[dict]) -> None:
        from engine.timeline.instants import commit_metadata_json, complete

        by_partition: dict[str, list[dict]] = {}
        for s in stats:
            by_partition.setdefault(s["partitionPath"], []).append(s)
        complete(self.path, instant, "deltacommit",
                 commit_metadata_json(by_partition, schema=self.schema_json, operation_type="UPSERT"))

    def partition_dir(self, partition: str, instant: str) -> str:
        from engine.config.layout import write_partition_metadata

        write_partition_metadata(self.path, partition, instant)
        return os.path.join(self.path, partition)

    def log_block(self, rows: pa.Table, instant: str, file_id: str) -> bytes:
        """One Avro data block of `rows` (bench.common.records columns) with meta columns and event-time header."""
        from engine import logformat
        from engine.config import eventtime

        lo, hi = eventtime.bounds(rows.column("event_time"))
        full = with_meta_columns(rows, instant, file_id)
        return logformat.encode_data_block(full, self.log_schema, instant, "avro", lo, hi)

    @staticmethod
    def log_stat(partition: str, file_id: str, base_instant: str, name: str, version: int, size: int,
                 n: int, lo: int | None, hi: int | None) -> dict:
        from engine.timeline.metadata import WriteStat

        return WriteStat(file_id=file_id, path=f"{partition}/{name}", partition_path=partition,
                          prev_commit=base_instant, num_writes=n, total_write_bytes=size, min_event_time=lo,
                          max_event_time=hi, log_version=version, log_files=(name,)).to_json()


# ------------------------------------------------------------------------------------------ table

def build_table(path: str, partitions: int, groups: int, versions: int, blocks: int, n_records: int) -> dict:
    """partitions x groups file groups, `versions` deltacommits, one log per group per deltacommit."""
    from engine.io.naming import LogFileName, new_file_id
    from engine.logformat import append_blocks

    t = DirectTable(path, buckets=groups)
    t.create()
    parts = [f"region=r{p:02d}" for p in range(partitions)]
    fids = {(p, g): new_file_id(g) for p in parts for g in range(groups)}
    first_instant = None
    total_bytes = 0
    per_log = blocks * n_records
    for v in range(versions):
        instant = t.begin()
        first_instant = first_instant or instant
        template = os.path.join(path, ".hoodie", ".temp", f"template-{instant}")
        payload = [t.log_block(records(n_records, first_key=(v * blocks + b) * n_records, seq=v, seed=v * 97 + b),
                               instant, "bench-file-id") for b in range(blocks)]
        size = append_blocks(template, payload)
        lo = T0_MS + v * per_log * 1000
        hi = T0_MS + ((v + 1) * per_log - 1) * 1000 + 999
        stats = []
        for (p, _g), fid in fids.items():
            pdir = t.partition_dir(p, first_instant)
            name = LogFileName(fid, first_instant, v + 1, "0-0-0").name
            shutil.copyfile(template, os.path.join(pdir, name))
            stats.append(t.log_stat(p, fid, first_instant, name, v + 1, size, per_log, lo, hi))
            total_bytes += size
        os.unlink(template)
        t.commit(instant, stats)
    return {"log_files": len(fids) * versions, "file_groups": len(fids), "log_blocks": len(fids) * versions * blocks,
            "log_records": len(fids) * versions * per_log, "log_mb": round(total_bytes / 2**20, 1)}


# ------------------------------------------------------------------------------------------ timed work

def listing(path: str):
    from engine.config.properties import load_table_config
    from engine.slices.fsview import FileSystemView
    from engine.timeline.instants import Timeline

    cfg = load_table_config(path)
    timeline = Timeline.load(path)
    view = FileSystemView(path, timeline)
    return cfg, timeline, view, [s for s in view.latest_slices() if s.log_files]


def plan_by_headers(path: str) -> dict:
    from engine.compaction import resolve_log_event_times

    cfg, timeline, view, slices = listing(path)
    return resolve_log_event_times(view, timeline, slices, cfg=cfg)


def plan_by_decoding(path: str) -> dict[str, tuple[int | None, int | None]]:
    from engine import logformat
    from engine.config import eventtime

    cfg, _, view, slices = listing(path)
    field_name = cfg.event_time_field
    committed = frozenset(view.committed_instants)
    out = {}
    for sl in slices:
        for lf in sl.log_files:
            contents = logformat.read_log_file(lf.path, columns=[field_name])
            lows, highs = [], []
            for block in contents.blocks:
                if isinstance(block, logformat.DataBlock) and block.info.instant_time in committed:
                    lo, hi = eventtime.bounds(block.records.column(field_name))
                    if lo is not None:
                        lows.append(lo)
                        highs.append(hi)
            out[lf.path] = (min(lows, default=None), max(highs, default=None))
    return out


def schedule(path: str, threshold: int):
    from engine import Table

    return Table.open(path).schedule_compaction(strategy="event_time", threshold=threshold, carry_over="symlink")


def unschedule(path: str, instant: str | None) -> None:
    if instant:
        os.unlink(os.path.join(path, ".hoodie", f"{instant}.compaction.requested"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the number of file groups")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--groups", type=int, default=100, help="file groups per partition")
    ap.add_argument("--versions", type=int, default=10, help="deltacommits = log files per file group")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--records", type=int, default=2500, help="records per block")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="build the table in this directory and keep it")
    args = ap.parse_args()
    groups = max(1, int(round(args.groups * args.scale)))
    work = args.keep or scratch_dir("tm-bench-plan-")
    path = os.path.join(work, "table")
    try:
        build_s, layout = timed(lambda: build_table(path, args.partitions, groups, args.versions, args.blocks,
                                                    args.records))
        log(f"bench_compaction_planning: table built in {build_s:.1f}s: {layout}")
        per_log = args.blocks * args.records
        threshold = T0_MS + (args.versions // 2) * per_log * 1000 - 1   # logs 1..versions/2 have min <= T

        headers = plan_by_headers(path)                      # warm-up (and page cache)
        decoded = plan_by_decoding(path)
        sources = sorted({v.source for v in headers.values()})
        agree = all(headers[p].min_ms == decoded[p][0] and headers[p].max_ms == decoded[p][1] for p in headers)
        first = schedule(path, threshold)
        n_ops = len(first.operations)
        n_compact = sum(len(op.get("deltaFilePaths") or []) for op in first.operations)
        unschedule(path, first.instant)

        t_headers = median_time(lambda: plan_by_headers(path), max(args.repeat, 5))
        scheduled: list = []
        t_schedule = median_time(lambda: scheduled.append(schedule(path, threshold)), max(args.repeat, 5),
                                 setup=lambda: unschedule(path, scheduled.pop().instant) if scheduled else None)
        if scheduled:
            unschedule(path, scheduled.pop().instant)
        t_listing = median_time(lambda: listing(path), max(args.repeat, 5))
        log(f"bench_compaction_planning: headers {t_headers}, schedule {t_schedule}")
        t_decode = median_time(lambda: plan_by_decoding(path), args.repeat)
        log(f"bench_compaction_planning: decode {t_decode}")
        h, s, d = t_headers["median_s"], t_schedule["median_s"], t_decode["median_s"]
        ratio = round(d / h, 1)
        emit("bench_compaction_planning", {
            "table": layout, "build_s": round(build_s, 1), "threshold_ms": threshold,
            "plan": {"operations": n_ops, "logs_to_compact": n_compact, "event_time_sources": sources,
                     "header_and_decode_agree": agree},
            "listing_only": t_listing, "resolve_headers": t_headers, "schedule_compaction": t_schedule,
            "decode_all_logs": t_decode,
            "ratio_decode_vs_headers": ratio, "ratio_decode_vs_schedule": round(d / s, 1),
            "decode_records_per_s": round(layout["log_records"] / d),
            "target_ratio": TARGET_RATIO, "meets_target": ratio >= TARGET_RATIO, "cache": "warm",
        })
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
