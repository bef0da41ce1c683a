"""The tide chart: uncompacted log data per event-time bucket, without decoding any record.

An event-time compaction with threshold T compacts a log when the log's min event time is ≤ T, so the
remaining logs of the latest slices are grouped by the bucket their min event time falls in: the bars
say how much moving T past each bucket would compact. Event times come from block headers, else from the
write stats; records from the write stats naming the log (Tidemark writes one stat per log file); bytes
from the file system (a carried-over link weighs what its target weighs). Logs whose min event time is
unknown without decoding land in one bucket with no start/end.
"""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

from engine import logformat
from engine.compaction.log_event_times import _from_header, _from_stats, write_stat_event_times
from engine.errors import ConfigError
from engine.io import storage
from engine.results import PartitionTideBucket, TideBucket, from_ms
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import COMMIT, DELTACOMMIT, Timeline


@dataclass
class _Bar:
    files: int = 0
    records: int | None = 0
    bytes: int = 0
    newest_ms: int | None = None   # the largest max event time of its logs
    max_unknown: bool = False      # a log of the bar has no known max event time


def _records_by_log(timeline: Timeline) -> dict[tuple[str, str], int]:
    """(partition, log name) -> records written into it by completed deltacommits (from write stats).

    A log carried over by copy has a new name no write stat knows: it counts what its original counted.
    """
    out: dict[tuple[str, str], int] = {}
    carried: dict[tuple[str, str], str] = {}
    for inst in timeline.completed():
        if inst.action not in (DELTACOMMIT, COMMIT):
            continue
        meta = timeline.commit_metadata(inst)
        if inst.action == COMMIT:
            carried.update({(c.partition_path, c.symlink): c.target for c in meta.carried or []})
            continue
        for stat in meta.write_stats:
            for name in stat.names:
                key = (stat.partition_path, name)
                out[key] = out.get(key, 0) + stat.records
    for (partition, name), target in carried.items():
        if (partition, target) in out:
            out[(partition, name)] = out[(partition, target)]
    return out


def tide(base_path: str, bucket_ms: int, by_partition: bool = False) -> list[TideBucket]:
    """Buckets of `bucket_ms` (oldest first, empty ones omitted), then the unknown bucket if any; `by_partition`:
    one series per partition (PartitionTideBucket, partitions in name order), for the per-partition heatmap."""
    if bucket_ms <= 0:
        raise ConfigError(f"tide bucket must be a positive duration, got {bucket_ms} ms")
    timeline = Timeline.load(base_path)
    view = FileSystemView(base_path, timeline)
    committed = view.committed_instants
    stat_times = write_stat_event_times(timeline)
    records = _records_by_log(timeline)
    bars: dict[tuple[str, int | None], _Bar] = {}
    slices = view.latest_slices()
    scans = logformat.scan_log_files((lf.path, lf.size) for sl in slices for lf in sl.log_files)
    for sl in slices:
        for lf in sl.log_files:
            times = _from_header(scans[lf.path], committed) or _from_stats(stat_times, sl.partition_path, lf.name,
                                                                    lf.path, {})
            start = None if times is None or times.min_ms is None else times.min_ms // bucket_ms * bucket_ms
            bar = bars.setdefault((sl.partition_path if by_partition else "", start), _Bar())
            if times is not None and times.max_ms is not None:
                bar.newest_ms = times.max_ms if bar.newest_ms is None else max(bar.newest_ms, times.max_ms)
            else:
                bar.max_unknown = True
            bar.files += 1
            bar.bytes += lf.size   # listed with links followed: a carried-over link weighs its target
            real = storage.name_of(os.path.realpath(lf.path)) if storage.is_link(lf.path) else lf.name
            n = records.get((sl.partition_path, real), records.get((sl.partition_path, lf.name)))
            bar.records = None if n is None or bar.records is None else bar.records + n
    out: list[TideBucket] = []
    for partition in sorted({p for p, _ in bars}):
        keys: list[int | None] = [*sorted(k for p, k in bars if p == partition and k is not None)]
        if (partition, None) in bars:
            keys.append(None)
        for k in keys:
            bar = bars[(partition, k)]
            lo, hi = (None, None) if k is None else (from_ms(k), from_ms(k + bucket_ms))
            newest = bar.newest_ms
            if bar.max_unknown and k is not None:   # a log's data may reach as far as its bucket's end, no further known
                newest = max(newest if newest is not None else k + bucket_ms, k + bucket_ms)
            if by_partition:
                out.append(PartitionTideBucket(lo, hi, bar.files, bar.records, bar.bytes, from_ms(newest),
                                               partition=partition))
            else:
                out.append(TideBucket(lo, hi, bar.files, bar.records, bar.bytes, from_ms(newest)))
    return out


def freshness_lag(completion: dt.datetime | None, buckets: list[TideBucket]) -> dt.timedelta | None:
    """How far the RO view trails the newest logged data, in event time: the newest event time of any log still
    uncompacted (its max, from headers or write stats; a log whose max is unknown counts up to its bucket's end)
    minus the RO completion time ("complete up to"). No log left: the RO view holds everything (zero) once
    compacted. Before any event-time compaction the RO view promises nothing, so the lag spans all logged data
    (newest minus oldest start). None when the table holds no data at all. An event-time distance: a table of
    historical data has a meaningful lag, where wall-clock lag would be years. (Buckets go by each log's min
    event time — what a threshold compacts — so one log of months of data sits in one bucket: its max counts.)
    """
    logged = [b for b in buckets if b.start is not None and b.end is not None and (b.log_records or b.log_bytes)]
    if not logged:
        return dt.timedelta(0) if completion is not None else None
    newest = max(b.newest_event_time or b.end for b in logged if b.end is not None)
    since = completion or min(b.start for b in logged if b.start is not None)
    return max(newest - since, dt.timedelta(0))

