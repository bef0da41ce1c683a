"""Files a rolled-back write left behind ("orphans"), found and removed by `recover` and by every clean.

How they arise: a writer (host A) pauses past its lease (a GC pause, a stopped VM); host B takes the table lock
and rolls A's inflight instant back (engine.services.rollback: the files present then are deleted or masked, and
a completed `rollback` instant names A in `commitsRollback`); A resumes and its tasks write more files under A
before its publish is refused (`lock_lost`). No rollback plan lists those files and no completed commit names
their instant, so nothing else would ever delete them: they are invisible to readers while the rollback is on the
active timeline, cost storage for good, and once the rollback is archived an instant older than the active
timeline counts as committed to readers (hudi-rs, Java, `Timeline.committed_writes`) — their blocks could then be
read as data.

What goes (all of it, or the file stays):
- the dead instants: named by a completed rollback on the active timeline, and neither completed nor pending now;
- base files named by a dead instant;
- log files whose blocks are all data or delete blocks of dead instants (header-only scans): table version 6 names
  a log by its slice's base instant, so only its blocks say who wrote it; version 8/9 names it by the writing
  instant, and the blocks are still checked (a rolled-back compaction's carried copy holds committed blocks).
Never: a log a committed write stat names, a log a rollback masked (its metadata names it: Java leaves those too), a
symlink (a carried-over link), a log with a rollback command block,
a log with a corrupt region (its records may be committed), an empty log (nobody's blocks say whose it is).

Only rollbacks on the active timeline are considered: an archived rollback's orphans were removed while it was
active — by `recover`, an explicit clean, the automatic clean in the day after the rollback (WATCH_MS: looking costs
a listing per commit), and by archival itself just before it archives a rollback. A zombie that resumes only after its rollback was
archived is refused at publish as ever, but what it wrote then stays until removed by hand.

The caller holds the table lock (a write under way names its instant on the timeline, so it is never "dead").
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass

from engine import logformat
from engine.io import storage
from engine.io.naming import instant_to_millis, parse_base_file_name, parse_log_file_name
from engine.lock import ensure_held
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import COMMIT_ACTIONS, ROLLBACK, Timeline

# A zombie's log is written after its instant was taken, by the writer's clock, and listed with the store's
# modification time; clocks of hosts and stores differ by far less than this. A version-6 log listed as older than
# the oldest dead instant by more cannot hold its blocks, so it is not read (a clean runs after every commit: it must
# not read every log of the table while a rollback is on the active timeline).
CLOCK_SKEW_MS = 15 * 60 * 1000


# How long after a rollback the automatic clean (after every commit) keeps looking for what its write left: a
# zombie resumes within its pause, and looking costs a listing of the table per commit. Later, `recover`, an
# explicit clean, and the archival of the rollback (the last moment its instant reads as rolled back) look.
WATCH_MS = 24 * 3600 * 1000


def recently_rolled_back(timeline: Timeline, now_ms: int) -> bool:
    """Whether a completed rollback on the active timeline is younger than WATCH_MS (by its instant time)."""
    newest = max((i.timestamp for i in timeline.completed() if i.action == ROLLBACK), default=None)
    return newest is not None and now_ms - instant_to_millis(newest) <= WATCH_MS


@dataclass(frozen=True)
class Orphans:
    """Files rolled-back writes left behind, each with the rolled-back instants whose data it holds."""

    files: dict[str, tuple[str, ...]]   # path -> instants

    @property
    def paths(self) -> list[str]:
        return sorted(self.files)

    @property
    def instants(self) -> list[str]:
        return sorted({ts for held in self.files.values() for ts in held})


def describe(paths: list[str], instants: list[str], verb: str = "removed") -> str:
    """One line for a result's message and the CLI."""
    return f"{verb} {len(paths)} file(s) left behind by rolled-back write(s) {', '.join(instants)}"


def dead_instants(timeline: Timeline) -> set[str]:
    """Instants completed rollbacks on the active timeline undid, less any on the timeline now (in any state)."""
    undone = {ts for inst in timeline.completed() if inst.action == ROLLBACK
              for ts in timeline.rollback_record(inst.timestamp).rolled_back}
    return {ts for ts in undone if not timeline.get(ts)}


def find_orphans(base_path: str, timeline: Timeline | None = None) -> Orphans:
    """The orphan files of the table (reads only: one listing and header scans of the candidate logs)."""
    timeline = timeline or Timeline.load(base_path)
    dead = dead_instants(timeline)
    if not dead:   # the usual case: no listing, no read
        return Orphans({})
    view = FileSystemView(base_path, timeline)
    cutoff = min(instant_to_millis(ts) for ts in dead) - CLOCK_SKEW_MS
    # The logs a rollback masked with a command block stay, as Java leaves them (its metadata names them).
    kept = {name for inst in timeline.completed() if inst.action == ROLLBACK
            for name in timeline.rollback_record(inst.timestamp).kept_files}
    doomed: dict[str, tuple[str, ...]] = {}
    logs: list[tuple[str, int]] = []
    for partition in view.partitions():
        for entry in _listing(view, partition):
            base, log = parse_base_file_name(entry.name), parse_log_file_name(entry.name)
            if base is not None and base.instant in dead:
                doomed[entry.path] = (base.instant,)
            elif log is not None and not entry.is_link and entry.name not in kept \
                    and _may_hold(log.base_instant, entry.mtime_ms, dead, cutoff, timeline.uses_completion_time):
                logs.append((entry.path, entry.size))
    # Read before any log is scanned: a committed write's log is never doomed, so it need not be read either.
    committed = _committed_paths(timeline) if doomed or logs else set()
    doomed.update(_dead_logs([(p, size) for p, size in logs if storage.relative(p, base_path) not in committed], dead))
    return Orphans({p: held for p, held in doomed.items() if storage.relative(p, base_path) not in committed})


def remove_orphans(base_path: str, timeline: Timeline | None = None) -> Orphans:
    """Delete the orphan files (the caller holds the table lock); returns what was deleted."""
    found = find_orphans(base_path, timeline)
    if found.files:
        ensure_held("removing files of rolled-back writes")
    for path in found.paths:
        try:
            storage.remove(path)
        except FileNotFoundError:
            pass   # removed meanwhile by another recover: it is gone either way
    return found


def _listing(view: FileSystemView, partition: str) -> list[storage.Entry]:
    """The partition's files: from the view's one listing of an object store, else a local listing."""
    remote = view.remote_entries(partition)
    if remote is not None:
        return remote
    return [e for e in storage.list_entries(view.partition_dir(partition)) if not e.is_dir]


def _may_hold(name_instant: str, mtime_ms: int, dead: set[str], cutoff_ms: int, named_by_writer: bool) -> bool:
    """Whether a log may hold a dead instant's blocks: one named by a dead instant may; on version 6 (named by the
    slice) any log modified after the oldest dead instant began (less the clock skew) may."""
    return name_instant in dead or (not named_by_writer and mtime_ms >= cutoff_ms)


def _dead_logs(logs: list[tuple[str, int]], dead: set[str]) -> dict[str, tuple[str, ...]]:
    """The logs every block of which is a data or delete block of a dead instant, with those instants."""
    out: dict[str, tuple[str, ...]] = {}
    for path, scan in logformat.scan_log_files(logs).items():
        held = {b.instant_time for b in scan.blocks}
        if scan.blocks and not scan.corrupt and _all_data(scan.blocks) and held <= dead:
            out[path] = tuple(sorted(ts for ts in held if ts))
    return out


def _all_data(blocks: list[logformat.BlockInfo]) -> bool:
    return all(b.block_type is not logformat.BlockType.COMMAND for b in blocks)


def _committed_paths(timeline: Timeline) -> set[str]:
    """Table-relative paths of every file a completed commit on the active timeline names in its write stats."""
    out: set[str] = set()
    for inst in timeline.completed():
        if inst.action in COMMIT_ACTIONS:
            for stat in timeline.commit_metadata(inst).write_stats:
                out.add(stat.path)   # "/"-separated, relative to the table, whatever the store
                pdir = posixpath.dirname(stat.path)
                out.update(posixpath.join(pdir, posixpath.basename(name)) for name in stat.log_files)
    return out
