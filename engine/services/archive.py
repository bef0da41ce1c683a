"""Archival of the active timeline, as Java's HoodieTimelineArchiver does it, so a table's timeline stays a few
dozen instants however long the table lives.

Which instants (Hudi's keys and defaults): once more than `hoodie.keep.max.commits` (30) completed commits,
deltacommits and replacecommits are active, the oldest go until `hoodie.keep.min.commits` (20) remain — never
one at or after
- the last commit before the earliest pending instant of any action (so the active timeline still starts before
  it: hudi-rs takes every instant below the first active commit as committed, a pending compaction included),
- the earliest commit the latest clean retained (`earliestCommitToRetain`: slices of those commits are on disk),
- a savepoint,
- the latest completed compaction (its plan and commit carry the RO guarantee and the carried-over logs' records
  that freshness and clean read, and the deltacommits after it tell freshness which late data arrived; Java
  likewise keeps a Merge-On-Read table's latest compaction and the deltacommits since, for its compaction
  trigger). So the active timeline holds keep.max commits or the commits since the latest compaction, whichever
  is more: bounded by how often the table compacts, not by its age.
Completed cleans and rollbacks are archived by the same counts, each action on its own, only below the first
commit kept. Every state file of an archived instant goes.

Where they go: layout 1 (table version 6) appends HoodieArchivedMetaEntry records to `.hoodie/archived/`
(engine.timeline.archive_log); layout 2 (versions 8, 9) adds a file to the LSM history
(engine.timeline.lsm_history). The archive is written and published first; only then are the instants' files
deleted, oldest instant first, its requested and inflight files before its completed one, so a crash never leaves
a completed instant looking pending. An archival killed after writing the archive leaves instants both archived
and active: readers let the active timeline win, and the next archival archives them again (a duplicate entry is
collapsed when read).
"""
from __future__ import annotations

import bisect

from engine.config.properties import TableConfig, load_table_config
from engine.errors import ConfigError
from engine.io import storage
from engine.io.faults import fault_point
from engine.lock import TableLock, ensure_held, holding, table_lock_of
from engine.results import ArchiveResult
from engine.services import orphans
from engine.slices.fsview import FileSystemView
from engine.timeline import archive_log, lsm_history
from engine.timeline.compactions import compaction_records
from engine.timeline.instants import (
    CLEAN,
    COMMIT_ACTIONS,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    State,
    Timeline,
    TimelineError,
)

MIN_KEY = "hoodie.keep.min.commits"
MAX_KEY = "hoodie.keep.max.commits"
BATCH_KEY = "hoodie.commits.archival.batch"
RETAINED_KEY = "hoodie.cleaner.commits.retained"


def run_archive(base_path: str, *, lock: TableLock | None = None) -> ArchiveResult:
    """Archive what the rules allow (nothing when the active timeline is within bounds)."""
    cfg = load_table_config(base_path)
    keep_min, keep_max = bounds(cfg)
    with holding(table_lock_of(base_path, lock), "archive"):
        timeline = Timeline.load(base_path)
        chosen = instants_to_archive(timeline, keep_min, keep_max)
        if not chosen:
            return ArchiveResult(archived=[], files_written=[], files_deleted=0,
                                 message=f"nothing to archive ({len(timeline.instants)} active instants)")
        if any(i.action == ROLLBACK for i in chosen):
            # The last moment a rolled-back write's leftovers are known as such: archived, its instant would read
            # as committed (engine.services.orphans).
            orphans.remove_orphans(base_path, timeline)
        files = _state_files(timeline, chosen)
        ensure_held("archiving instants")
        written = _write_archive(timeline, cfg, chosen, files)
        fault_point("archive", "written")
        deleted = _delete_instants(timeline, chosen, files)
    return ArchiveResult(archived=[i.timestamp for i in chosen], files_written=written, files_deleted=deleted,
                         message=f"archived {len(chosen)} instant(s), {chosen[0].timestamp} .. {chosen[-1].timestamp}")


def bounds(cfg: TableConfig) -> tuple[int, int]:
    """keep.min / keep.max, refused as Java's HoodieWriteConfig refuses them."""
    keep_min, keep_max, retained = cfg.int_setting(MIN_KEY), cfg.int_setting(MAX_KEY), cfg.int_setting(RETAINED_KEY)
    if keep_min >= keep_max:
        raise ConfigError(f"{MIN_KEY} ({keep_min}) must be below {MAX_KEY} ({keep_max})")
    if keep_min <= retained:
        raise ConfigError(f"{MIN_KEY} ({keep_min}) must be above {RETAINED_KEY} ({retained}): archiving commits "
                          "the cleaner retains would lose the slices it keeps for them")
    return keep_min, keep_max


def instants_to_archive(timeline: Timeline, keep_min: int, keep_max: int) -> list[Instant]:
    completed = timeline.completed()
    commits = [i for i in completed if i.action in COMMIT_ACTIONS]
    chosen: list[Instant] = []
    if len(commits) > keep_max:
        limit = _commit_limit(timeline, commits)
        chosen = [c for c in commits[:len(commits) - keep_min] if limit is None or c.timestamp < limit]
        if chosen and timeline.uses_completion_time:
            chosen = _placeable_by_hudi(timeline, commits, chosen)
    kept = [c for c in commits if c not in chosen]
    first_kept = kept[0].timestamp if kept else None
    for action in (CLEAN, ROLLBACK):
        done = [i for i in completed if i.action == action]
        if len(done) > keep_max:
            chosen += [i for i in done[:len(done) - keep_min] if first_kept is None or i.timestamp < first_kept]
    return sorted(chosen)


def _commit_limit(timeline: Timeline, commits: list[Instant]) -> str | None:
    """Commits at or after this instant stay active."""
    limits: list[str] = []
    pending = timeline.pending()
    if pending:
        earliest = min(i.timestamp for i in pending)
        before = [c.timestamp for c in commits if c.timestamp < earliest]
        limits.append(before[-1] if before else earliest)
    clean = timeline.last_completed(frozenset({CLEAN}))
    if clean is not None:
        try:
            retain = timeline.clean_record(clean.timestamp).earliest_commit_to_retain
        except TimelineError:
            retain = clean.timestamp   # unreadable: keep everything from the clean on
        if retain:
            limits.append(retain)
    limits += [i.timestamp for i in timeline.instants if i.action == SAVEPOINT]
    done = [r for r in compaction_records(timeline) if r.instant.is_completed]
    if done:
        limits.append(done[-1].timestamp)
    return min(limits, default=None)


def _placeable_by_hudi(timeline: Timeline, commits: list[Instant], chosen: list[Instant]) -> list[Instant]:
    """Layout 2: stop before the earliest deltacommit whose log hudi 0.5.0 would place in another slice once
    archived. hudi 0.5.0 reads no LSM history: an archived deltacommit's log has no completion time there and joins
    the slice with the greatest base instant <= its *requested* time (a log-only group then splits and a snapshot
    loses its records). Where that is not the slice its completion time picks, the deltacommit stays active. Only
    asked when something would be archived, so the view is built once a compaction cycle, not every commit."""
    from engine.slices.fsview import FileSystemView  # the view sits above the timeline: imported where needed

    view = FileSystemView(timeline.base_path, timeline)
    while chosen:
        start = commits[len(chosen)].timestamp   # where the active timeline would start
        split = _misplaced_by_hudi(timeline, view, start)
        if split is None:
            return chosen
        chosen = [c for c in chosen if c.timestamp < split]
    return chosen


def _misplaced_by_hudi(timeline: Timeline, view: FileSystemView, start: str) -> str | None:
    """The earliest deltacommit before `start` whose log in a slice still read from `start` on would move slice
    if placed by its requested time; None when there is none."""
    first: str | None = None
    for group in view.all_file_groups():
        bases = sorted(s.base_instant for s in group.slices if s.base_file is not None)
        keys = sorted(s.base_instant for s in group.slices)
        cut = keys[max(bisect.bisect_right(keys, start) - 1, 0)] if keys else ""   # the slice as of `start`
        for sl in group.slices:
            if sl.base_instant < cut:
                continue   # superseded before `start`: no instant that stays active reads it
            for lf in sl.log_files:
                if lf.base_instant >= start or (first is not None and lf.base_instant >= first):
                    continue
                done = timeline.completion_time(lf.base_instant)
                if done is None:
                    continue
                by_request = bisect.bisect_right(bases, lf.base_instant)
                if by_request == 0 or by_request != bisect.bisect_right(bases, done):
                    first = lf.base_instant
    return first


def _state_files(timeline: Timeline, chosen: list[Instant]) -> dict[str, list[str]]:
    """Each archived instant's files on the active timeline, in deletion order (completed last)."""
    wanted = {i.timestamp for i in chosen}
    out: dict[str, list[str]] = {ts: [] for ts in wanted}
    for name in storage.list_names_validated(timeline.timeline_path):
        ts = name.split(".", 1)[0].split("_", 1)[0]
        if ts in wanted and "." in name:
            out[ts].append(name)
    for names in out.values():
        names.sort(key=_deletion_rank)
    return out


def _deletion_rank(name: str) -> int:
    return 0 if name.endswith(".requested") else 1 if name.endswith(".inflight") else 2


def _write_archive(timeline: Timeline, cfg: TableConfig, chosen: list[Instant],
                   files: dict[str, list[str]]) -> list[str]:
    if timeline.uses_completion_time:
        assert timeline.history_folder is not None
        return lsm_history.append(timeline.history_folder, [_lsm_instant(timeline, i, files[i.timestamp])
                                                            for i in chosen])
    records = [r for i in chosen for r in archive_log.entries_for(timeline, i, files[i.timestamp])]
    return [archive_log.append_entries(timeline.archive_folder, records, cfg.int_setting(BATCH_KEY))]


def _lsm_instant(timeline: Timeline, inst: Instant, names: list[str]) -> lsm_history.LsmInstant:
    """Java's MetadataConversionUtils.createLSMTimelineInstant: the completed file's bytes as metadata, the
    requested file's as plan."""
    def content(pick: str) -> bytes | None:
        for name in names:
            if (pick == "plan") == name.endswith(".requested") and not name.endswith(".inflight"):
                return storage.read_optional(storage.join(timeline.timeline_path, name))
        return None

    return lsm_history.LsmInstant(inst.timestamp, inst.completion_time, inst.action, content("metadata"),
                                  content("plan"))


def _delete_instants(timeline: Timeline, chosen: list[Instant], files: dict[str, list[str]]) -> int:
    deleted = 0
    for inst in chosen:
        for name in files[inst.timestamp]:
            if storage.remove_if_exists(storage.join(timeline.timeline_path, name)):
                deleted += 1
            fault_point("archive", "deleting")
    return deleted



def archived_instants(timeline: Timeline) -> list[Instant]:
    """The instants in the table's archive and no longer active, oldest first (completed, by definition)."""
    active = {i.timestamp for i in timeline.instants}
    if timeline.uses_completion_time:
        found = lsm_history.instants(timeline.history_folder) if timeline.history_folder else []
    else:
        found = [Instant(e.timestamp, e.action, State.COMPLETED)
                 for e in archive_log.archived_instants(timeline.archive_folder)]
    unique = {(i.timestamp, i.action): i for i in found if i.timestamp not in active}
    return sorted(unique.values())
