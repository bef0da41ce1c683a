"""Recovering from failures of writers: failed task attempts and writes that died without cleaning up.

- A Spark task may run more than once (retry, speculation). Every attempt writes the same file groups and
  log versions (file ids of new groups are derived from instant, partition and bucket) under its own
  write token; before the deltacommit (or an overwrite's replacecommit) completes, the logs and base files
  of attempts whose stats were not committed are deleted (Hudi's marker reconciliation, from the stats).
- A writer killed between `requested` and `completed` leaves a pending deltacommit that would block the
  serial compaction trigger. Its heartbeat stops; once expired, the next writer, scheduler, cleaner or
  `recover` rolls it back (Hudi's LAZY failed-writes policy, engine.services.rollback).
- `recover` finishes or undoes whatever any crashed operation left behind (see its docstring).
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from engine.config.properties import load_table_config, save_table_config
from engine.io import storage
from engine.io.locking import TableLocked
from engine.io.naming import parse_base_file_name, parse_log_file_name
from engine.lock import TableLock, compaction_run_lock, holding, table_lock_of
from engine.results import RecoverResult, RollbackResult, iso, utc
from engine.services import clean, orphans, rollback
from engine.timeline import heartbeat
from engine.timeline.instants import CLEAN, DELTACOMMIT, ROLLBACK, State, Timeline, revert_compaction_inflight


def reconcile_attempts(base_path: str, stats: Iterable[dict[str, Any]]) -> list[str]:
    """Delete logs (and an overwrite's base files) that duplicate a committed file's (file group, instant,
    version) under another attempt's token: readers would otherwise pick one of them by name."""
    committed_by_dir: dict[str, dict[tuple[str, str, int], str]] = {}
    for stat in stats:
        key = _attempt_key(storage.name_of(stat["path"]))
        if key is not None:
            directory = storage.join(base_path, storage.parent(stat["path"]))
            committed_by_dir.setdefault(directory, {})[key[0]] = key[1]
    removed: list[str] = []
    for directory, committed in committed_by_dir.items():   # one listing per partition
        for name in storage.list_names(directory):
            other = _attempt_key(name)
            if other is None:
                continue
            token = committed.get(other[0])
            if token is not None and other[1] != token:
                storage.remove(storage.join(directory, name))
                removed.append(storage.join(directory, name))
    return removed


def _attempt_key(name: str) -> tuple[tuple[str, str, int], str] | None:
    """((file id, instant, log version or 0 for a base file), write token) of a data file name."""
    log = parse_log_file_name(name)
    if log is not None:
        return (log.file_id, log.base_instant, log.version), log.write_token
    base = parse_base_file_name(name)
    return ((base.file_id, base.instant, 0), base.write_token) if base is not None else None


def recover(base_path: str, *, lock: TableLock | None = None) -> RecoverResult:
    """Bring a table back to a quiescent state after crashes; running it again changes nothing.

    In order: finish interrupted rollbacks (from their plans), roll back writes whose heartbeat expired,
    revert inflight compactions no run is executing to requested (their partial outputs deleted; the
    plan stays, to be run again), finish interrupted cleans, delete temporary files and heartbeats
    that no live operation owns, then the files rolled-back writes left behind (engine.services.orphans: a
    writer that lost its lock may write on after another host rolled it back). Live writers and running
    compactions are left alone.
    """
    with holding(table_lock_of(base_path, lock), "recover"):
        resumed = [rollback.resume_rollback(base_path, inst.timestamp)
                   for inst in Timeline.load(base_path).pending() if inst.action == ROLLBACK]
        rolled = rollback.rollback_expired_writes(base_path)
        result = RecoverResult(rolled_back=[x.instant for x in rolled], message="",
                               resumed_rollbacks=[x.instant for x in resumed], rollbacks=resumed + rolled)
        timeline = Timeline.load(base_path)
        result.live_writes = [i.timestamp for i in timeline.pending() if i.action == DELTACOMMIT] \
            + [i.timestamp for i in timeline.pending_overwrites()]
        result.stale_writes = {w: utc(ms) for w, ms in _stale(base_path, result.live_writes).items()}
        _revert_stalled_compactions(base_path, result)
        result.finished_cleans = clean.finish_pending_cleans(base_path)
        result.republished_guarantee = _republish_guarantee(base_path)
        _sweep(base_path, result)
        removed = orphans.remove_orphans(base_path)
        result.removed_orphans, result.orphan_instants = removed.paths, removed.instants
        result.changed = bool(resumed or rolled or result.reverted_compactions or result.finished_cleans
                              or result.removed_files or result.republished_guarantee or result.removed_orphans)
        result.message = _message(result, resumed, rolled)
        return result


def preview_recover(base_path: str) -> RecoverResult:
    """What `recover` would do now, doing nothing (`recover --dry-run`, the dashboard's preview): read
    without the table lock, so a writer finishing meanwhile can make the real run do less, never more."""
    timeline = Timeline.load(base_path)
    expiry = heartbeat.expiry_ms(load_table_config(base_path))
    writes = [i.timestamp for i in timeline.pending() if i.action == DELTACOMMIT] \
        + [i.timestamp for i in timeline.pending_overwrites()]
    dead = sorted(w for w in writes if heartbeat.is_expired(base_path, w, expiry))
    # as the real run reports them: the instants the interrupted rollbacks undo
    undone = [plan["instantToRollback"]["commitTime"] for _, plan in rollback.pending_rollbacks(timeline)]
    result = RecoverResult(rolled_back=dead, message="", dry_run=True, resumed_rollbacks=undone)
    result.live_writes = [w for w in writes if w not in dead]
    result.stale_writes = {w: utc(ms) for w, ms in _stale(base_path, result.live_writes).items()}
    # Whether a run executes an inflight compaction is known only under its run lock, which a preview does
    # not take: each is listed as reverted "unless a run is executing it".
    result.reverted_compactions = [i.timestamp for i in timeline.pending_compactions() if i.state is State.INFLIGHT]
    result.finished_cleans = [i.timestamp for i in timeline.pending() if i.action == CLEAN]
    owed = _guarantee_owed(base_path)
    result.republished_guarantee = owed["tidemark.ro.compaction.instant"] if owed else None
    result.removed_files = (_dead_temp_folders(base_path, result) + _dead_partial_files(base_path, timeline)
                            + [heartbeat.heartbeat_path(base_path, i) for i in _dead_heartbeats(base_path, timeline)])
    result.changed = bool(result.resumed_rollbacks or dead or result.reverted_compactions or result.finished_cleans
                          or result.removed_files or result.republished_guarantee)
    result.message = _preview_message(result)
    return result


def _preview_message(result: RecoverResult) -> str:
    """`_message` in the conditional: one line per thing `recover` would do or leave alone."""
    lines = [f"would resume the interrupted rollback of {r}" for r in result.resumed_rollbacks]
    lines += [f"would roll back dead write {w}" for w in result.rolled_back]
    lines += [f"would revert stalled compaction {c} to requested (unless a run is executing it)"
              for c in result.reverted_compactions]
    lines += [f"would finish clean {c}" for c in result.finished_cleans]
    lines += [f"would publish the RO guarantee of compaction {result.republished_guarantee}"] \
        if result.republished_guarantee else []
    lines += [f"would remove {len(result.removed_files)} temporary file(s)"] if result.removed_files else []
    lines = lines or ["nothing to recover"]
    lines += [f"would leave alone: write {w} (its heartbeat has not expired)" for w in result.live_writes]
    return "\n".join(lines)


def _message(result: RecoverResult, resumed: list[RollbackResult], rolled: list[RollbackResult]) -> str:
    """One line per thing `recover` did or left alone (also the CLI's rendering)."""
    lines = [f"resumed rollback {x.rollback_instant} of {x.instant}" for x in resumed]
    lines += [f"rolled back dead write {x.instant}" for x in rolled]
    lines += [f"reverted stalled compaction {c} to requested" for c in result.reverted_compactions]
    lines += [f"finished clean {c}" for c in result.finished_cleans]
    lines += [f"published the RO guarantee of compaction {result.republished_guarantee}"] \
        if result.republished_guarantee else []
    lines += [f"removed {len(result.removed_files)} temporary file(s)"] if result.removed_files else []
    lines += [orphans.describe(result.removed_orphans, result.orphan_instants)] if result.removed_orphans else []
    lines = lines or ["nothing to recover"]
    stale = result.stale_writes
    lines += [f"left alone: write {w} (" + (f"heartbeat not yet expired (expires at {iso(stale[w])})"
                                            if w in stale else "its heartbeat is current: a live writer, or one "
                                            "that died less than a heartbeat interval ago") + ")"
              for w in result.live_writes]
    lines += [f"left alone: compaction {c} (a run is executing it)" for c in result.running_compactions]
    return "\n".join(lines)


def _stale(base_path: str, writes: list[str]) -> dict[str, int]:
    """Writes whose heartbeat missed a beat but has not expired yet, with the time it expires: their writer
    may well be dead (killed), so `recover` must not call it alive — it says when it may act instead."""
    cfg = load_table_config(base_path)
    interval = cfg.int_setting(heartbeat.INTERVAL_KEY)
    now = int(time.time() * 1000)
    out = {}
    for w in writes:
        last = heartbeat.last_heartbeat_ms(base_path, w)
        if now - last > interval * 3 // 2:   # half an interval of slack: a live beat may be a moment late
            out[w] = last + heartbeat.expiry_ms(cfg)
    return out


def _republish_guarantee(base_path: str) -> str | None:
    """A compaction is committed before its RO guarantee reaches hoodie.properties; finish that step."""
    owed = _guarantee_owed(base_path)
    if owed is None:
        return None
    cfg = load_table_config(base_path)
    cfg.props.update(owed)
    save_table_config(cfg)
    return owed["tidemark.ro.compaction.instant"]


def _guarantee_owed(base_path: str) -> dict[str, str] | None:
    """The RO guarantee properties of the newest compaction when hoodie.properties does not hold them yet."""
    latest = rollback.guarantee_before(Timeline.load(base_path), None)
    instant = latest.get("tidemark.ro.compaction.instant")
    stored = load_table_config(base_path).props.get("tidemark.ro.compaction.instant", "")
    return latest if instant and stored < instant else None


def _revert_stalled_compactions(base_path: str, result: RecoverResult) -> None:
    try:
        with compaction_run_lock(base_path, "recover compactions"):
            timeline = Timeline.load(base_path)
            for inst in timeline.pending_compactions():
                if inst.state is not State.INFLIGHT:
                    continue
                result.removed_files.extend(revert_to_requested(base_path, timeline, inst.timestamp))
                result.reverted_compactions.append(inst.timestamp)
    except TableLocked:
        result.running_compactions = [i.timestamp for i in Timeline.load(base_path).pending_compactions()
                                      if i.state is State.INFLIGHT]


def revert_to_requested(base_path: str, timeline: Timeline, c: str) -> list[str]:
    """Inflight compaction `c` back to requested, its partial outputs deleted and its plan kept (as Java's
    revertInstantFromInflightToRequested); the caller holds the table and compaction locks. The deleted files."""
    removed = []
    for op in timeline.compaction_plan(c).operations:
        for path in rollback.compaction_outputs(base_path, c, op):
            storage.remove(path)   # invisible while C is pending; a link is removed, not its target
            removed.append(path)
    storage.remove_tree(storage.join(base_path, ".hoodie", ".temp", c))
    revert_compaction_inflight(base_path, c)
    return removed


def _sweep(base_path: str, result: RecoverResult) -> None:
    """Temporary files never become visible; delete those whose operation is over."""
    timeline = Timeline.load(base_path)
    for folder in _dead_temp_folders(base_path, result):
        storage.remove_tree(folder)
        result.removed_files.append(folder)
    for instant in _dead_heartbeats(base_path, timeline):
        if heartbeat.delete_heartbeat(base_path, instant):
            result.removed_files.append(heartbeat.heartbeat_path(base_path, instant))
    for path in _dead_partial_files(base_path, timeline):
        storage.remove(path)
        result.removed_files.append(path)


def _dead_temp_folders(base_path: str, result: RecoverResult) -> list[str]:
    """`.hoodie/.temp/<instant>` folders of operations that are over (not a live write or running compaction)."""
    temp_root = storage.join(base_path, ".hoodie", ".temp")
    live = set(result.live_writes) | set(result.running_compactions)
    names = sorted(storage.list_names(temp_root)) if storage.is_dir(temp_root) else []
    return [storage.join(temp_root, name) for name in names if name not in live]


def _dead_heartbeats(base_path: str, timeline: Timeline) -> list[str]:
    pending = {i.timestamp for i in timeline.pending()}
    return [i for i in heartbeat.heartbeat_instants(base_path) if i not in pending]


def _dead_partial_files(base_path: str, timeline: Timeline) -> list[str]:
    hoodie = storage.join(base_path, ".hoodie")
    # Half-created instant files (`.temp-*`) and properties (`*.tmp`): an operation that is alive finishes
    # writing them within moments, so anything older than a heartbeat expiry is a dead process's.
    cutoff = time.time() - heartbeat.expiry_ms(load_table_config(base_path)) / 1000
    # Table version 8 publishes instants in `.hoodie/timeline/`, so its half-created ones are there.
    folders = [hoodie] if timeline.timeline_path == hoodie else [hoodie, timeline.timeline_path]
    return [storage.join(folder, name) for folder in folders for name in sorted(storage.list_names(folder))
            if (name.startswith(".temp-") or name.endswith(".tmp")) and storage.is_file(storage.join(folder, name))
            and storage.mtime_ms(storage.join(folder, name)) / 1000 < cutoff]
