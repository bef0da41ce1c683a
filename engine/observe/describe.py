"""`tidemark show`: the table as its timeline and file-system view see it (no data decoded).

Per log file it counts corrupt blocks of committed instants (`corrupt_blocks`) and torn tails of failed writes
(`torn_blocks`, harmless), found by the header scan (framing: lengths, trailer, MAGIC) and one small read of each
block's content prefix (Avro/delete content version, record count or datum length that fits, Parquet magic;
engine.logformat.content_check). Bytes flipped deeper inside a block's records show only when a read or a
compaction decodes it; those report it then (engine.logformat.integrity).
"""
from __future__ import annotations

import os
import time

from engine.config.properties import LOCK_PROVIDER_KEY, STORAGE_LOCK_PROVIDER, TableConfig, load_table_config
from engine.io import storage, store_lock
from engine.io.naming import instant_to_millis, is_instant
from engine.logformat import LogFileScan, integrity, scan_log_files
from engine.observe.activity import table_activity
from engine.results import (
    FileGroupInfo,
    InstantDetail,
    InstantInfo,
    LockInfo,
    LogFileInfo,
    ReplacedGroupInfo,
    SliceInfo,
    TableDescription,
    from_ms,
)
from engine.slices.fsview import FileSystemView
from engine.slices.groups import FileSlice
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import COMMIT, COMMIT_ACTIONS, Instant, State, Timeline


def instant_infos(instants: list[Instant]) -> list[InstantInfo]:
    """Instants, oldest first, each with its time read as UTC."""
    return [InstantInfo(instant=i.timestamp, action=i.action, state=i.state.value,
                        time=from_ms(instant_to_millis(i.timestamp)) if is_instant(i.timestamp) else None,
                        completion_time=i.completion_time)
            for i in instants]


def instant_details(timeline: Timeline) -> list[InstantDetail]:
    """`instant_infos` with the files, records and bytes each completed commit wrote (from its metadata)."""
    out = []
    for info, inst in zip(instant_infos(timeline.instants), timeline.instants):
        detail = InstantDetail(instant=info.instant, action=info.action, state=info.state, time=info.time,
                               completion_time=info.completion_time)
        if inst.state is State.COMPLETED and inst.action in COMMIT_ACTIONS:
            stats = timeline.commit_metadata(inst).write_stats
            detail.files, detail.records = len(stats), sum(s.num_writes for s in stats)
            detail.deletes = sum(s.num_deletes for s in stats)
            detail.bytes = sum(s.total_write_bytes or s.file_size for s in stats)
            if inst.action == COMMIT:   # a completed compaction
                detail.log_files_compacted = sum(s.total_log_files_compacted for s in stats)
                detail.log_bytes_compacted = sum(s.total_log_size_compacted for s in stats)
                detail.records_updated = sum(s.total_updated_records_compacted for s in stats)
        out.append(detail)
    return out


def describe_table(base_path: str) -> TableDescription:
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    view = FileSystemView(base_path, timeline)
    committed = view.committed_instants
    corrupt: dict[str, int] = {}   # per real file: a carried link or copy of a damaged log is one damage
    extents = CommittedExtents(base_path, timeline)
    file_groups = view.file_groups()
    # every log's headers read together (in parallel on a store), not one round trip after another
    scans = scan_log_files((lf.path, lf.size) for g in file_groups for sl in g.slices for lf in sl.log_files)
    groups = [FileGroupInfo(partition=g.partition_path, file_id=g.file_id,
                            slices=[_slice(sl, committed, corrupt, extents, scans) for sl in g.slices])
              for g in file_groups]
    return TableDescription(
        table=cfg.name, path=base_path, table_version=cfg.version, record_key=cfg.record_key_fields,
        partition_fields=cfg.partition_fields, ordering_field=cfg.ordering_field,
        event_time_field=cfg.event_time_field, merge_mode=cfg.merge_mode, timeline=instant_infos(timeline.instants),
        file_groups=groups, corrupt_log_blocks=sum(corrupt.values()),
        replaced_file_groups=[ReplacedGroupInfo(partition=g.partition_path, file_id=g.file_id, replaced_by=by)
                              for g, by in view.replaced_file_groups()],
        lock=_lock_info(cfg), activity=table_activity(base_path, timeline=timeline, cfg=cfg))


def _lock_info(cfg: TableConfig) -> LockInfo:
    if cfg.props.get(LOCK_PROVIDER_KEY) != STORAGE_LOCK_PROVIDER or not storage.is_remote(cfg.base_path):
        return LockInfo(provider="host")   # not set, or a copy of such a table on a disk (its flock serialises)
    lock_object = storage.join(cfg.base_path, store_lock.LOCKS_FOLDER, store_lock.TABLE_LOCK)
    try:
        held = store_lock.current(cfg.base_path)
    except store_lock.LockObjectError:   # describing the table does not fail on it: taking the lock does, saying why
        return LockInfo(provider="storage", lock_object=lock_object, state="unreadable")
    except Exception:  # noqa: BLE001 - the store did not answer: the rest of the description stands
        return LockInfo(provider="storage", lock_object=lock_object, state="unknown")
    state = None if held is None else "free" if held.expired else \
        "held" if held.running(int(time.time() * 1000)) else "expired"
    return LockInfo(provider="storage", lock_object=lock_object, state=state or "free",
                    owner=held.owner if held else None,
                    valid_until=from_ms(held.valid_until_ms) if held else None)


def _slice(sl: FileSlice, committed: frozenset[str], corrupt: dict[str, int],
           extents: CommittedExtents, scans: dict[str, LogFileScan]) -> SliceInfo:
    logs = []
    for lf in sl.log_files:
        scan = scans[lf.path]
        found = integrity.file_corruption(scan, committed, extents)
        corrupt[_content_key(lf.path)] = len(found.committed)
        mins = [b.min_event_time for b in scan.blocks if b.min_event_time is not None and b.instant_time in committed]
        logs.append(LogFileInfo(name=lf.name, size=lf.size, blocks=len(scan.blocks), corrupt_blocks=len(found.committed),
                                torn_blocks=len(found.torn),
                                min_event_time=from_ms(min(mins)) if mins else None,
                                instants=sorted({b.instant_time for b in scan.blocks if b.instant_time})))
    return SliceInfo(base_instant=sl.base_instant, base_file=sl.base_file.name if sl.base_file else None,
                     log_files=logs)


def _content_key(path: str) -> str:
    """The file whose bytes a log is: a carried-over link resolves to the log it carries, so one damaged log
    counts once however many slices link to it (a carry-over byte copy is a file of its own)."""
    return os.path.realpath(path) if storage.supports_links(path) else path
