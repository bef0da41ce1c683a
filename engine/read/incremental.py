"""Time travel and incremental queries: checking their instants and choosing the slices they read.

Both follow Java Hudi and hudi-rs on table version 6, where an instant's position is its *requested*
timestamp (the one in its file names), not its completion time:
- time travel as of I reads the table built from the completed instants with timestamp ≤ I: per file group
  the latest slice whose base instant is ≤ I (a compaction C > I is invisible, with the logs it carried over
  into slice C: the older slice still holds the originals), and its log blocks of instants ≤ I;
- incremental (I1, I2] reads, per file group that a write (not a compaction) of (I1, I2] touched, the slice as
  of I2: what the commits of the range wrote into it, merged, and of that only the rows committed in (I1, I2]
  (`engine.read.window`).
A compaction commit is no change: its base files and its carry-forward log keep each record's original
`_hoodie_commit_time`, and the logs it carried over (links or copies) keep their blocks' original instants.
One slice per file group is read, never the carried files beside their originals; so a result has one row per
key, and consecutive ranges never return one version of a record twice.

Table version 8 keeps time travel on requested times (hudi 0.5.0 as of I reads the writes requested ≤ I, also one
that completed after I) but selects an incremental range by *completion* time, as Java 1.x and hudi 0.5.0 do: (I1, I2]
reads the instants that completed in it (`InstantWindow.members`), the default end is the latest completion time,
and the "before the active timeline" check looks at the LSM history.

Time travel's instant must be a completed write (deltacommit, commit, replacecommit) on the active timeline;
anything else — unknown, pending, rolled back, archived — is a ConfigError. An incremental range's ends are
instant *times*, existing or not, as in Hudi ("commits after begin, up to end": `--begin 000` reads from the
start); it is refused only when it is empty or reaches before an active timeline whose older instants were
archived (their commits cannot be read any more). So is a read whose slices a clean deleted
(`check_not_cleaned`): as of I, a file group live at I needs its latest slice with base instant ≤ I; when any
completed clean deleted a file of a slice S ≤ I of such a group (the deleted files name their slice) and the
group has no later committed slice ≤ I on disk, S was the one visible at I and the read would be partial.
An incremental (I1, I2] reads only the slices as of I2 of the groups the range changed, so only those are
checked, as of I2; the begin needs nothing (the slice as of I2 holds every row committed in the range).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError
from engine.io.naming import parse_base_file_name, parse_log_file_name
from engine.read.window import InstantWindow
from engine.slices.fsview import WRITE_ACTIONS, FileSystemView
from engine.slices.groups import FileSlice
from engine.timeline.instants import ROLLBACK, Instant, Timeline

EARLIEST = "0"   # an incremental read without a begin instant starts before every instant (hudi-rs: "19700101…")


@dataclass(frozen=True)
class VersionedSlices:
    """What a time-travel or incremental read reads: slices and the window their reader applies."""

    window: InstantWindow
    slices: list[FileSlice]


def time_travel(view: FileSystemView, as_of: str) -> VersionedSlices:
    check_instant(view.timeline, as_of, "as-of")
    check_not_cleaned(view, as_of, "as-of")
    return VersionedSlices(InstantWindow(end=as_of), view.latest_slices(as_of=as_of))


def incremental(view: FileSystemView, begin: str | None, end: str | None) -> VersionedSlices:
    timeline = view.timeline
    if begin is not None:
        check_instant_time(begin, "begin")
    if end is None:
        end = latest_write(timeline)
    else:
        check_instant_time(end, "end")
    start = begin if begin is not None else EARLIEST
    if start >= end:
        raise ConfigError(f"incremental range ({begin}, {end}] is empty: the begin instant must be before the end")
    check_not_archived(timeline, start, end)
    changed = _written_groups(timeline, start, end)
    check_not_cleaned(view, end, "end", changed)
    members = (frozenset(i.timestamp for i in timeline.completed() if start < _position(i) <= end)
               if timeline.uses_completion_time else None)
    window = InstantWindow(end=end, begin=start, members=members)
    slices = [s for s in view.latest_slices(as_of=end, by_completion=timeline.uses_completion_time)
              if (s.partition_path, s.file_id) in changed]
    return VersionedSlices(window, slices)


def latest_write(timeline: Timeline) -> str:
    writes = _writes(timeline)
    if not writes:
        raise ConfigError(f"table {timeline.base_path} has no completed commit to read up to")
    return writes[-1]


def _writes(timeline: Timeline) -> list[str]:
    """Completed writes' positions for an incremental range: requested times (v6), completion times (v8)."""
    return sorted(_position(i) for i in timeline.completed() if i.action in WRITE_ACTIONS)


def _position(inst: Instant) -> str:
    """Where an instant sits for incremental ranges: its completion time when the timeline records one (v8)."""
    return inst.completion_time or inst.timestamp


def _written_groups(timeline: Timeline, begin: str, end: str) -> set[tuple[str, str]]:
    """File groups that the writes of (begin, end] changed. A compaction changes no record: a group only it
    touched holds no row committed in the range (its records' commit times are those of earlier writes)."""
    changed: set[tuple[str, str]] = set()
    for inst in timeline.completed():
        if inst.action not in WRITE_ACTIONS or not begin < _position(inst) <= end:
            continue
        meta = timeline.commit_metadata(inst)
        # A log compaction (v9: a deltacommit marked compacted, operation LOG_COMPACT) selects no file group either,
        # as in hudi 0.5.0; its rewritten rows, stamped with its instant, count once another write selects the group.
        if not meta.is_compaction:
            changed.update(s.key for s in meta.write_stats)
    return changed


def check_instant_time(ts: str, name: str) -> None:
    """An incremental range's ends are times, not instants (Hudi's "commits after begin, up to end"): any
    string of digits compares with instant times, e.g. `000` for "from the start"."""
    if not ts.isdigit():
        raise ConfigError(f"{name} instant {ts!r} is not an instant time (yyyyMMddHHmmssSSS)")


def check_not_archived(timeline: Timeline, begin: str, end: str) -> None:
    """Refuse a range that reaches before the active timeline when older instants were archived: their
    commits are no longer on the timeline, so the read could not return what they wrote. Java's archive files
    do not name their instants, so any range starting before the first active instant counts."""
    first = min((_position(i) for i in timeline.instants), default=None)
    if first is None or begin >= first or not timeline.has_archive():
        return
    archive = timeline.history_folder or timeline.archive_folder
    raise ConfigError(f"incremental range ({begin}, {end}] reaches before the active timeline, which starts at "
                      f"{first}: older instants were archived ({archive}), so commits of the range "
                      f"cannot be read; begin at {first} or later")


def check_instant(timeline: Timeline, ts: str, name: str) -> None:
    """ConfigError unless `ts` is a completed write instant on the active timeline, saying what it is instead."""
    if not ts.isdigit():
        raise ConfigError(f"{name} instant {ts!r} is not an instant time (yyyyMMddHHmmssSSS)")
    found = timeline.get(ts)
    if any(i.is_completed and i.action in WRITE_ACTIONS for i in found):
        return
    if found:
        inst = found[0]
        what = f"a {inst.action}, not a write" if inst.is_completed else f"not completed ({inst.state.value} {inst.action})"
        raise ConfigError(f"{name} instant {ts} is {what}")
    for rb in timeline.completed():
        if rb.action == ROLLBACK and ts in timeline.rollback_record(rb.timestamp).rolled_back:
            raise ConfigError(f"{name} instant {ts} was rolled back (by rollback {rb.timestamp})")
    if timeline.instants and ts < timeline.instants[0].timestamp:
        raise ConfigError(f"{name} instant {ts} is not on the active timeline (archived?): it starts at "
                          f"{timeline.instants[0].timestamp}")
    raise ConfigError(f"{name} instant {ts} is not on the timeline of {timeline.base_path}")


def check_not_cleaned(view: FileSystemView, ts: str, name: str,
                      groups: set[tuple[str, str]] | None = None) -> None:
    """Refuse when a clean deleted a slice that a read as of `ts` needs (in `groups`, or in any group).

    Exact for every policy (KEEP_LATEST_COMMITS and KEEP_LATEST_FILE_VERSIONS, whose plans name no earliest
    instant to retain) and over every completed or inflight clean (an interrupted one may have deleted any part
    of its plan), not just the last one."""
    on_disk = view.committed_slice_instants()
    for clean, deleted in view.cleans():
        for key, base in sorted(_cleaned_slices(deleted)):
            if base > ts or (groups is not None and key not in groups) or not view.live_at(key, ts):
                continue
            if any(base < later <= ts for later in on_disk.get(key, [])):
                continue   # a newer slice, still on disk, is the one visible at ts
            where = f"{key[0]}/{key[1]}" if key[0] else key[1]
            raise ConfigError(f"{name} instant {ts} needs file slice {base} of file group {where}, which clean "
                              f"{clean} deleted: the table as of {ts} is no longer complete")


def _cleaned_slices(deleted: dict[str, list[str]]) -> set[tuple[tuple[str, str], str]]:
    """((partition, fileId), base instant) of every slice a clean deleted a file of."""
    out: set[tuple[tuple[str, str], str]] = set()
    for partition, names in deleted.items():
        for name in names:
            log = parse_log_file_name(name)
            base = parse_base_file_name(name)
            if log is not None:
                out.add(((partition, log.file_id), log.base_instant))
            elif base is not None:
                out.add(((partition, base.file_id), base.instant))
    return out
