"""Min/max event time of each log file, as cheaply as the file allows.

On an object store, a log whose bytes the completed deltacommits' write stats account for exactly is taken from
those stats without reading it, when that costs fewer requests than scanning (``_from_covering_stats``): the
same answer as its headers, since our writer derives both from the same blocks.

Sources, tried in order per log (docs/HUDI-FORMAT.md §1.7, §5.4):
1. ``header``: the tidemark event-time attributes in the SCHEMA header of every committed data block,
   read by a header-only scan (no content decoded). Tidemark-written logs always have them.
2. ``write_stats``: ``minEventTime``/``maxEventTime`` (epoch millis) of the write stats naming the log in
   completed deltacommits. Our writer fills them; Java 1.1+ fills them when its write config enables
   ``hoodie.write.track.event.time.watermark`` (with ``hoodie.payload.event.time.field`` set and the table in
   EVENT_TIME_ORDERING), else leaves them null. Java's count only records that carry the field, so a log with a
   delete block lacking Tidemark's per-delete event times is not bounded by its stats (see ``_stats_bound``).
3. ``decoded``: decode the log once and take min/max of the table's event-time field. Java tables have no
   event-time field, so their ordering (precombine) field is used instead and read as epoch millis.
4. ``none``: nothing known (e.g. a log holding only deletes). Strategies treat None as "must compact",
   which is always safe: compacting more than needed never breaks the RO guarantee.
Only blocks of committed instants count: blocks of failed writes are invisible to every reader.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import pyarrow as pa

from engine import logformat
from engine.config import eventtime
from engine.config.properties import TableConfig, load_table_config
from engine.io import storage
from engine.io.naming import parse_log_file_name
from engine.logformat import EVENT_TIMES_ATTR, BlockType
from engine.logformat.blocks import DATA_BLOCK_TYPES
from engine.slices import pending_log_times
from engine.slices.fsview import FileSystemView
from engine.slices.groups import FileSlice, LogFile
from engine.timeline.instants import COMMIT, DELTACOMMIT, Instant, Timeline
from engine.timeline.metadata import LOG_MD5

SOURCES = ("header", "write_stats", "decoded", "none")


@dataclass(frozen=True)
class LogEventTime:
    min_ms: int | None
    max_ms: int | None
    source: str  # one of SOURCES ("plan" at a commit: what the plan recorded for a carried log)
    # Whether a committed block of the log is a delete (True when unknown: a damaged log). A compaction task
    # reads the logs it carries over only when some delete could make their records matter to its base.
    deletes: bool = True
    # Whether a committed block is a partial update (IS_PARTIAL): such a file group is compacted whole
    # (strategy.CompactionStrategy.plan). Our writers never write one, so logs known from stats have none.
    partial: bool = False


# (partition, log name) -> (min, max, complete) event times from the write stats naming the log.
StatTimes = dict[tuple[str, str], tuple[int | None, int | None, bool]]


def event_time_column(cfg: TableConfig) -> str | None:
    """The field holding record event time: the configured one, else (Java tables) the ordering field."""
    return cfg.event_time_field or cfg.ordering_field


def write_stat_event_times(timeline: Timeline, instants: Iterable[Instant] | None = None) -> StatTimes:
    """(partition, log name) -> (min, max, complete) over every completed deltacommit stat naming that log
    (among `instants` when given: `describing_instants`, for the logs being resolved).

    `complete` is False when some stat for the log had no minEventTime (Java appends to a log across
    commits; one unknown stat makes the whole log unknown).
    """
    out: StatTimes = {}
    for inst in timeline.completed() if instants is None else instants:
        if inst.action != DELTACOMMIT:
            continue
        for stat in timeline.commit_metadata(inst).write_stats:
            for name in stat.names:
                _fold_stat(out, (stat.partition_path, name), stat.min_event_time, stat.max_event_time)
    return out


def carried_aliases(timeline: Timeline, instants: Iterable[Instant] | None = None) -> dict[tuple[str, str], str]:
    """(partition, carried log name) -> the name of the log it carries, from every completed compaction's
    carry-over record (among `instants` when given). A copy has no stats of its own (and a delete-only log no
    header times), so without this a copied log would read as "unknown" and be compacted by the next plan
    however late its data."""
    out: dict[tuple[str, str], str] = {}
    for inst in timeline.completed() if instants is None else instants:
        if inst.action != COMMIT:
            continue
        for entry in timeline.commit_metadata(inst).carried or ():
            out[(entry.partition_path, entry.symlink)] = os.path.basename(entry.target)
    return out


def _name_instant(name: str) -> str | None:
    parsed = parse_log_file_name(name)
    return parsed.base_instant if parsed is not None and parsed.base_instant.isdigit() else None


def _floor(names: Iterable[str]) -> str | None:
    """The oldest instant the log names carry; None when one carries none (then every instant may matter)."""
    found = [_name_instant(n) for n in names]
    if any(i is None for i in found):
        return None
    return min((i for i in found if i is not None), default=None)


def _log_names(logs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """(partition, name) of each of `logs` ((partition, path)), and of a local carried-over symlink's target."""
    out = set()
    for part, path in logs:
        out.add((part, os.path.basename(path)))
        if storage.is_link(path):
            out.add((part, os.path.basename(os.path.realpath(path))))
    return out


def _completed_writes(timeline: Timeline, floor: str | None) -> list[Instant]:
    return [i for i in timeline.completed() if i.action in (DELTACOMMIT, COMMIT)
            and (floor is None or i.timestamp >= floor)]


def describing_instants(timeline: Timeline, logs: Iterable[tuple[str, str]],
                        aliases: Mapping[tuple[str, str], str] | None = None) -> list[Instant]:
    """The completed deltacommits and compaction commits whose metadata can describe `logs` ((partition, path)):
    those at or after the oldest instant named by a log, by a log it carries over (through copies of copies,
    from the compactions' carry-over records and `aliases`) or by a local symlink's target.

    A log's name carries an instant no later than any write to it (docs/HUDI-FORMAT.md §2.2, §5.4): on table
    versions 8/9 the deltacommit that wrote it; on version 6 its slice's base instant (or, from Java, a pending
    compaction's), after which every deltacommit appending to it started. A carried-over log is named with the
    compaction that carried it, which records the copy. So no earlier deltacommit's stat names one of these logs,
    and no earlier compaction carried one; a write stat or record from those could not change what is resolved.
    A log name without an instant makes every instant matter. Reads the compaction commits at or after the
    floor (each floor's instants together, in parallel on a store) to follow the carry-over chains.
    """
    names = _log_names(logs)
    edges: set[tuple[tuple[str, str], str]] = set((aliases or {}).items())
    read: set[Instant] = set()
    floor = _floor(n for _, n in names)
    while True:
        writes = _completed_writes(timeline, floor)
        timeline.read_ahead([i for i in writes if i not in read])
        for inst in writes:
            if inst.action == COMMIT and inst not in read:
                edges.update(carried_aliases(timeline, [inst]).items())
            read.add(inst)
        copies: dict[tuple[str, str], set[str]] = {}
        for key, target in edges:
            copies.setdefault(key, set()).add(target)
        reached = set(names)
        frontier = list(names)
        while frontier:
            part, name = frontier.pop()
            for target in copies.get((part, name), ()):
                if (part, target) not in reached:
                    reached.add((part, target))
                    frontier.append((part, target))
        lower = _floor(n for _, n in reached)
        if floor is None or lower is not None and lower >= floor:
            return writes
        floor = lower


def _fold_stat(out: StatTimes, key: tuple[str, str], lo: int | None, hi: int | None) -> None:
    cur_lo, cur_hi, ok = out.get(key, (None, None, True))
    if lo is None:
        out[key] = (cur_lo, cur_hi, False)
        return
    out[key] = (_min(cur_lo, int(lo)), _max(cur_hi, int(hi) if hi is not None else int(lo)), ok)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def resolve_log_event_times(view: FileSystemView, timeline: Timeline, slices: Iterable[FileSlice], *,
                            cfg: TableConfig | None = None, extra_committed: Iterable[str] = (),
                            aliases: Mapping[tuple[str, str], str] | None = None,
                            given: Mapping[str, LogEventTime] | None = None) -> dict[str, LogEventTime]:
    """log path -> LogEventTime for every log of `slices`.

    `extra_committed` adds instants to treat as committed (the compaction about to commit, whose exact-mode
    spill log carries its instant); `aliases` maps a carried-over log (partition, name) to the name of the
    log it copies, so its write stats are found under the original name (added to those the completed
    compactions recorded); `given` holds logs whose times are known already (carried logs, from the plan):
    they are not read.
    """
    given = dict(given or {})
    cfg = cfg or load_table_config(view.base_path)
    committed = view.committed_instants | frozenset(extra_committed)
    stats: StatTimes | None = None
    known: dict[tuple[str, str], str] | None = None
    out: dict[str, LogEventTime] = {}
    slices = list(slices)
    todo = [(sl.partition_path, lf) for sl in slices for lf in sl.log_files if lf.path not in given]
    given.update(_from_summary(timeline, todo))
    given.update(_from_covering_stats(timeline, [(p, lf) for p, lf in todo if lf.path not in given], aliases or {}))
    # Every other log's header scan, fetched together (in parallel on an object store), then used in order.
    scans = logformat.scan_log_files((lf.path, lf.size) for _, lf in todo if lf.path not in given)
    for sl in slices:
        for lf in sl.log_files:
            if lf.path in given:
                out[lf.path] = given[lf.path]
                continue
            found = _from_header(scans[lf.path], committed)
            if found is None and _stats_bound(scans[lf.path], committed):
                if stats is None or known is None:
                    # only the instants that can describe a log of `slices` (`describing_instants`)
                    instants = describing_instants(
                        timeline, [(s.partition_path, f.path) for s in slices for f in s.log_files], aliases)
                    stats = write_stat_event_times(timeline, instants)
                    known = {**carried_aliases(timeline, instants), **(aliases or {})}
                found = _from_stats(stats, sl.partition_path, lf.name, lf.path, known)
            if found is None:
                found = _from_content(lf.path, committed, event_time_column(cfg))
            out[lf.path] = dataclasses.replace(found, deletes=_has_deletes(scans[lf.path], committed),
                                               partial=_has_partial(scans[lf.path], committed))
    return out


def _has_deletes(scan: logformat.LogFileScan, committed: frozenset[str]) -> bool:
    """A committed delete block in the log, or damage hiding what its blocks are."""
    return bool(scan.corrupt) or any(b.block_type is BlockType.DELETE for b in _committed_blocks(scan, committed))


def _has_partial(scan: logformat.LogFileScan, committed: frozenset[str]) -> bool:
    """A committed partial-update data block in the log."""
    return any(b.is_partial for b in _committed_blocks(scan, committed) if b.block_type in DATA_BLOCK_TYPES)


@dataclass(frozen=True)
class _Append:
    """One completed deltacommit's append to a log: its bytes [start, end) and its write stat's facts."""

    start: int
    end: int
    min_ms: int | None
    max_ms: int | None
    deletes: int


def _from_covering_stats(timeline: Timeline, logs: list[tuple[str, LogFile]],
                         aliases: Mapping[tuple[str, str], str]) -> dict[str, LogEventTime]:
    """log path -> event times from the write stats, for the object-store logs they account for exactly; {} when
    reading the stats would cost as many requests as scanning the logs (or the logs are local: a scan is a pread).

    A log is accounted for when the extents of the completed deltacommits' appends to it (`logOffset`,
    `fileSizeInBytes`; through carry-over copies, the log it copies) tile [0, its listed size) with nothing
    left over: then every byte of it is a committed block of one of those writes — no failed write's block, no
    rollback command, no damage that changed its size — and its times are theirs. Every append must carry event
    times and no deletes (Java's stats do not count deletes' event times; ours carry them only in the header).
    """
    remote = [(part, lf) for part, lf in logs if storage.is_remote(lf.path)]
    if not remote or not _instants_cheaper(timeline, [(part, lf.path) for part, lf in remote],
                                           [(lf.path, lf.size) for _, lf in remote]):
        return {}
    return covering_stats(timeline, remote, aliases)


def _from_summary(timeline: Timeline, logs: list[tuple[str, LogFile]]) -> dict[str, LogEventTime]:
    """log path -> event times from the latest deltacommit's summary of the pending logs
    (`engine.slices.pending_log_times`), for the object-store logs it records at their listed size (and ETag).

    The same answer `_from_covering_stats` gives (and, for a log with deletes, the header scan then the stats): the
    entry is the stat of the one write that created the log whole, carried forward while the log stayed that size.
    Local logs are left to their header scan, a pread each."""
    remote = [(part, lf) for part, lf in logs if storage.is_remote(lf.path)]
    summary = pending_log_times.latest(timeline) if remote else {}
    out = {}
    for part, lf in remote:
        entry = summary.get((part, lf.name))
        if entry is not None and entry.matches(lf.path, lf.size):
            out[lf.path] = LogEventTime(entry.min_ms, entry.max_ms, "write_stats", deletes=entry.deletes)
    return out


def _instants_cheaper(timeline: Timeline, named: list[tuple[str, str]], logs: list[tuple[str, int]]) -> bool:
    """Whether reading the metadata of the completed instants that can describe the logs `named` ((partition,
    path); those at or after the oldest instant they name, before carry-over chains lower it: what
    `describing_instants` reads at least) that this process does not hold yet costs fewer requests than
    scanning `logs` ((path, size))."""
    completed = _completed_writes(timeline, _floor(n for _, n in _log_names(named)))
    cost = storage.immutable_reads_needed([timeline.instant_path(i) for i in completed])
    return not cost or cost < logformat.reads_needed(logs)


def _copied_from(copies: Mapping[tuple[str, str], str], partition: str, name: str,
                 known: Callable[[tuple[str, str]], bool]) -> str | None:
    """`name`, or the log it carries over (through copies of copies), whichever is first `known`; None."""
    seen = set()
    while not known((partition, name)):
        if (partition, name) not in copies or name in seen:
            return None
        seen.add(name)
        name = copies[(partition, name)]
    return name


def covering_stats(timeline: Timeline, logs: list[tuple[str, LogFile]],
                   aliases: Mapping[tuple[str, str], str]) -> dict[str, LogEventTime]:
    """`_from_covering_stats` for every log of `logs` (partition, log), wherever it lives."""
    completed = describing_instants(timeline, [(part, lf.path) for part, lf in logs], aliases)
    appends: dict[tuple[str, str], list[_Append]] = {}
    shared: set[tuple[str, str]] = set()
    for inst in completed:
        if inst.action != DELTACOMMIT:
            continue
        for stat in timeline.commit_metadata(inst).write_stats:
            if stat.names != {stat.file_name}:
                # Java names every log of the slice in `logFiles` and gives them all the append's times (what the
                # header path's stats fallback reads): not an account of one log's bytes; left to that path.
                shared.update((stat.partition_path, n) for n in stat.names)
            extent = stat.committed_extent
            if extent is not None:
                appends.setdefault((stat.partition_path, stat.file_name), []).append(
                    _Append(extent[0], extent[1], stat.min_event_time, stat.max_event_time, stat.num_deletes))
    copies = {**carried_aliases(timeline, completed), **aliases}
    out = {}
    for part, lf in logs:
        found = _tiled(appends, shared, copies, part, lf.name, lf.size)
        if found is not None:
            out[lf.path] = found
    return out


def _tiled(appends: Mapping[tuple[str, str], list[_Append]], shared: AbstractSet[tuple[str, str]],
           copies: Mapping[tuple[str, str], str], partition: str, name: str, size: int) -> LogEventTime | None:
    found = _copied_from(copies, partition, name, lambda k: k in appends or k in shared)
    if found is None or (partition, found) in shared:
        return None
    name = found
    pos = 0
    for a in sorted(appends[(partition, name)], key=lambda a: a.start):
        if a.start != pos or a.end <= a.start or a.min_ms is None or a.deletes:
            return None
        pos = a.end
    if pos != size:
        return None
    parts = appends[(partition, name)]
    lo = min(a.min_ms for a in parts if a.min_ms is not None)
    hi = max(a.max_ms if a.max_ms is not None else a.min_ms for a in parts if a.min_ms is not None)
    return LogEventTime(lo, hi, "write_stats", deletes=False)


def unchanged_since_written(timeline: Timeline, logs: Iterable[tuple[str, str, int]]) -> set[str]:
    """The paths among `logs` ((partition, path, listed size)) of object-store logs that are byte for byte what a
    completed write created: this operation's listing gives the object an ETag equal to the MD5 its write recorded
    (`LOG_MD5`; through carried copies, the log copied — a server-side copy keeps a single-part object's MD5).
    Nothing has touched such a log since its write committed it, so a damage check need not read it; anything
    else (no MD5 recorded: Java's logs, rollback and carry-forward logs; another ETag: a replaced object, a
    multipart or encrypted one) is read as before. Empty when reading the completed instants would cost more
    requests than scanning the logs."""
    logs = [(part, path, size) for part, path, size in logs
            if storage.is_remote(path) and storage.listed_etag(path, size)]
    # The latest deltacommit's summary repeats each pending log's recorded MD5 (through carried copies).
    summary = pending_log_times.latest(timeline) if logs else {}
    found = {path for part, path, size in logs if (entry := summary.get((part, os.path.basename(path)))) is not None
             and entry.md5 is not None and entry.matches(path, size)}
    logs = [log for log in logs if log[1] not in found]
    if not logs or not _instants_cheaper(timeline, [(part, path) for part, path, _ in logs],
                                         [(path, size) for _, path, size in logs]):
        return found
    # the instants that can have written these logs, or carried them over (`describing_instants`)
    completed = describing_instants(timeline, [(part, path) for part, path, _ in logs])
    md5s: dict[tuple[str, str], str] = {}
    for inst in (i for i in completed if i.action == DELTACOMMIT):
        for rel, md5 in _log_md5s(timeline.commit_metadata(inst).extra).items():
            folder, _, name = rel.rpartition("/")
            md5s[(folder, name)] = md5
    copies = carried_aliases(timeline, completed)
    out = set(found)
    for part, path, size in logs:
        written = _copied_from(copies, part, os.path.basename(path), md5s.__contains__)
        etag = (storage.listed_etag(path, size) or "").strip('"')
        if written is not None and etag and md5s[(part, written)] == etag:
            out.add(path)
    return out


def _log_md5s(extra: Mapping[str, str]) -> dict[str, str]:
    try:
        found = json.loads(extra.get(LOG_MD5) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _committed_blocks(scan: logformat.LogFileScan, committed: frozenset[str]) -> list[logformat.BlockInfo]:
    rolled_back = {b.target_instant_time for b in scan.blocks
                   if b.block_type is BlockType.COMMAND and b.instant_time in committed}
    return [b for b in scan.blocks if b.block_type is not BlockType.COMMAND
            and b.instant_time in committed and b.instant_time not in rolled_back]


def _from_header(scan: logformat.LogFileScan, committed: frozenset[str]) -> LogEventTime | None:
    """Header attributes, if every committed block is a data block carrying them."""
    blocks = _committed_blocks(scan, committed)
    mins = [b.min_event_time for b in blocks if b.block_type in DATA_BLOCK_TYPES and b.min_event_time is not None]
    if not blocks or len(mins) < len(blocks):
        return None
    lo = min(mins)
    hi = max((b.max_event_time for b in blocks if b.max_event_time is not None), default=lo)
    return LogEventTime(lo, hi, "header")


def _stats_bound(scan: logformat.LogFileScan, committed: frozenset[str]) -> bool:
    """Whether write stats can bound every committed block of the log.

    Java folds into a stat the event time of each record that has one (HoodieWriteHandle.getRecordMetadata); a
    delete from Spark SQL's DELETE carries none, so its stat says nothing about the deletes beside its upserts.
    Our delete blocks carry each delete's event time (EVENT_TIMES_ATTR) and our stats include them; a delete block
    without that attribute leaves the log unknown (decoded: `none`, i.e. must compact), as it always was.
    """
    return all(EVENT_TIMES_ATTR in (b.schema_json or "") for b in _committed_blocks(scan, committed)
               if b.block_type is BlockType.DELETE)


def _from_stats(stats: StatTimes, partition: str, name: str, path: str,
                aliases: Mapping[tuple[str, str], str]) -> LogEventTime | None:
    candidates = [name]
    if storage.is_link(path):  # a carried-over symlink: its stats are under the target's name
        candidates.append(os.path.basename(os.path.realpath(path)))
    seen: set[str] = set()
    while candidates:
        cand = candidates.pop(0)
        if cand in seen:
            continue
        seen.add(cand)
        hit = stats.get((partition, cand))
        if hit is not None and hit[2] and hit[0] is not None:
            return LogEventTime(hit[0], hit[1], "write_stats")
        if (partition, cand) in aliases:   # a copy (of a copy ...) of a written log
            candidates.append(aliases[(partition, cand)])
    return None


def _from_content(path: str, committed: frozenset[str], field: str | None) -> LogEventTime:
    """Decode the log once; min/max of `field` over committed data blocks. Delete-only logs give `none`."""
    if field is None:
        return LogEventTime(None, None, "none")
    contents = logformat.read_log_file(path, columns=[field])
    rolled_back = {b.info.target_instant_time for b in contents.blocks
                   if isinstance(b, logformat.CommandBlock) and b.info.instant_time in committed}
    columns: list[pa.Array] = []
    unknown = False
    for block in contents.blocks:
        inst = block.info.instant_time
        if inst not in committed or inst in rolled_back:
            continue
        if isinstance(block, logformat.DeleteBlock) or isinstance(block, logformat.DataBlock) and block.partial \
                and field not in block.records.column_names:
            # A partial record without the field keeps the event time it had, which the log does not tell.
            unknown = True
        elif isinstance(block, logformat.DataBlock) and field in block.records.column_names:
            columns.append(block.records.column(field).combine_chunks())
    lows: list[int] = []
    highs: list[int] = []
    for col in columns:
        lo, hi = eventtime.known_bounds(col)
        if lo is not None:
            lows.append(lo)
            highs.append(hi if hi is not None else lo)
    if not lows or unknown:
        # Deletes (and partial records without the field) have no event time of their own: the log's minimum is
        # unknown (None = must compact).
        return LogEventTime(None, max(highs) if highs else None, "none" if not lows else "decoded")
    return LogEventTime(min(lows), max(highs), "decoded")
