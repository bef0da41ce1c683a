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

The instants must be completed writes (deltacommit, commit, replacecommit) on the active timeline; anything
else — unknown, pending, rolled back, archived, or older than what the last clean kept — is a ConfigError.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError
from engine.read.fsview import WRITE_ACTIONS, FileSlice, FileSystemView
from engine.read.window import InstantWindow
from engine.timeline.instants import CLEAN, COMMIT, ROLLBACK, Timeline

EARLIEST = "0"   # an incremental read without a begin instant starts before every instant (hudi-rs: "19700101…")


@dataclass(frozen=True)
class VersionedSlices:
    """What a time-travel or incremental read reads: slices and the window their reader applies."""

    window: InstantWindow
    slices: list[FileSlice]


def time_travel(view: FileSystemView, as_of: str) -> VersionedSlices:
    check_instant(view.timeline, as_of, "as-of")
    check_not_cleaned(view.timeline, as_of, "as-of")
    return VersionedSlices(InstantWindow(end=as_of), view.latest_slices(as_of=as_of))


def incremental(view: FileSystemView, begin: str | None, end: str | None) -> VersionedSlices:
    timeline = view.timeline
    if begin is not None:
        check_instant(timeline, begin, "begin")
    if end is None:
        end = latest_write(timeline)
    else:
        check_instant(timeline, end, "end")
    check_not_cleaned(timeline, end, "end")
    start = begin if begin is not None else EARLIEST
    if start >= end:
        raise ConfigError(f"incremental range ({begin}, {end}] is empty: the begin instant must be before the end")
    changed = _written_groups(timeline, start, end)
    window = InstantWindow(end=end, begin=start)
    slices = [s for s in view.latest_slices(as_of=end) if (s.partition_path, s.file_id) in changed]
    return VersionedSlices(window, slices)


def latest_write(timeline: Timeline) -> str:
    writes = _writes(timeline)
    if not writes:
        raise ConfigError(f"table {timeline.base_path} has no completed commit to read up to")
    return writes[-1]


def _writes(timeline: Timeline) -> list[str]:
    return [i.timestamp for i in timeline.completed() if i.action in WRITE_ACTIONS]


def _written_groups(timeline: Timeline, begin: str, end: str) -> set[tuple[str, str]]:
    """File groups that the writes of (begin, end] changed. A compaction changes no record: a group only it
    touched holds no row committed in the range (its records' commit times are those of earlier writes)."""
    changed: set[tuple[str, str]] = set()
    for inst in timeline.completed():
        if inst.action not in WRITE_ACTIONS or not begin < inst.timestamp <= end:
            continue
        meta = timeline.commit_metadata(inst)
        if not (inst.action == COMMIT and meta.is_compaction):
            changed.update(s.key for s in meta.write_stats)
    return changed


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


def check_not_cleaned(timeline: Timeline, ts: str, name: str) -> None:
    """The slices as of `ts` must still exist: refuse an instant before what the last clean retained."""
    cleans = [i for i in timeline.completed() if i.action == CLEAN]
    if not cleans:
        return
    earliest = timeline.clean_plan(cleans[-1].timestamp).earliest_instant_to_retain
    if earliest is not None and ts < earliest[0]:
        raise ConfigError(f"{name} instant {ts} is older than the earliest instant clean {cleans[-1].timestamp} "
                          f"retained ({earliest[0]}): its file slices are gone")
