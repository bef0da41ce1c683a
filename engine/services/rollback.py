"""Rolling back one instant as a real rollback instant R, the way Java Hudi (table version 6) does.

Timeline: `R.rollback.requested` (Avro HoodieRollbackPlan: what will be deleted, which logs get a rollback
command block) -> `R.rollback.inflight` -> `R.rollback` (Avro HoodieRollbackMetadata: what was done). A
rollback interrupted after `requested` is finished from its plan (`resume_rollback`), so every step is
idempotent.

What may be rolled back, and what it undoes:
- a **deltacommit**, pending (a failed write) or completed: file groups the instant created (every file holds
  only its blocks) are deleted; in every other file group the logs holding its blocks stay on disk and a
  rollback COMMAND block (TARGET_INSTANT_TIME = the instant) is written as a new log version of that slice,
  token `1-0-1` — Java's v6 behaviour (docs/HUDI-FORMAT.md §6.3), which keeps the mask even when the instant is
  archived one day. Its instant files go last.
- an **overwrite** (replacecommit of insert_overwrite[_table]), pending or completed with no later write or
  compaction: the new file groups it created (every file in them is its own) are deleted, and once its
  completed file is gone the groups it replaced are visible again. A pending *clustering* is Java's table
  service and is refused.
- a **compaction**, pending or the latest completed one: the new base files, the exact-mode spill logs and
  the carried-over links or copies are deleted (link targets, the original logs, are never touched), the RO
  guarantee it published is replaced by the previous one, and its plan is removed (unlike Java, which
  re-executes it: the serial event-time trigger needs the slot). Readers see the previous slices.

Refused (RollbackRefused, reason ROLLBACK_DEPENDENCY) when a later instant depends on the one rolled
back: writes that landed in slice C of compaction C, a later compaction planned over the file groups, or
a clean that already deleted the previous slice a completed compaction would fall back to.
"""
from __future__ import annotations

import time
from typing import Any

from engine import logformat
from engine.config.properties import load_table_config, save_table_config
from engine.errors import NOT_ROLLBACKABLE, PENDING_WRITE, ROLLBACK_DEPENDENCY, UNKNOWN_INSTANT, RollbackRefused
from engine.io import storage
from engine.io.faults import fault_point
from engine.io.naming import CARRY_FORWARD_VERSION, LogFileName, new_instant_time, parse_base_file_name, parse_log_file_name
from engine.lock import TableLock, compaction_run_lock, ensure_held, holding, table_lock_of
from engine.progress import Progress, Reporter
from engine.results import RollbackResult
from engine.slices.fsview import FileSystemView
from engine.slices.groups import FileGroup, LogFile
from engine.timeline import avro_models, heartbeat
from engine.timeline.instants import (
    COMMIT,
    COMPACTION,
    DELTACOMMIT,
    LOGCOMPACTION,
    REPLACECOMMIT,
    ROLLBACK,
    Instant,
    State,
    Timeline,
    complete,
    completed_file,
    create_requested,
    delete_instant_files,
    pending_file,
    transition_to_inflight,
)
from engine.timeline.metadata import CompactionOperation, CompactionPlanRecord

ROLLBACK_WRITE_TOKEN = "1-0-1"   # HoodieLogFormat.UNKNOWN_WRITE_TOKEN, seen on Java's rollback logs
RO_KEYS = ("tidemark.ro.completion.time", "tidemark.ro.freshness.time", "tidemark.ro.threshold",
           "tidemark.ro.compaction.instant")


# ------------------------------------------------------------------------------------------ entry points

def rollback(base_path: str, instant: str, *, lock: TableLock | None = None,
             on_progress: Progress | None = None) -> RollbackResult:
    """Roll back `instant` under the table lock (and, for a compaction, the compaction lock: a run of
    the same plan must not be writing files we delete; we do not wait for one)."""
    with holding(table_lock_of(base_path, lock), f"roll back {instant}"):
        target = _target(Timeline.load(base_path), instant)
        # LAZY failed-writes policy, as write and schedule apply it: a dead writer's pending write (say, logs
        # it left in slice C of the compaction being rolled back) must not block this rollback.
        expired = [r.instant for r in rollback_expired_writes(base_path, keep=instant)]
        if target.action in (COMPACTION, COMMIT):
            with compaction_run_lock(base_path, f"roll back compaction {instant}"):
                result = rollback_locked(base_path, instant, on_progress=on_progress)
        else:
            result = rollback_locked(base_path, instant, on_progress=on_progress)
        result.expired_writes = expired
        return result


def rollback_locked(base_path: str, instant: str, *, allow_live: bool = False,
                    on_progress: Progress | None = None) -> RollbackResult:
    """Plan and execute the rollback of `instant`; the caller holds the table lock.

    `allow_live`: the caller is the writer of `instant` itself (its heartbeat is still beating).
    """
    timeline = Timeline.load(base_path)
    for r, plan in pending_rollbacks(timeline):
        if plan["instantToRollback"]["commitTime"] == instant:
            return _execute(base_path, r, plan, on_progress)   # one instant, one rollback (Java reuses it)
    target = _target(timeline, instant)
    if target.action == DELTACOMMIT:
        plan = _plan_deltacommit(base_path, timeline, target, allow_live)
    elif target.action == REPLACECOMMIT:
        plan = _plan_replacecommit(base_path, timeline, target, allow_live)
    else:
        plan = _plan_compaction(base_path, timeline, target)
    r = new_instant_time(after=max(i.timestamp for i in timeline.instants))
    ensure_held(f"writing rollback plan {r}")
    create_requested(base_path, r, ROLLBACK, avro_models.write_rollback_plan(plan))
    fault_point("rollback", "requested")
    return _execute(base_path, r, plan, on_progress)


def resume_rollback(base_path: str, r: str) -> RollbackResult:
    """Finish pending rollback `r` from its plan (caller holds the table lock)."""
    return _execute(base_path, r, _read_plan(base_path, r), None)


def _read_plan(base_path: str, r: str) -> dict[str, Any]:
    path = pending_file(base_path, r, ROLLBACK, State.REQUESTED)
    return avro_models.read_rollback_plan(storage.read_bytes(path))


def pending_rollbacks(timeline: Timeline) -> list[tuple[str, dict[str, Any]]]:
    return [(i.timestamp, _read_plan(timeline.base_path, i.timestamp)) for i in timeline.pending()
            if i.action == ROLLBACK]


def rollback_expired_writes(base_path: str, keep: str | None = None,
                            timeline: Timeline | None = None) -> list[RollbackResult]:
    """The LAZY failed-writes policy: roll back pending deltacommits whose heartbeat expired (caller holds
    the table lock), except `keep` (the caller rolls that one back itself). Live writers are left alone.
    `timeline`: the caller's, loaded under the same lock (else loaded here)."""
    expiry = heartbeat.expiry_ms(load_table_config(base_path))
    out = []
    timeline = timeline or Timeline.load(base_path)
    writes = [i for i in timeline.pending() if i.action == DELTACOMMIT] + timeline.pending_overwrites()
    for inst in sorted(writes):
        if inst.timestamp != keep and heartbeat.is_expired(base_path, inst.timestamp, expiry):
            out.append(rollback_locked(base_path, inst.timestamp))
    return out


# ------------------------------------------------------------------------------------------ planning

def _target(timeline: Timeline, instant: str) -> Instant:
    found = [i for i in timeline.get(instant) if i.action in (DELTACOMMIT, COMPACTION, COMMIT, REPLACECOMMIT)]
    if not found:
        other = timeline.get(instant)
        if not other:
            raise RollbackRefused(UNKNOWN_INSTANT, f"{instant} is not on the timeline (never written, or already "
                                  "rolled back or archived)")
        raise RollbackRefused(NOT_ROLLBACKABLE, f"{instant} is a {other[0].action}; only deltacommits and "
                              "compactions can be rolled back")
    inst = found[0]
    if inst.action == COMMIT and not _is_compaction_commit(timeline, inst):
        raise RollbackRefused(NOT_ROLLBACKABLE, f"{instant} is a copy-on-write commit; only deltacommits and "
                              "compactions can be rolled back")
    if inst.action == REPLACECOMMIT and not inst.is_completed and timeline.requested_replace(instant).is_clustering:
        raise RollbackRefused(NOT_ROLLBACKABLE, f"{instant} is a pending clustering, a table service of Java Hudi; "
                              "let Java finish it or roll it back")
    return inst


def _is_compaction_commit(timeline: Timeline, inst: Instant) -> bool:
    return storage.exists(timeline.path_of(inst.timestamp, COMPACTION, State.REQUESTED))


def _later_compactions(timeline: Timeline, instant: str) -> list[Instant]:
    return [i for i in timeline.instants if i.timestamp > instant
            and (i.action == COMPACTION or (i.action == COMMIT and _is_compaction_commit(timeline, i)))]


def _refuse_live_write(base_path: str, target: Instant, allow_live: bool) -> None:
    """A pending write whose heartbeat is live belongs to a running writer: never rolled back under it."""
    if target.is_completed or allow_live:
        return
    expiry = heartbeat.expiry_ms(load_table_config(base_path))
    if not heartbeat.is_expired(base_path, target.timestamp, expiry):
        raise RollbackRefused(PENDING_WRITE, f"{target.action} {target.timestamp} is still being written (its "
                              "heartbeat is live); it can be rolled back once its writer finishes or its heartbeat "
                              "expires", target.timestamp)


def _plan_deltacommit(base_path: str, timeline: Timeline, target: Instant, allow_live: bool) -> dict[str, Any]:
    i = target.timestamp
    _refuse_live_write(base_path, target, allow_live)
    view = FileSystemView(base_path, timeline)
    bases_of_i = _base_files_named(view, i)   # uncommitted bases are not in the view: list them
    # Instants still on the active timeline, and every archived one (older than it): all not rolled back.
    on_timeline = {inst.timestamp for inst in timeline.instants}
    oldest = min(on_timeline, default="")
    live = _LiveInstants(on_timeline, oldest)
    # Replaced groups too: were the replacecommit rolled back one day, i's blocks there must stay masked.
    requests = [request for group in view.all_file_groups()
                if (request := _deltacommit_request(group, i, bases_of_i, live,
                                                    timeline.uses_completion_time)) is not None]
    touched = {(r["partitionPath"], r["fileId"]) for r in requests}
    if target.is_completed:   # its logs may be gone already (compacted, then cleaned): its stats still say where
        touched |= {stat.key for stat in timeline.commit_metadata(target).write_stats}
    for later in _later_compactions(timeline, i):
        planned = {op.key for op in timeline.compaction_plan(later.timestamp).operations}
        if planned & touched:
            raise RollbackRefused(ROLLBACK_DEPENDENCY, f"cannot roll back deltacommit {i}: compaction "
                                  f"{later.timestamp} was planned over its file groups after it (roll that "
                                  "compaction back first)", later.timestamp)
    return {"instantToRollback": {"commitTime": i, "action": DELTACOMMIT}, "RollbackRequests": requests}


def _own_log(lf: LogFile, i: str, blocks_by_log: dict[str, Any]) -> bool:
    """A log written by `i` alone (v8 naming): named by `i`, not a carried link, every block `i`'s."""
    blocks = blocks_by_log.get(lf.path)
    return lf.base_instant == i and blocks is not None and all(b.instant_time == i for b in blocks)


class _LiveInstants:
    """`x in live`: x is on the active timeline or older than it (archived), so not rolled back."""

    def __init__(self, on_timeline: set[str], oldest: str) -> None:
        self.on_timeline, self.oldest = on_timeline, oldest

    def __contains__(self, instant: object) -> bool:
        return isinstance(instant, str) and (instant in self.on_timeline or instant < self.oldest)


def _deltacommit_request(group: FileGroup, i: str, bases_of_i: dict[tuple[str, str], list[str]],
                         live: _LiveInstants, logs_named_by_instant: bool = False) -> dict[str, Any] | None:
    """What rolling back `i` does to one file group: delete it if `i` created it, else mask `i`'s blocks.

    `i` created a log-only group when every other block in it is dead: blocks of instants rolled back
    before (no longer on the timeline) and the rollback command blocks masking them. Masking `i` instead
    would leave a slice whose base instant `i` is gone — invisible to every reader, with the next write
    appended to it (and lost) too."""
    bases = bases_of_i.get((group.partition_path, group.file_id), [])
    logs = [lf for s in group.slices for lf in s.log_files]
    scans = {lf.path: (None if storage.is_link(lf.path)   # a carry-over belongs to a compaction
                       else logformat.scan_log_file(lf.path)) for lf in logs}
    # A log with a damaged region is never counted dead: its records may belong to a committed write.
    blocks_by_log = {p: (None if scan is None or scan.corrupt else scan.blocks) for p, scan in scans.items()}
    instants_by_log = {p: ({None} if scan is None else {b.instant_time for b in scan.blocks})
                       for p, scan in scans.items()}
    logs_of_i = [lf for lf in logs if i in instants_by_log[lf.path]]
    if not logs_of_i and not bases:
        return None

    def only_i_or_dead(blocks: list[logformat.BlockInfo] | None) -> bool:
        return blocks is not None and all(
            b.instant_time == i or (b.block_type is not logformat.BlockType.COMMAND and b.instant_time not in live)
            or (b.block_type is logformat.BlockType.COMMAND and b.target_instant_time not in live)
            for b in blocks)

    created = (not any(s.base_file for s in group.slices)
               and all(only_i_or_dead(blocks_by_log[lf.path]) for lf in logs))
    if logs_named_by_instant and not created and logs_of_i and all(_own_log(lf, i, blocks_by_log) for lf in logs_of_i):
        # Table version 8 (as Java 1.x rolls back): i's logs are named by i and hold only i's blocks, so they are
        # deleted; no command block is written.
        return {"partitionPath": group.partition_path, "fileId": group.file_id,
                "latestBaseInstant": group.latest.base_instant,
                "filesToBeDeleted": sorted(bases + [lf.path for lf in logs_of_i]), "logBlocksToBeDeleted": None}
    return {"partitionPath": group.partition_path, "fileId": group.file_id,
            "latestBaseInstant": logs_of_i[-1].base_instant if logs_of_i else group.latest.base_instant,
            "filesToBeDeleted": sorted(bases + ([lf.path for lf in logs] if created else [])),
            "logBlocksToBeDeleted": None if created or not logs_of_i else {lf.path: lf.size for lf in logs_of_i}}


def _plan_replacecommit(base_path: str, timeline: Timeline, target: Instant, allow_live: bool) -> dict[str, Any]:
    """Delete the file groups overwrite `i` created; refuse when a later write or compaction may build on it."""
    i = target.timestamp
    _refuse_live_write(base_path, target, allow_live)
    later = [x for x in timeline.instants if x.timestamp > i
             and x.action in (DELTACOMMIT, COMMIT, COMPACTION, LOGCOMPACTION, REPLACECOMMIT)]
    if target.is_completed and later:
        # A later write may have put a bucket's records into a new group beside a replaced one: bringing the
        # replaced group back would show both.
        raise RollbackRefused(ROLLBACK_DEPENDENCY, f"cannot roll back replacecommit {i}: {later[0].action} "
                              f"{later[0].timestamp} came after it (roll that back first)", later[0].timestamp)
    view = FileSystemView(base_path, timeline)
    if target.is_completed:
        _refuse_cleaned_replaced_groups(view, timeline, target)
    created = _base_files_named(view, i)
    requests = []
    for (partition, file_id), bases in sorted(created.items()):
        pdir = view.partition_dir(partition)
        logs = [storage.join(pdir, n) for n in storage.list_names(pdir)
                if (log := parse_log_file_name(n)) is not None and log.file_id == file_id and log.base_instant == i]
        requests.append({"partitionPath": partition, "fileId": file_id, "latestBaseInstant": i,
                         "filesToBeDeleted": sorted(bases + logs), "logBlocksToBeDeleted": None})
    return {"instantToRollback": {"commitTime": i, "action": REPLACECOMMIT}, "RollbackRequests": requests}


def _refuse_cleaned_replaced_groups(view: FileSystemView, timeline: Timeline, target: Instant) -> None:
    """Rolling an overwrite back brings the groups it replaced back; a clean may have deleted them already
    (KEEP_LATEST_FILE_VERSIONS does at once), and then the rollback would leave those partitions empty."""
    on_disk = {(g.partition_path, g.file_id) for g in view.all_file_groups() if g.slices}
    gone = sorted(timeline.commit_metadata(target).replaced_file_groups - on_disk)
    if gone:
        partition, file_id = gone[0]
        raise RollbackRefused(ROLLBACK_DEPENDENCY, f"cannot roll back replacecommit {target.timestamp}: a clean "
                              f"already deleted {len(gone)} file group(s) it replaced (e.g. {partition or '(root)'}"
                              f"/{file_id}); rolling it back would lose their records", target.timestamp)


def _base_files_named(view: FileSystemView, instant: str) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for partition in view.partitions():
        directory = view.partition_dir(partition)
        for name in storage.list_names(directory):
            parsed = parse_base_file_name(name)
            if parsed is not None and parsed.instant == instant:
                out.setdefault((partition, parsed.file_id), []).append(storage.join(directory, name))
    return out


def _plan_compaction(base_path: str, timeline: Timeline, target: Instant) -> dict[str, Any]:
    c = target.timestamp
    plan = timeline.compaction_plan(c)
    later = _later_compactions(timeline, c)
    if later:
        raise RollbackRefused(ROLLBACK_DEPENDENCY, f"cannot roll back compaction {c}: compaction "
                              f"{later[0].timestamp} came after it (roll that one back first)", later[0].timestamp)
    dead = _refuse_new_writes(timeline, c, plan)
    if target.is_completed:
        _refuse_missing_previous_slices(base_path, c, plan)
    requests = []
    for op in plan.operations:
        own_dead = [p for p in dead if storage.name_of(p).startswith(f".{op.file_id}_{c}.log.")]
        requests.append({"partitionPath": op.partition_path, "fileId": op.file_id,
                         "latestBaseInstant": op.base_instant or None,
                         "filesToBeDeleted": sorted(compaction_outputs(base_path, c, op) + own_dead),
                         "logBlocksToBeDeleted": None})
    action = COMMIT if target.is_completed else COMPACTION
    return {"instantToRollback": {"commitTime": c, "action": action}, "RollbackRequests": requests}


def _pdir(base_path: str, partition: str) -> str:
    return storage.join(base_path, partition) if partition else base_path


def compaction_outputs(base_path: str, c: str, op: CompactionOperation) -> list[str]:
    """Files compaction `c` made for one operation: new bases, the carry-forward log (in every mode: the spill
    log of an exact plan too), its links or copies."""
    pdir = _pdir(base_path, op.partition_path)
    if not storage.is_dir(pdir):
        return []
    fid = op.file_id
    out = []
    for name in storage.list_names(pdir):
        base, log = parse_base_file_name(name), parse_log_file_name(name)
        if base is not None and base.file_id == fid and base.instant == c:
            out.append(storage.join(pdir, name))
        elif (log is not None and log.file_id == fid and log.base_instant == c
              and log.version == CARRY_FORWARD_VERSION):  # the carry-forward log, in every mode
            out.append(storage.join(pdir, name))
    out += [storage.join(pdir, s.symlink) for s in op.carried if storage.lexists(storage.join(pdir, s.symlink))]
    return out


def _refuse_new_writes(timeline: Timeline, c: str, plan: CompactionPlanRecord) -> list[str]:
    """Logs written into slice C (not its carry-overs or spill) would be orphaned with their slice: refuse
    when one holds a committed or still-pending write; return the dead ones (only blocks of rolled-back
    instants, and rollback command blocks) for deletion."""
    strays: list[str] = []
    writers: set[str] = set()
    dead: list[str] = []
    live = {i.timestamp for i in timeline.instants if i.action in (DELTACOMMIT, COMMIT, REPLACECOMMIT)}
    for op in plan.operations:
        pdir = _pdir(timeline.base_path, op.partition_path)
        planned = {s.symlink for s in op.carried}
        if not storage.is_dir(pdir):
            continue
        for name in storage.list_names(pdir):
            log = parse_log_file_name(name)
            if log is None or log.file_id != op.file_id or name in planned:
                continue
            if log.base_instant != c:
                if not _in_slice_by_completion(timeline, log.base_instant, c, live):
                    continue
            elif log.version == CARRY_FORWARD_VERSION:
                continue
            path = storage.join(pdir, name)
            blocks = logformat.scan_log_file(path).blocks
            holders = {b.instant_time for b in blocks
                       if b.block_type is not logformat.BlockType.COMMAND and b.instant_time} & live
            if holders or not blocks:
                strays.append(path)
                writers.update(holders)
            else:
                dead.append(path)
    if strays:
        blocking = min(writers) if writers else None
        raise RollbackRefused(
            ROLLBACK_DEPENDENCY,
            f"cannot roll back compaction {c}: {len(strays)} log file(s) were written into its slice after it was "
            f"planned ({', '.join(sorted(strays))}); they would be orphaned. "
            + ("Roll those writes back first (newest first)" if timeline.is_completed(c)
               else "Run the compaction to completion instead (or roll those writes back first)"), blocking)
    return dead


def _in_slice_by_completion(timeline: Timeline, instant: str, c: str, live: set[str]) -> bool:
    """Table version 8: a log named by write `instant` sits in slice C when that write completed after C was
    requested (or is still pending): its name says nothing about the slice. While C is pending nothing sits in
    a slice C for good: with C's plan gone such a log falls, by its completion time, into the previous slice
    (every reader already reads it there while C is pending), so rolling back a pending C orphans nothing."""
    if not timeline.uses_completion_time or instant not in live or not timeline.is_completed(c):
        return False
    done = timeline.completion_time(instant)
    return done is None or done > c


def _refuse_missing_previous_slices(base_path: str, c: str, plan: CompactionPlanRecord) -> None:
    """A completed compaction falls back to the slices it compacted; a clean may have deleted them."""
    missing = []
    for op in plan.operations:
        pdir = _pdir(base_path, op.partition_path)
        names = [op.data_file, *op.delta_files, *(s.target for s in op.carried)]
        missing += [storage.join(pdir, n) for n in names if n and not storage.exists(storage.join(pdir, n))]
    if missing:
        raise RollbackRefused(ROLLBACK_DEPENDENCY, f"cannot roll back compaction {c}: the slices it replaced were "
                              f"cleaned ({', '.join(sorted(missing))} no longer exist)")


# ------------------------------------------------------------------------------------------ execution

def _execute(base_path: str, r: str, plan: dict[str, Any], on_progress: Progress | None) -> RollbackResult:
    target = plan["instantToRollback"]
    instant, action = target["commitTime"], target["action"]
    if not storage.exists(pending_file(base_path, r, ROLLBACK, State.INFLIGHT)):
        transition_to_inflight(base_path, r, ROLLBACK)
    fault_point("rollback", "inflight")
    started = time.monotonic()
    ensure_held(f"rolling back {instant}")
    family = action if action in (DELTACOMMIT, REPLACECOMMIT) else COMPACTION
    result = RollbackResult(instant=instant, deleted_files=[], removed_instant_files=[], action=family,
                            rollback_instant=r, was_completed=action == COMMIT)
    # Unpublish first: once the completed file is gone every reader ignores the instant's output.
    result.was_completed |= _unpublish(base_path, instant, family)
    if family == COMPACTION:
        result.restored_ro = _restore_ro_guarantee(base_path, instant)
    fault_point("rollback", "unpublished")
    requests = plan.get("RollbackRequests") or []
    per_partition: dict[str, dict[str, Any]] = {}
    progress = Reporter(on_progress, len(requests), "file groups")
    for done, request in enumerate(requests, 1):
        meta = per_partition.setdefault(request["partitionPath"], _partition_metadata(request["partitionPath"]))
        _delete_files(request, meta, result)
        if request.get("logBlocksToBeDeleted"):
            _mask_blocks(base_path, r, instant, request, meta, result)
        progress.update(done)
    progress.finish()
    fault_point("rollback", "files_removed")
    storage.remove_tree(storage.join(base_path, ".hoodie", ".temp", instant))
    result.removed_instant_files = delete_instant_files(base_path, instant, family)
    heartbeat.delete_heartbeat(base_path, instant)
    fault_point("rollback", "instant_removed")
    metadata = {"startRollbackTime": r, "timeTakenInMillis": int((time.monotonic() - started) * 1000),
                "totalFilesDeleted": len(result.deleted_files), "commitsRollback": [instant],
                "partitionMetadata": per_partition, "instantsRollback": [{"commitTime": instant, "action": action}]}
    ensure_held(f"completing rollback {r}")
    complete(base_path, r, ROLLBACK, avro_models.write_rollback_metadata(metadata))
    storage.remove_tree(storage.join(base_path, ".hoodie", ".temp", r))
    fault_point("rollback", "completed")
    return result


def _unpublish(base_path: str, instant: str, family: str) -> bool:
    """Delete the completed file of `instant` (it becomes pending again); True if there was one."""
    path = completed_file(base_path, instant, family)
    if path is None:
        return False
    try:
        storage.remove(path)
    except FileNotFoundError:
        return False
    return True


def _partition_metadata(partition: str) -> dict[str, Any]:
    return {"partitionPath": partition, "successDeleteFiles": [], "failedDeleteFiles": [],
            "rollbackLogFiles": {}, "logFilesFromFailedCommit": {}}


def _delete_files(request: dict[str, Any], meta: dict[str, Any], result: RollbackResult) -> None:
    for path in request.get("filesToBeDeleted") or []:
        try:
            storage.remove(path)   # a carried-over link is removed, never its target
        except FileNotFoundError:
            pass              # already done by an interrupted run of this rollback
        except OSError:
            meta["failedDeleteFiles"].append(path)
            continue
        meta["successDeleteFiles"].append(path)
        result.deleted_files.append(path)


def _mask_blocks(base_path: str, r: str, instant: str, request: dict[str, Any], meta: dict[str, Any], result: RollbackResult) -> None:
    """Write one rollback command block for `instant` as a new log version of the slice (once)."""
    pdir = _pdir(base_path, request["partitionPath"])
    fid, slice_instant = request["fileId"], request["latestBaseInstant"]
    meta["logFilesFromFailedCommit"].update(request["logBlocksToBeDeleted"])
    versions = []
    for name in storage.list_names(pdir):
        log = parse_log_file_name(name)
        if log is None or log.file_id != fid or log.base_instant != slice_instant:
            continue
        path = storage.join(pdir, name)
        if log.write_token == ROLLBACK_WRITE_TOKEN and _masks(path, instant):
            meta["rollbackLogFiles"][path] = storage.size(path)
            result.rollback_log_files.append(path)
            return   # written by an interrupted run of this rollback
        versions.append(log.version)
    name = LogFileName(fid, slice_instant, max(versions, default=0) + 1, ROLLBACK_WRITE_TOKEN).name
    temp_dir = storage.join(base_path, ".hoodie", ".temp", r)
    path = storage.join(pdir, name)
    block = logformat.encode_rollback_block(r, instant)
    storage.publish_new(path, block, temp_dir)   # whole or absent: never a half-written log in the partition
    size = len(block)
    meta["rollbackLogFiles"][path] = size
    result.rollback_log_files.append(path)


def _masks(path: str, instant: str) -> bool:
    return any(b.target_instant_time == instant for b in logformat.scan_log_file(path).blocks)


def _restore_ro_guarantee(base_path: str, c: str) -> dict[str, str] | None:
    """If `c` published the table's RO guarantee, put back the previous event-time compaction's (or none)."""
    cfg = load_table_config(base_path)
    if cfg.props.get("tidemark.ro.compaction.instant") != c:
        return None
    previous = guarantee_before(Timeline.load(base_path), c)
    for key in RO_KEYS:
        cfg.props.pop(key, None)
    cfg.props.update(previous)
    save_table_config(cfg)
    return previous


def guarantee_before(timeline: Timeline, c: str | None) -> dict[str, str]:
    """The RO guarantee (hoodie.properties keys) of the latest completed event-time compaction before `c`
    (any, when `c` is None); {} when there is none."""
    for inst in reversed(timeline.completed()):
        if (c is not None and inst.timestamp >= c) or inst.action != COMMIT or not _is_compaction_commit(timeline, inst):
            continue
        meta = timeline.commit_metadata(inst)
        if not meta.settings.promises_threshold:   # only an event-time compaction published a guarantee
            continue
        return {"tidemark.ro.completion.time": _ms_text(meta.ro_completion_ms),
                "tidemark.ro.freshness.time": _ms_text(meta.ro_freshness_ms),
                "tidemark.ro.threshold": _ms_text(meta.settings.threshold_ms),
                "tidemark.ro.compaction.instant": inst.timestamp}
    return {}


def _ms_text(ms: int | None) -> str:
    return "" if ms is None else str(ms)
