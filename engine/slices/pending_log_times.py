"""The event times of a table's pending logs, carried from deltacommit to deltacommit (docs/HUDI-FORMAT.md §5.4).

Each deltacommit Tidemark writes on an object store records in its extraMetadata (`PENDING_LOG_TIMES`) the event
times, size and MD5 of every log of the latest file slices it knows: the previous summary's (renamed through the
compactions' carry-over copies since, kept only while the write's listing shows the log at the size recorded)
plus the logs this write created. A planner then reads one commit's metadata — the latest completed deltacommit's,
which it reads for the table's schema anyway — instead of every deltacommit that wrote a pending log.

Nothing here is trusted without the listing: an entry is used only for a log listed under that name at that size
(and, where the listing gives an ETag and the entry an MD5, that ETag). A log only ever grows by appends and every
append changes its size, so such a log holds exactly the bytes of the committed write the entry describes — a
failed write's block, a rollback command or another writer's append (Java appends across commits) would show
as another size. A log without a usable entry (Java's writers record none, a log of a concurrent writer, a
carry-forward or spill log) is resolved as before (`engine.compaction.log_event_times`).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.io import storage
from engine.slices.groups import FileSlice
from engine.timeline.instants import COMMIT, COMMIT_ACTIONS, DELTACOMMIT, Instant, Timeline
from engine.timeline.metadata import PENDING_LOG_TIMES, WriteStat

# Above this many pending logs a deltacommit records no summary (~150 bytes a log: ~300 KB of commit metadata,
# which every reader of the timeline and the archive holds); planning then reads the deltacommits' write stats.
MAX_LOGS = 2_000


@dataclass(frozen=True)
class PendingLogTime:
    """What the write that created a log knew of it: event-time bounds (epoch ms), whether it holds deletes
    (their event times are inside the bounds: our stats count them), its size, and its MD5 when recorded."""

    min_ms: int
    max_ms: int
    deletes: bool
    size: int
    md5: str | None = None

    def to_json(self) -> list[Any]:
        return [self.min_ms, self.max_ms, int(self.deletes), self.size, *([self.md5] if self.md5 else [])]

    @classmethod
    def from_json(cls, value: Any) -> PendingLogTime | None:
        if not isinstance(value, list) or len(value) not in (4, 5) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value[:4]):
            return None
        md5 = value[4] if len(value) == 5 and isinstance(value[4], str) else None
        return cls(value[0], value[1], bool(value[2]), value[3], md5)

    def matches(self, path: str, size: int) -> bool:
        """Whether the listed log (`path`, `size`) is the one this entry describes."""
        if size != self.size:
            return False
        etag = (storage.listed_etag(path, size) or "").strip('"')
        return not (etag and self.md5) or etag == self.md5


# (partition, log name) -> its entry
Summary = dict[tuple[str, str], PendingLogTime]


def decode(extra: Mapping[str, str]) -> Summary:
    """The summary a commit's extraMetadata records; {} when none (Java's commits) or unreadable."""
    try:
        doc = json.loads(extra.get(PENDING_LOG_TIMES) or "{}")
    except ValueError:
        return {}
    out: Summary = {}
    for part, logs in (doc.items() if isinstance(doc, dict) else ()):
        for name, value in (logs.items() if isinstance(logs, dict) else ()):
            entry = PendingLogTime.from_json(value)
            if entry is not None:
                out[(str(part), str(name))] = entry
    return out


def encode(summary: Summary) -> str | None:
    """Compact JSON {partition: {log name: [min, max, deletes, size, md5?]}}; None above MAX_LOGS."""
    if len(summary) > MAX_LOGS:
        return None
    doc: dict[str, dict[str, list[Any]]] = {}
    for (part, name), entry in sorted(summary.items()):
        doc.setdefault(part, {})[name] = entry.to_json()
    return json.dumps(doc, separators=(",", ":"))


def latest(timeline: Timeline) -> Summary:
    """The summary of the latest completed deltacommit, as of the table now: each copy a completed compaction
    carried over since then also under the copy's name (a copy keeps the bytes, so size and MD5). {} when that
    deltacommit records none (Java's, a local table's) or there is none. Later compactions, overwrites and
    clusterings only take logs out of the latest slices, which the listing shows.

    Reads the metadata of the commits from that deltacommit on, together (in parallel on a store); the latest
    one is what `Timeline.latest_schema` reads, so a writer or planner after a deltacommit reads nothing more."""
    later: list[Instant] = []
    for inst in reversed(timeline.completed()):
        if inst.action not in COMMIT_ACTIONS:
            continue
        later.append(inst)
        if inst.action == DELTACOMMIT:
            break
    if not later or later[-1].action != DELTACOMMIT:
        return {}
    timeline.read_ahead(later)
    summary = decode(timeline.commit_metadata(later[-1]).extra)
    for inst in reversed(later[:-1]):   # oldest first: a copy of a copy follows its original
        if inst.action == COMMIT:
            for entry in timeline.commit_metadata(inst).carried or ():
                original = summary.get((entry.partition_path, entry.target.rsplit("/", 1)[-1]))
                if original is not None:
                    summary[(entry.partition_path, entry.symlink)] = original
    return summary


def written(stats: Iterable[Mapping[str, Any]], md5s: Mapping[str, str]) -> Summary:
    """Entries for the logs a write's stats (JSON) created whole: offset 0, event times known. `md5s`: relative
    path -> the MD5 the write recorded."""
    out: Summary = {}
    for doc in stats:
        stat = WriteStat.from_json(doc)
        if stat.log_offset != 0 or stat.min_event_time is None or stat.file_size <= 0:
            continue
        hi = stat.max_event_time if stat.max_event_time is not None else stat.min_event_time
        out[(stat.partition_path, stat.file_name)] = PendingLogTime(
            int(stat.min_event_time), int(hi), stat.num_deletes > 0, stat.file_size, md5s.get(stat.path))
    return out


def next_summary(previous: Summary, pending: Iterable[FileSlice], own: Summary) -> Summary:
    """The summary a write records: `own` (the logs it created) and each of `previous` still listed in the
    latest slices (`pending`, as the write listed them before its tasks ran) at the size recorded."""
    out: Summary = {}
    for sl in pending:
        for lf in sl.log_files:
            entry = previous.get((sl.partition_path, lf.name))
            if entry is not None and entry.matches(lf.path, lf.size):
                out[(sl.partition_path, lf.name)] = entry
    out.update(own)
    return out
