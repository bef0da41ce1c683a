"""Cleaning old file slices of a v6 MOR table, aware of carried-over symlinks, as real Hudi clean instants.

Policies (docs/HUDI-FORMAT.md §6.1, Java CleanPlanner):
- KEEP_LATEST_COMMITS (default, `hoodie.cleaner.commits.retained`): keep every slice needed to read the table
  as of each of the last N completed commits/deltacommits. With E the earliest commit to retain, a slice is
  cleaned when its base instant is < E, it is not the latest slice, and it is not the newest slice before E.
- KEEP_LATEST_FILE_VERSIONS (`hoodie.cleaner.fileversions.retained`, default 3): keep the newest N slices.
- Replaced file groups (a completed replacecommit: insert_overwrite[_table], clustering) are deleted whole once
  the replacecommit is older than E (KEEP_LATEST_COMMITS), or at once (KEEP_LATEST_FILE_VERSIONS), as Java.

The RFC's CleanPlanner rule: with symlink carry-over, a log of an old slice may be the target of a link in a
newer slice, so a file behind a link of a *kept* slice (found with `os.readlink`, and in the completed
compactions' `tidemark.carryOver` records) is never deleted, even when its own slice is cleaned. Nor is
anything of the latest slices, or anything a pending compaction/clustering plan names (those file groups are
skipped entirely). A dangling link in a kept slice is an error: the table already lost data there.

Files a rolled-back write left behind (a writer that lost its lock writing on after another host rolled it back)
belong to no slice any policy counts: every clean, the automatic one too, removes them first
(engine.services.orphans) and reports them in `CleanResult.orphans`; a dry run lists them.

Two more files are kept whatever their slice: the log a carried byte copy was made from while the copy holds a
corrupt block of a committed instant (it may hold the only intact bytes; the clean's message says so), until the
copy is repaired.

Timeline: `R.clean.requested` (HoodieCleanerPlan) -> `R.clean.inflight` -> `R.clean` (HoodieCleanMetadata).
Symlinks are deleted before every other file, so a clean killed part-way never leaves a link whose target it
already deleted. A clean interrupted after `requested` is finished by the next `run_clean` (or `recover`),
re-checking every file first.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import errors
from engine.config.properties import load_table_config
from engine.errors import CleanRefused, ConfigError
from engine.io import storage
from engine.io.faults import fault_point
from engine.io.naming import instant_to_millis, new_instant_time, parse_log_file_name
from engine.lock import TableLock, ensure_held, holding, table_lock_of
from engine.logformat import integrity
from engine.progress import Progress, Reporter
from engine.results import CleanResult
from engine.services import orphans, rollback
from engine.slices.fsview import FileSystemView
from engine.slices.groups import FileGroup, FileSlice
from engine.timeline import avro_models
from engine.timeline.compactions import carried_over_entries, compaction_records
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import (
    CLEAN,
    COMMIT,
    COMMIT_ACTIONS,
    COMPACTION,
    LOGCOMPACTION,
    REPLACECOMMIT,
    SAVEPOINT,
    Instant,
    State,
    Timeline,
    TimelineError,
    complete,
    create_requested,
    pending_file,
    transition_to_inflight,
)
from engine.timeline.metadata import CleanPlanRecord

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS)
POLICY_KEY = "hoodie.cleaner.policy"
COMMITS_RETAINED_KEY = "hoodie.cleaner.commits.retained"
FILE_VERSIONS_RETAINED_KEY = "hoodie.cleaner.fileversions.retained"
HOURS_RETAINED_KEY = "hoodie.cleaner.hours.retained"
_RETAINED_KEY = {KEEP_LATEST_COMMITS: COMMITS_RETAINED_KEY, KEEP_LATEST_FILE_VERSIONS: FILE_VERSIONS_RETAINED_KEY,
                 KEEP_LATEST_BY_HOURS: HOURS_RETAINED_KEY}
# Completed actions that start new file slices: a compaction (completes as `commit`), a replacecommit.
_SLICE_MAKERS = frozenset({COMMIT, REPLACECOMMIT})
# Policies that clean by an earliest commit to retain (slices a reader as of it or later needs stay).
_BY_EARLIEST = (KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS)
# Pending instants that will write files: the earliest one bounds the earliest commit to retain (Java).
_WRITE_ACTIONS = frozenset({*COMMIT_ACTIONS, COMPACTION, LOGCOMPACTION})

SliceKey = tuple[str, str, str]      # (partition, fileId, base instant)
GroupKey = tuple[str, str]           # (partition, fileId)


@dataclass
class CleanPlan:
    base_path: str
    policy: str
    retained: int
    earliest_instant_to_retain: Instant | None
    last_completed_commit: str
    files_to_delete: dict[str, list[str]] = field(default_factory=dict)   # partition -> file names
    kept_link_targets: dict[str, list[str]] = field(default_factory=dict)  # cleaned slices' files kept for links
    skipped_file_groups: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # why a file the policy would delete is kept

    @property
    def total_files(self) -> int:
        return sum(len(v) for v in self.files_to_delete.values())

    def paths_by_partition(self) -> dict[str, list[str]]:
        """Partition -> absolute paths of the files to delete."""
        return {p: [_join(self.base_path, p, n) for n in names] for p, names in sorted(self.files_to_delete.items())}

    def paths(self) -> list[str]:
        return [path for paths in self.paths_by_partition().values() for path in paths]

    def to_dict(self) -> dict[str, Any]:
        earliest = self.earliest_instant_to_retain
        return {"policy": self.policy, "retained": self.retained,
                "earliest_instant_to_retain": earliest.timestamp if earliest else None,
                "last_completed_commit": self.last_completed_commit, "total_files": self.total_files,
                "files_to_delete": self.files_to_delete, "kept_link_targets": self.kept_link_targets,
                "skipped_file_groups": self.skipped_file_groups, "errors": self.errors, "notes": self.notes}


@dataclass
class _Guards:
    """What pending table services need: whole file groups, plus files they name."""

    groups: dict[GroupKey, str] = field(default_factory=dict)   # -> reason
    paths: list[str] = field(default_factory=list)


# -------------------------------------------------------------------------------------------- planning

def plan_clean(base_path: str, *, retain_commits: int | None = None, policy: str | None = None,
               retain_versions: int | None = None, retain_hours: int | None = None,
               timeline: Timeline | None = None, incremental: bool = False) -> CleanPlan:
    """Decide which files a clean would delete; reads only, writes nothing. `policy` None: the table's
    `hoodie.cleaner.policy` (Hudi's default KEEP_LATEST_COMMITS). `incremental` (the automatic clean): plan
    nothing when no compaction or replacecommit since the last clean can have made a slice deletable."""
    timeline = timeline or Timeline.load(base_path)
    _check_runnable(timeline)
    policy, retained = _retained(base_path, policy, retain_commits, retain_versions, retain_hours)
    earliest = _earliest_for(timeline, policy, retained)
    plan = CleanPlan(base_path, policy, retained, earliest, _last_completed_commit(timeline))
    if incremental and _nothing_new_to_clean(timeline, policy, earliest):
        return plan
    view = FileSystemView(base_path, timeline)
    guards = _pending_service_guards(timeline, view)
    plan.skipped_file_groups = [{"partitionPath": p, "fileId": f, "reason": r}
                                for (p, f), r in sorted(guards.groups.items())]
    doomed = _doomed_slices(view, policy, retained, earliest, guards.groups)
    if not doomed:   # the usual case after a commit: nothing to delete, so nothing to protect or check
        return plan
    links = _scan_links(view)
    doomed_keys = {_slice_key(s) for s in doomed}
    protected = _protected_paths(view, timeline, lambda key, _link: key in doomed_keys, links, guards, plan.errors)
    doomed_files = {_key(p) for sl in doomed for p in _slice_files(sl, links)}
    originals = _damaged_copy_originals(view, timeline, doomed_files)
    protected.update(originals)
    for sl in doomed:
        plan.notes.extend(originals[_key(p)] for p in _slice_files(sl, links) if _key(p) in originals)
        for path in _slice_files(sl, links):
            bucket = plan.kept_link_targets if _key(path) in protected else plan.files_to_delete
            bucket.setdefault(sl.partition_path, []).append(storage.name_of(path))
    for bucket in (plan.files_to_delete, plan.kept_link_targets):
        for names in bucket.values():
            names.sort()
    return plan


def _nothing_new_to_clean(timeline: Timeline, policy: str, earliest: Instant | None) -> bool:
    """Java's incremental cleaning (`hoodie.cleaner.incremental.mode`, default true), decided from the timeline
    alone: a slice becomes deletable only once a newer slice of its group exists before the earliest commit to
    retain (KEEP_LATEST_COMMITS / BY_HOURS), or a group passes its version count (FILE_VERSIONS) — both need a
    compaction or replacecommit the last clean has not seen. Without one, nothing new can be deleted and the clean
    that follows every commit skips listing the table. (A file an earlier clean kept — a damaged copy's original —
    waits for an explicit clean or the next compaction.)"""
    last = timeline.last_completed(frozenset({CLEAN}))
    if last is None:
        return False
    try:
        since = timeline.clean_record(last.timestamp)
    except TimelineError:
        return False
    if since.policy != policy:
        return False
    makers = [i.timestamp for i in timeline.completed() if i.action in _SLICE_MAKERS]
    if policy in _BY_EARLIEST:
        if earliest is None:
            return True
        begin = since.earliest_commit_to_retain or ""
        return not any(begin <= ts < earliest.timestamp for ts in makers)
    return not any(ts > last.timestamp for ts in makers)


def _check_runnable(timeline: Timeline) -> None:
    """Refuse while a compaction executes (it reads old files right now) or a savepoint pins files."""
    for inst in timeline.pending():
        if inst.action in (COMPACTION, LOGCOMPACTION) and inst.state is State.INFLIGHT:
            raise CleanRefused(errors.PENDING_SERVICE,
                               f"{inst.action} {inst.timestamp} is inflight; finish it (run_compaction) or roll it "
                               "back before cleaning", inst.timestamp)
    for inst in timeline.instants:
        if inst.action == SAVEPOINT:
            raise CleanRefused(errors.SAVEPOINT_PRESENT,
                               f"savepoint {inst.timestamp} exists; cleaning around savepoints is not supported",
                               inst.timestamp)


def _retained(base_path: str, policy: str | None, retain_commits: int | None, retain_versions: int | None,
              retain_hours: int | None) -> tuple[str, int]:
    """The policy (argument, else the table's) and how much it retains (argument, else the table's, else Hudi's
    default)."""
    cfg = load_table_config(base_path)
    policy = policy or cfg.str_setting(POLICY_KEY)
    if policy not in _RETAINED_KEY:
        raise ConfigError(f"unknown clean policy {policy!r} ({POLICY_KEY}); use one of {', '.join(POLICIES)}")
    given = {KEEP_LATEST_COMMITS: retain_commits, KEEP_LATEST_FILE_VERSIONS: retain_versions,
             KEEP_LATEST_BY_HOURS: retain_hours}[policy]
    value = given if given is not None else cfg.int_setting(_RETAINED_KEY[policy])
    if value < 1:
        raise ConfigError(f"{policy} must retain at least 1, got {value}")
    return policy, value


def _completed_commits(timeline: Timeline) -> list[Instant]:
    """Completed commit/deltacommit/replacecommit (a completed compaction is a `commit`)."""
    return [i for i in timeline.completed() if i.action in COMMIT_ACTIONS]


def _last_completed_commit(timeline: Timeline) -> str:
    commits = _completed_commits(timeline)
    return commits[-1].timestamp if commits else ""


def _earliest_for(timeline: Timeline, policy: str, retained: int) -> Instant | None:
    if policy == KEEP_LATEST_COMMITS:
        return _earliest_to_retain(timeline, retained)
    if policy == KEEP_LATEST_BY_HOURS:
        return _earliest_by_hours(timeline, retained)
    return None


def _earliest_to_retain(timeline: Timeline, retained: int) -> Instant | None:
    """The N-th latest completed commit, but never after the earliest pending write (CleanerUtils)."""
    commits = _completed_commits(timeline)
    if len(commits) <= retained:
        return None
    return _not_after_pending(timeline, commits, commits[len(commits) - retained])


def _earliest_by_hours(timeline: Timeline, hours: int) -> Instant | None:
    """KEEP_LATEST_BY_HOURS (Java's CleanPlanner): the first completed commit at or after now - N hours; None
    (nothing cleaned) when every commit is older, or none is."""
    cutoff = int(time.time() * 1000) - hours * 3_600_000
    commits = _completed_commits(timeline)
    recent = [c for c in commits if instant_to_millis(c.timestamp) >= cutoff]
    if not recent or recent[0] is commits[0]:
        return None
    return _not_after_pending(timeline, commits, recent[0])


def _not_after_pending(timeline: Timeline, commits: list[Instant], candidate: Instant) -> Instant | None:
    """`candidate`, or the last commit before the earliest pending write when that comes first."""
    pending = [i for i in timeline.pending() if i.action in _WRITE_ACTIONS]
    if pending and candidate.timestamp > pending[0].timestamp:
        before = [c for c in commits if c.timestamp < pending[0].timestamp]
        return before[-1] if before else None
    return candidate


def _pending_service_guards(timeline: Timeline, view: FileSystemView) -> _Guards:
    guards = _Guards()
    for inst in timeline.pending_compactions():   # requested only: inflight was refused
        for op in timeline.compaction_plan(inst.timestamp).operations:
            guards.groups[op.key] = f"pending compaction {inst.timestamp}"
            named = [op.data_file, *op.delta_files, *(s.target for s in op.carried)]
            guards.paths.extend(storage.join(view.partition_dir(op.partition_path), n) for n in named if n)
    for inst in timeline.pending_clustering():
        for part, fid, names in _clustering_slices(timeline, inst):
            guards.groups[(part, fid)] = f"pending clustering {inst.timestamp}"
            guards.paths.extend(storage.join(view.partition_dir(part), n) for n in names)
    return guards


def _clustering_slices(timeline: Timeline, inst: Instant) -> list[tuple[str, str, list[str]]]:
    """(partition, fileId, file names) of every input slice of a pending clustering plan."""
    path = timeline.path_of(inst.timestamp, inst.action, State.REQUESTED)
    try:
        meta = timeline.requested_replace(inst.timestamp)
    except TimelineError as exc:
        raise CleanRefused(errors.UNREADABLE_PLAN,
                           f"{path}: cannot read the pending clustering plan ({exc}); not cleaning blind",
                           inst.timestamp) from exc
    return [(sl.partition_path, sl.file_id, list(sl.file_names)) for sl in meta.slices]


def _doomed_slices(view: FileSystemView, policy: str, retained: int, earliest: Instant | None,
                   guarded: dict[GroupKey, str]) -> list[FileSlice]:
    out: list[FileSlice] = []
    for group in view.file_groups():
        if (group.partition_path, group.file_id) in guarded:
            continue
        out.extend(_doomed_in_group(group, view.committed_instants, policy, retained, earliest))
    for group, replaced_by in view.replaced_file_groups():
        if (group.partition_path, group.file_id) not in guarded and _replaced_expired(replaced_by, policy, earliest):
            out.extend(group.slices)
    return out


def _replaced_expired(replaced_by: str, policy: str, earliest: Instant | None) -> bool:
    """Java's CleanPlanner.getReplacedFilesEligibleToClean: a replaced file group goes as a whole once its
    replacecommit is older than the earliest commit to retain (at once under KEEP_LATEST_FILE_VERSIONS,
    whose versions count only live groups); until then a reader as of an older commit may still need it."""
    if policy not in _BY_EARLIEST:
        return True
    return earliest is not None and replaced_by < earliest.timestamp


def _doomed_in_group(group: FileGroup, committed: frozenset[str], policy: str, retained: int,
                     earliest: Instant | None) -> list[FileSlice]:
    """Older slices to clean. Only committed slices count: the newest one is what readers use, and slices
    of un-committed instants (a crashed write's leftovers) are rollback's business, never the cleaner's."""
    slices = [s for s in group.slices if s.base_instant in committed]
    if policy == KEEP_LATEST_FILE_VERSIONS:
        return slices[:max(len(slices) - retained, 0)]
    if earliest is None:
        return []
    before = [s for s in slices if s.base_instant < earliest.timestamp]
    # The newest slice before E is what a reader as of E uses (it may be the latest slice itself): keep it.
    return before[:-1]


# -------------------------------------------------------------------------------------------- protection

def _protected_paths(view: FileSystemView, timeline: Timeline, dropped: Callable[[SliceKey, str], bool],
                     links: dict[SliceKey, list[str]], guards: _Guards, errors: list[str]) -> set[str]:
    """Keys of every file that must survive, whatever slice it belongs to.

    `dropped(slice key, link path)` says whether a link goes away in this clean: only the others are live.
    """
    protected: set[str] = set()
    for sl in [g.latest for g in view.file_groups()] + view.latest_slices():
        protected.update(_key(p) for p in _slice_files(sl, links))
    for path in guards.paths:   # a pending plan names these; their links' targets too
        protected.add(_key(path))
        _protect_chain(path, protected, errors, "named by a pending plan")
    for key, paths in links.items():
        if view.is_replaced(key[0], key[1]):
            continue   # links stay inside their file group: a replaced group's kept files protect nothing live
        for link in (p for p in paths if not dropped(key, p)):
            protected.add(_key(link))
            _protect_chain(link, protected, errors, f"in kept slice {key[2]} of file group {key[1]}")
    _protect_carry_over_records(view, timeline, dropped, protected, errors)
    return protected


def _protect_carry_over_records(view: FileSystemView, timeline: Timeline, dropped: Callable[[SliceKey, str], bool],
                                protected: set[str], errors: list[str]) -> None:
    """Belt and braces: the completed compactions' own record of which link points where."""
    # A compaction slice that still has its base was not cleaned: its carried links must be there.
    # (A cleaned slice may keep a log that a newer link needs; its own links are rightly gone.)
    unclean = {_slice_key(s) for g in view.file_groups() for s in g.slices if s.base_file is not None}
    for record in compaction_records(timeline):
        for entry in carried_over_entries(record) or []:
            if entry.mode != "symlink" or not entry.symlink or not entry.target:
                continue
            parsed = parse_log_file_name(entry.symlink)
            if parsed is None:
                continue
            key = (entry.partition_path, parsed.file_id, parsed.base_instant)
            pdir = view.partition_dir(key[0])
            link = storage.join(pdir, entry.symlink)
            if dropped(key, link):
                continue
            if not storage.lexists(link):
                if key in unclean:
                    errors.append(f"{link}: carried-over symlink recorded by compaction {record.timestamp} is "
                                  f"missing from kept slice {key[2]} of file group {key[1]}")
                continue   # the slice itself is gone (cleaned earlier): nothing points at the target
            target = storage.join(pdir, entry.target)
            protected.add(_key(target))
            _protect_chain(target, protected, errors, f"target of {entry.symlink}")


def _damaged_copy_originals(view: FileSystemView, timeline: Timeline, doomed: set[str]) -> dict[str, str]:
    """Keys of the logs that carried byte copies were made from, where the copy holds a corrupt block of a
    committed instant -> why the original is kept. The original may be the only intact copy of those records:
    it stays, whatever its slice, until the copy is repaired (or the original is itself damaged, then the one
    it was copied from too). Only copies of originals this clean would delete (keys in `doomed`) are read: a
    clean runs after every commit, and reading every copy each time would cost a GET per copy on a store."""
    copies: dict[str, str] = {}   # copy path -> original path
    for record in compaction_records(timeline):
        for entry in carried_over_entries(record) or []:
            if entry.mode == "copy" and entry.symlink and entry.target:
                pdir = view.partition_dir(entry.partition_path)
                copies[storage.join(pdir, entry.symlink)] = storage.join(pdir, entry.target)
    present = [p for p, original in copies.items()
               if _key(original) in doomed and storage.is_file(p) and not storage.is_link(p)]
    if not present:
        return {}
    extents = CommittedExtents(view.base_path, timeline)
    out: dict[str, str] = {}
    for copy in present:
        cur = copy
        while cur in copies and _damaged(cur, view.committed_instants, extents):
            original = copies[cur]
            out[_key(original)] = (f"kept {original}: carried copy {cur} holds a corrupt block of a committed "
                                   "instant and this is the log it was copied from; repair the copy, then clean again")
            cur = original
    return out


def _damaged(path: str, committed: frozenset[str], extents: CommittedExtents) -> bool:
    return storage.is_file(path) and bool(integrity.scan_corruption([path], committed, extents).committed)


def _protect_chain(path: str, protected: set[str], errors: list[str], where: str) -> None:
    """Protect every hop behind a symlink; a dangling or looping link is an error."""
    seen = {_key(path)}
    cur = path
    while storage.is_link(cur):
        target = os.readlink(cur)
        nxt = storage.join(storage.parent(cur), target)   # relative to the link's dir; absolute stays
        key = _key(nxt)
        protected.add(key)
        if key in seen or not storage.lexists(nxt):
            errors.append(f"{cur}: dangling symlink to {target!r} ({where})")
            return
        seen.add(key)
        cur = nxt


def _scan_links(view: FileSystemView) -> dict[SliceKey, list[str]]:
    """Every symlinked log per slice, dangling ones included (the file-system view skips those)."""
    out: dict[SliceKey, list[str]] = {}
    if not storage.supports_links(view.base_path):
        return out   # object stores: carry-over is by copy, there are no links
    for partition in view.partitions():
        with os.scandir(view.partition_dir(partition)) as entries:
            for entry in entries:
                parsed = parse_log_file_name(entry.name) if entry.is_symlink() else None
                if parsed is not None:
                    key = (partition, parsed.file_id, parsed.base_instant)
                    out.setdefault(key, []).append(entry.path)
    return out


def _slice_files(sl: FileSlice, links: dict[SliceKey, list[str]]) -> list[str]:
    """Base file, logs and any dangling links of a slice, as absolute paths."""
    paths = [sl.base_file.path] if sl.base_file else []
    paths += [lf.path for lf in sl.log_files]
    seen = {_key(p) for p in paths}
    paths += [p for p in links.get(_slice_key(sl), []) if _key(p) not in seen]
    return paths


def _slice_key(sl: FileSlice) -> SliceKey:
    return (sl.partition_path, sl.file_id, sl.base_instant)


def _key(path: str) -> str:
    """Identity of a directory entry: its real parent dir plus its own name (the entry is not followed)."""
    if storage.is_remote(path):
        return path
    return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))


def _join(base_path: str, partition: str, name: str) -> str:
    return storage.join(base_path, partition, name) if partition else storage.join(base_path, name)


# -------------------------------------------------------------------------------------------- execution

def run_clean(base_path: str, *, retain_commits: int | None = None, policy: str | None = None,
              retain_versions: int | None = None, retain_hours: int | None = None, dry_run: bool = False,
              lock: TableLock | None = None, on_progress: Progress | None = None,
              incremental: bool = False) -> CleanResult:
    """Plan and execute a clean as instant R. A dry run only plans (errors are reported, not raised). `policy`
    None: the table's `hoodie.cleaner.policy`."""
    retain = _Retain(retain_commits, retain_versions, retain_hours, incremental)
    if dry_run:
        return _run_clean(base_path, policy, retain, dry_run, on_progress)
    # Under the table lock: a compaction scheduled mid-clean could otherwise link to a file being deleted.
    with holding(table_lock_of(base_path, lock), "clean"):
        return _run_clean(base_path, policy, retain, dry_run, on_progress)


@dataclass(frozen=True)
class _Retain:
    commits: int | None
    versions: int | None
    hours: int | None
    incremental: bool


def _run_clean(base_path: str, policy: str | None, retain: _Retain, dry_run: bool,
               on_progress: Progress | None = None) -> CleanResult:
    if not dry_run:
        rollback.rollback_expired_writes(base_path)   # LAZY failed-writes policy (Java cleans them here)
    timeline = Timeline.load(base_path)
    _check_runnable(timeline)
    resumed = [] if dry_run else [_finish_pending(base_path, inst) for inst in _pending_cleans(timeline)]
    if resumed:
        timeline = Timeline.load(base_path)
    plan = plan_clean(base_path, retain_commits=retain.commits, policy=policy, retain_versions=retain.versions,
                      retain_hours=retain.hours, timeline=timeline, incremental=retain.incremental)
    result = _result(plan, None, dry_run, resumed)
    # A rolled-back write's leftovers are no slice of any policy's: removed whatever the plan (no clean instant
    # records them, as no rollback plan listed them).
    # The automatic clean looks only in the day after a rollback (engine.services.orphans.WATCH_MS).
    watch = not retain.incremental or orphans.recently_rolled_back(timeline, int(time.time() * 1000))
    if not watch:
        left = orphans.Orphans({})
    else:
        left = orphans.find_orphans(base_path, timeline) if dry_run else orphans.remove_orphans(base_path, timeline)
    result.orphans = left.paths
    left_note = [orphans.describe(left.paths, left.instants, "would remove" if dry_run else "removed")] \
        if left.paths else []
    if dry_run:
        result.message = "; ".join([f"dry run: {plan.total_files} file(s) would be deleted", *left_note, *plan.notes])
        return result
    if plan.errors:
        raise CleanRefused(errors.BROKEN_CARRY_OVER,
                           f"{base_path}: not cleaning, the table has broken carried-over logs: "
                           + "; ".join(plan.errors))
    if not plan.total_files:
        result.message = "; ".join(["nothing to clean; no clean instant written", *left_note, *plan.notes])
        return result
    ensure_held("writing a clean plan")
    result.instant = new_instant_time(after=max(i.timestamp for i in timeline.instants))
    requested = _plan_record(plan).to_bytes()
    create_requested(base_path, result.instant, CLEAN, requested)
    fault_point("clean", "requested")
    transition_to_inflight(base_path, result.instant, CLEAN, requested)   # 0.14 puts the plan here too
    fault_point("clean", "inflight")
    _execute(base_path, result.instant, plan.policy, plan.earliest_instant_to_retain, plan.last_completed_commit,
             plan.paths_by_partition(), set(), result, on_progress)
    result.message = "; ".join([f"clean {result.instant}: deleted {result.total_deleted} file(s)", *left_note,
                                *plan.notes])
    return result


def _result(plan: CleanPlan, instant: str | None, dry_run: bool, resumed: list[str]) -> CleanResult:
    """The result of cleaning by `plan` before any file is deleted (message set by the caller)."""
    earliest = plan.earliest_instant_to_retain
    return CleanResult(instant=instant, dry_run=dry_run, policy=plan.policy, retained=plan.retained,
                       earliest_instant_to_retain=earliest.timestamp if earliest else None,
                       files_to_delete=plan.files_to_delete, deleted={}, failed={},
                       kept_link_targets=plan.kept_link_targets, skipped_file_groups=plan.skipped_file_groups,
                       errors=plan.errors, resumed=resumed, message="")


def finish_pending_cleans(base_path: str) -> list[str]:
    """Complete every interrupted clean (caller holds the table lock); returns their instants."""
    return [_finish_pending(base_path, inst) for inst in _pending_cleans(Timeline.load(base_path))]


def _pending_cleans(timeline: Timeline) -> list[Instant]:
    return [i for i in timeline.pending() if i.action == CLEAN]


def _finish_pending(base_path: str, inst: Instant) -> str:
    """Complete an interrupted clean: delete what its plan lists, except files that became protected."""
    path = pending_file(base_path, inst.timestamp, CLEAN, State.REQUESTED)
    data = storage.read_bytes(path)
    record = CleanPlanRecord.from_bytes(data)
    if inst.state is State.REQUESTED:
        transition_to_inflight(base_path, inst.timestamp, CLEAN, data)
    files = _planned_paths(base_path, inst.timestamp, record)
    # Re-check against today's table: every link on disk that this plan does not remove is live.
    planned = {_key(path) for paths in files.values() for path in paths}
    timeline = Timeline.load(base_path)
    view = FileSystemView(base_path, timeline)
    protected = _protected_paths(view, timeline, lambda _key_, link: _key(link) in planned, _scan_links(view),
                                 _pending_service_guards(timeline, view), [])
    protected.update(_damaged_copy_originals(view, timeline, planned))
    earliest = record.earliest_instant_to_retain
    earliest_inst = Instant(earliest[0], earliest[1], State.COMPLETED) if earliest else None
    result = _result(CleanPlan(base_path, record.policy, 0, earliest_inst, record.last_completed_commit),
                     inst.timestamp, False, [])
    _execute(base_path, inst.timestamp, record.policy, earliest_inst, record.last_completed_commit, files,
             protected, result)
    return inst.timestamp


def _planned_paths(base_path: str, instant: str, record: CleanPlanRecord) -> dict[str, list[str]]:
    """Partition -> absolute paths of a cleaner plan: v2 full paths, or v1 (Java < 0.8) names per partition."""
    out: dict[str, list[str]] = {p: [_local_path(path, instant) for path in paths]
                                 for p, paths in record.file_paths.items()}
    for partition, names in record.file_names.items():
        out.setdefault(partition, []).extend(_join(base_path, partition, n) for n in names)
    return out


def _local_path(path: str, instant: str) -> str:
    """Java qualifies local paths as `file:/...`; anything on another file system is not ours to delete."""
    if path.startswith("file:"):
        return "/" + path[len("file:"):].lstrip("/")
    if "://" in path:
        raise CleanRefused(errors.FOREIGN_FILE_SYSTEM,
                           f"clean {instant} lists {path}, which is not on the local file system", instant)
    return path


def _execute(base_path: str, instant: str, policy: str, earliest: Instant | None, last_commit: str,
             files: dict[str, list[str]], protected: set[str], result: CleanResult,
             on_progress: Progress | None = None) -> None:
    started = time.monotonic()
    progress = Reporter(on_progress, sum(len(p) for p in files.values()), "files")
    done = 0
    for partition, path in _deletion_order(files):
        ok = _key(path) not in protected and _delete(path)
        bucket = result.deleted if ok else result.failed
        bucket.setdefault(partition, []).append(storage.name_of(path))
        done += 1
        progress.update(done)
        fault_point("clean", "deleting")
    progress.finish()
    fault_point("clean", "deleted")
    elapsed = int((time.monotonic() - started) * 1000)
    metadata = _metadata_record(instant, policy, earliest, last_commit, files, result, elapsed)
    complete(base_path, instant, CLEAN, avro_models.write_clean_metadata(metadata))
    fault_point("clean", "completed")


def _deletion_order(files: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Every symlink first, then the other files (each group in path order): a clean killed part-way then never
    leaves a link whose target it already deleted, so no kept or half-cleaned slice reads as lost data."""
    pairs = [(partition, path) for partition, paths in sorted(files.items()) for path in sorted(paths)]
    return [pair for pair in pairs if storage.is_link(pair[1])] + [pair for pair in pairs if not storage.is_link(pair[1])]


def _delete(path: str) -> bool:
    """Unlink one file (a symlink itself, never its target); already gone counts as done (resumed cleans)."""
    try:
        storage.remove(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


# -------------------------------------------------------------------------------------------- Avro records

def _plan_record(plan: CleanPlan) -> CleanPlanRecord:
    """The HoodieCleanerPlan of `plan` (v2: full file paths per partition)."""
    earliest = plan.earliest_instant_to_retain
    return CleanPlanRecord(policy=plan.policy, last_completed_commit=plan.last_completed_commit,
                           earliest_instant_to_retain=(earliest.timestamp, earliest.action) if earliest else None,
                           file_paths=plan.paths_by_partition(), retained=plan.retained)


def _metadata_record(instant: str, policy: str, earliest: Instant | None, last_commit: str,
                     files: dict[str, list[str]], result: CleanResult, elapsed_ms: int) -> dict[str, Any]:
    """HoodieCleanMetadata; file lists hold names, as Java's PartitionCleanStat does."""
    partitions = {
        p: {"partitionPath": p, "policy": policy,
            "deletePathPatterns": sorted(storage.name_of(x) for x in paths),
            "successDeleteFiles": result.deleted.get(p, []), "failedDeleteFiles": result.failed.get(p, []),
            "isPartitionDeleted": False}
        for p, paths in sorted(files.items())
    }
    return {
        "policy": policy, "startCleanTime": instant, "timeTakenInMillis": elapsed_ms,
        "totalFilesDeleted": result.total_deleted,
        "earliestCommitToRetain": earliest.timestamp if earliest else "",
        "lastCompletedCommitTimestamp": last_commit, "partitionMetadata": partitions,
        "bootstrapPartitionMetadata": {},
    }
