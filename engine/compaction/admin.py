"""Hudi CLI parity for pending compaction plans: `validate`, `unschedule` (a plan or one file group), `repair`.

The semantics are Java Hudi's CompactionAdminClient (0.x, tables whose log names carry their slice's base
instant, as our version 6 does; version 8 below):

- **validate**: per operation, the file slice the plan was made from is still there — its base file decodes
  its footer, every log it folds or carries decodes its headers (no committed block damaged), and the slice
  holds no log the plan does not name (logs written since go to slice C). Valid, or Error with the reasons.
- **unschedule**: logs written into slice C since the plan was scheduled would be orphaned with the slice, so
  they are renamed into the previous slice first (versions after its last, in their order: readers see the
  same records in the same order), then the plan is rewritten without the file group, or removed. Java deletes
  the requested file; we remove an emptied plan as rollback instant R (the timeline keeps a trace). An
  inflight plan goes back to requested first, its partial outputs deleted (Java does this for a file group).
- **repair**: Java renames logs back when an unschedule stopped half way. Before renaming, unschedule writes a
  journal of its renames (`.hoodie/.aux/tidemark-unschedule-<C>.json`); repair undoes the renames of file groups
  still in the plan, so the slices match the plan again. Its dry run lists them and changes nothing (Java's
  repair ignores its dry-run flag).

While a plan is pending hudi 0.5.0 ignores slice C's logs (docs/HUDI-FORMAT.md §4.3); once renamed into the
previous slice they are read by every reader.

Table version 8 (completion-time slicing): a log is named by the write that made it and belongs to the slice of
the greatest base instant at or before that write's completion time. A write that completed after C was requested
is "written since" whatever its name says; nothing needs renaming when C goes, because once C's plan is gone no
reader has a slice C to put such a log in — it falls into the previous slice by its completion time on its own.
The carried logs a run re-publishes under C's name (the plan's outputs) exist only while C is inflight and are
deleted with the other partial outputs when it goes back to requested. So on v8 unschedule renames nothing, and
repair finds nothing to move (it validates).
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

from engine import logformat
from engine import results as r
from engine.errors import (
    ALREADY_COMPLETED,
    COMPACTION_RUNNING,
    INTERRUPTED_UNSCHEDULE,
    INVALID_PLAN,
    PENDING_WRITE,
    UNKNOWN_INSTANT,
    ConfigError,
    Refused,
    TidemarkError,
)
from engine.io import base_format, storage
from engine.io.locking import TableLocked
from engine.io.naming import CARRY_FORWARD_VERSION, LogFileName, parse_log_file_name
from engine.lock import TableLock, compaction_run_lock, ensure_held, holding, table_lock_of
from engine.logformat import integrity
from engine.services.recovery import revert_to_requested
from engine.services.rollback import rollback_expired_writes, rollback_locked
from engine.slices.fsview import FileSystemView
from engine.slices.groups import FileGroup, FileSlice, LogFile
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import COMPACTION, DELTACOMMIT, REPLACECOMMIT, Instant, State, Timeline, pending_file
from engine.timeline.metadata import CompactionOperation, CompactionPlanRecord


class UnscheduleInterrupted(TidemarkError):
    """Some renames of an unschedule failed: the plan is unchanged and `repair` puts the logs back."""


# ------------------------------------------------------------------------------------------ validate

def validate_plan(base_path: str, instant: str) -> r.PlanValidation:
    """Check every operation of pending compaction `instant` against the table's files."""
    timeline = Timeline.load(base_path)
    pending = _pending(timeline, instant)
    plan = timeline.compaction_plan(instant)
    return _validate(base_path, timeline, pending, plan, plan.operations)


def _validate(base_path: str, timeline: Timeline, pending: Instant, plan: CompactionPlanRecord,
              ops: tuple[CompactionOperation, ...]) -> r.PlanValidation:
    view = FileSystemView(base_path, timeline)
    groups = {(g.partition_path, g.file_id): g for g in view.all_file_groups()}
    committed = view.committed_instants
    extents = CommittedExtents(base_path, timeline)
    out = [_validate_op(view, groups.get(op.key), op, pending.timestamp, committed, extents,
                        _written_since(view, op, pending.timestamp)) for op in ops]
    return r.PlanValidation(instant=pending.timestamp, state=pending.state.value,
                            valid=all(g.valid for g in out), file_groups=out)


def _validate_op(view: FileSystemView, group: FileGroup | None, op: CompactionOperation, c: str,
                 committed: frozenset[str], extents: CommittedExtents,
                 since: list[str]) -> r.FileGroupValidation:
    pdir = view.partition_dir(op.partition_path)
    result = r.FileGroupValidation(partition=op.partition_path, file_id=op.file_id, valid=False, errors=[],
                                   base_file=op.data_file, logs_compacted=len(op.delta_files),
                                   logs_carried=len(op.carried), logs_written_since=since)
    errors = result.errors
    slice_b = next((s for s in group.slices if s.base_instant == op.base_instant), None) if group else None
    if slice_b is None:
        errors.append(f"file slice {op.base_instant} of file group {op.file_id} is gone: the plan points at a "
                      "stale slice")
    elif op.data_file and (slice_b.base_file is None or slice_b.base_file.name != op.data_file):
        found = slice_b.base_file.name if slice_b.base_file else "none"
        errors.append(f"base file {op.data_file} named by the plan is not the slice's base file ({found})")
    if op.data_file:
        errors += _base_errors(storage.join(pdir, op.data_file))
    for name in [*op.delta_files, *(c_.target for c_ in op.carried)]:
        errors += _log_errors(storage.join(pdir, name), committed, extents)
    if slice_b is not None:
        named = set(op.delta_files) | {c_.target for c_ in op.carried} | set(since)
        for lf in slice_b.log_files:
            if lf.name not in named and _real_name(pdir, lf) not in named:
                errors.append(f"log {lf.name} is in the plan's slice but neither named by the plan nor written after "
                              f"it (an interrupted unschedule? run `compaction repair --instant {c}`)")
    result.valid = not errors
    return result


def _base_errors(path: str) -> list[str]:
    if not storage.exists(path):
        return [f"base file {storage.name_of(path)} named by the plan is missing"]
    try:
        base_format.check_readable(path)   # the footer: schema and row groups (Parquet) or pages (Lance)
    except Exception as exc:  # noqa: BLE001 - any decode failure is the validation's answer, not a crash
        return [f"base file {storage.name_of(path)} does not decode: {exc}"]
    return []


def _log_errors(path: str, committed: frozenset[str], extents: CommittedExtents) -> list[str]:
    if not storage.exists(path):
        return [f"log {storage.name_of(path)} named by the plan is missing"]
    try:
        scan = logformat.scan_log_file(path)
    except Exception as exc:  # noqa: BLE001
        return [f"log {storage.name_of(path)} does not decode its headers: {exc}"]
    bad = integrity.file_corruption(scan, committed, extents).committed
    return [f"log {storage.name_of(path)}: corrupt block {integrity.describe(b)}" for b in bad]


def _real_name(pdir: str, lf: LogFile) -> str:
    """The name a carry-over records for a log: the file behind a link, relative to the partition folder."""
    if not storage.is_link(lf.path):
        return lf.name
    return os.path.relpath(os.path.realpath(lf.path), os.path.realpath(pdir))


def _written_since(view: FileSystemView, op: CompactionOperation, c: str) -> list[str]:
    """Logs of the group written since the plan was scheduled, in log order: on v6 those in slice C that the plan
    did not reserve (its carry-overs and carry-forward log); on v8 those of writes that completed after C was
    requested, or have not completed (named by their own write, whatever slice they end up in)."""
    pdir = view.partition_dir(op.partition_path)
    if view.timeline.uses_completion_time:
        return _written_since_v8(view.timeline, pdir, op, c)
    reserved = {s.symlink for s in op.carried}
    found = []
    for name in storage.list_names_if_dir(pdir):
        log = parse_log_file_name(name)
        if (log is not None and log.file_id == op.file_id and log.base_instant == c
                and log.version != CARRY_FORWARD_VERSION and name not in reserved):
            found.append((log.version, log.write_token, name))
    return [name for *_, name in sorted(found)]


def _written_since_v8(timeline: Timeline, pdir: str, op: CompactionOperation, c: str) -> list[str]:
    """Logs named by a write other than C (C's names are its own outputs) that the plan does not name and whose
    write completed after C was requested or is not complete: Java's planner leaves such logs out too."""
    planned = set(op.delta_files) | {s.target for s in op.carried}
    found = []
    for name in storage.list_names_if_dir(pdir):
        log = parse_log_file_name(name)
        if log is None or log.file_id != op.file_id or log.base_instant == c or name in planned:
            continue
        done = timeline.completion_time(log.base_instant)
        if done is None or done > c:
            found.append((done or "~", log.base_instant, log.version, log.write_token, name))
    return [name for *_, name in sorted(found)]


# ------------------------------------------------------------------------------------------ unschedule

def unschedule(base_path: str, instant: str, *, file_id: str | None = None, partition: str | None = None,
               dry_run: bool = False, lock: TableLock | None = None) -> r.UnscheduleResult:
    """Take pending compaction `instant` back: the whole plan, or (`file_id`) one file group of it.

    Writers and runs must be off: refused while a write is pending (`pending_write`) or a run executes the plan
    (`compaction_running`). A dry run lists the renames and changes nothing."""
    with _locks(base_path, instant, lock, dry_run, "unschedule"):
        if not dry_run:
            rollback_expired_writes(base_path)   # a dead writer never blocks (LAZY failed-writes policy)
        timeline = Timeline.load(base_path)
        pending = _pending(timeline, instant)
        _refuse_pending_writes(timeline, instant)
        if storage.exists(journal_path(base_path, instant)):
            raise Refused(INTERRUPTED_UNSCHEDULE, f"an earlier unschedule of compaction {instant} was interrupted; "
                          f"run `compaction repair --instant {instant}` first", instant)
        plan = timeline.compaction_plan(instant)
        ops = _selected(plan, instant, file_id, partition)
        checked = _validate(base_path, timeline, pending, plan, ops)
        if not checked.valid:
            reasons = "; ".join(f"{g.file_id}: {e}" for g in checked.file_groups for e in g.errors)
            raise Refused(INVALID_PLAN, f"compaction {instant} does not match the table's files, nothing was "
                          f"changed: {reasons}", instant)
        view = FileSystemView(base_path, timeline)
        renames = [x for op in ops for x in _renames(view, op, instant)]
        keys = [_group_key(op) for op in ops]
        left = len(plan.operations) - len(ops)
        result = r.UnscheduleResult(instant=instant, dry_run=dry_run, renames=renames, unscheduled_file_groups=keys,
                                    remaining_file_groups=left)
        if dry_run:
            result.message = _message(result)
            return result
        if pending.state is State.INFLIGHT:
            revert_to_requested(base_path, timeline, instant)
            result.reverted_inflight = True
        _write_journal(base_path, instant, renames)
        _rename_all(base_path, instant, renames)
        ensure_held(f"rewriting compaction plan {instant}")
        if left:
            _rewrite_plan(base_path, instant, plan, keys)
        else:
            result.rollback_instant = rollback_locked(base_path, instant).rollback_instant
        storage.remove_if_exists(journal_path(base_path, instant))
        result.message = _message(result)
        return result


@contextlib.contextmanager
def _locks(base_path: str, instant: str, lock: TableLock | None, dry_run: bool, what: str) -> Iterator[None]:
    """The table lock and the compaction lock; a dry run reads only and takes neither (like a preview)."""
    if dry_run:
        yield
        return
    with holding(table_lock_of(base_path, lock), f"{what} compaction {instant}"), _no_run(base_path, instant):
        yield


@contextlib.contextmanager
def _no_run(base_path: str, instant: str) -> Iterator[None]:
    """Hold the compaction lock: no run may execute the plan while its slices move."""
    try:
        with compaction_run_lock(base_path, f"administer compaction {instant}"):
            yield
    except TableLocked:
        raise Refused(COMPACTION_RUNNING, f"a run is executing compaction {instant}; cancel it or wait for it",
                      instant) from None


def _pending(timeline: Timeline, instant: str) -> Instant:
    match = [i for i in timeline.pending_compactions() if i.timestamp == instant]
    if match:
        return match[0]
    if timeline.is_completed(instant):
        raise Refused(ALREADY_COMPLETED, f"compaction {instant} is already completed: roll it back instead", instant)
    raise Refused(UNKNOWN_INSTANT, f"no pending compaction {instant} on {timeline.base_path}", instant)


def _refuse_pending_writes(timeline: Timeline, instant: str) -> None:
    for inst in timeline.pending():
        if inst.action in (DELTACOMMIT, REPLACECOMMIT):
            raise Refused(PENDING_WRITE, f"{inst.action} {inst.timestamp} is still {inst.state.value}: its logs may "
                          f"land in slice {instant} while it moves; let it finish first", inst.timestamp)


def _selected(plan: CompactionPlanRecord, instant: str, file_id: str | None,
              partition: str | None) -> tuple[CompactionOperation, ...]:
    if file_id is None:
        if partition is not None:
            raise ConfigError("a partition names a file group only together with a file id")
        return plan.operations
    ops = tuple(op for op in plan.operations
                if op.file_id == file_id and (partition is None or op.partition_path == partition))
    if not ops:
        where = f" in partition {partition!r}" if partition is not None else ""
        raise ConfigError(f"file group {file_id}{where} is not in pending compaction {instant}")
    if len(ops) > 1:
        raise ConfigError(f"file id {file_id} is in several partitions of compaction {instant} "
                          f"({', '.join(op.partition_path for op in ops)}); name the partition")
    return ops


def _group_key(op: CompactionOperation) -> str:
    return f"{op.partition_path}/{op.file_id}" if op.partition_path else op.file_id


def _renames(view: FileSystemView, op: CompactionOperation, c: str) -> list[r.LogRename]:
    """Slice C's logs written since planning, renamed into slice B after its last version, in order. None on v8:
    there a log's name is its write's, and its completion time puts it in slice B once the plan is gone."""
    if view.timeline.uses_completion_time:
        return []
    versions = [lf.version for s in _group_slices(view, op) if s.base_instant == op.base_instant for lf in s.log_files]
    version = max(versions, default=0)
    out = []
    for name in _written_since(view, op, c):
        parsed = parse_log_file_name(name)
        assert parsed is not None
        version += 1
        target = LogFileName(op.file_id, op.base_instant, version, parsed.write_token).name
        out.append(r.LogRename(partition=op.partition_path, file_id=op.file_id, source=name, target=target))
    return out


def _group_slices(view: FileSystemView, op: CompactionOperation) -> list[FileSlice]:
    return next((g.slices for g in view.all_file_groups() if (g.partition_path, g.file_id) == op.key), [])


def _rename_all(base_path: str, instant: str, renames: list[r.LogRename]) -> None:
    """In log order, so an interruption leaves the earliest moved: readers keep the records' order."""
    for x in renames:
        pdir = _pdir(base_path, x.partition)
        src, dst = storage.join(pdir, x.source), storage.join(pdir, x.target)
        try:
            if storage.lexists(dst):
                raise TidemarkError(f"{dst} exists already")
            ensure_held(f"renaming {x.source}")
            storage.rename(src, dst)
        except (OSError, TidemarkError) as exc:
            raise UnscheduleInterrupted(
                f"unschedule of compaction {instant} stopped renaming {x.source} -> {x.target} ({exc}); the plan is "
                f"unchanged and every record is still read: run `compaction repair --instant {instant}` to put the "
                "logs moved so far back") from None
        x.done = True


def _rewrite_plan(base_path: str, instant: str, plan: CompactionPlanRecord, keys: list[str]) -> None:
    """`C.compaction.requested` without the unscheduled operations (replaced whole; Java overwrites it too)."""
    from dataclasses import replace

    gone = set(keys)
    ops = tuple(op for op in plan.operations if _group_key(op) not in gone)
    settings = replace(plan.settings, unscheduled=tuple(plan.settings.unscheduled) + tuple(keys))
    record = replace(plan, operations=ops, settings=settings)
    storage.write_replace(pending_file(base_path, instant, COMPACTION, State.REQUESTED), record.to_bytes())


def _message(result: r.UnscheduleResult) -> str:
    what = "would unschedule" if result.dry_run else "unscheduled"
    groups = ", ".join(result.unscheduled_file_groups)
    moved = f"{'would move' if result.dry_run else 'moved'} {len(result.renames)} log(s) written since planning " \
            "into the previous slice"
    tail = (f"; {result.remaining_file_groups} file group(s) stay planned" if result.remaining_file_groups
            else "; the plan " + ("would be removed" if result.dry_run else
                                   f"is removed (rollback {result.rollback_instant})"))
    return f"{what} {groups} from compaction {result.instant}: {moved}{tail}"


# ------------------------------------------------------------------------------------------ repair

@dataclass(frozen=True)
class _Entry:
    partition: str
    file_id: str
    source: str   # the name in slice C (where the plan expects it)
    target: str   # the name in the previous slice


def journal_path(base_path: str, instant: str) -> str:
    return storage.join(base_path, ".hoodie", ".aux", f"tidemark-unschedule-{instant}.json")


def _write_journal(base_path: str, instant: str, renames: list[r.LogRename]) -> None:
    storage.make_dirs(storage.join(base_path, ".hoodie", ".aux"))
    body = {"instant": instant, "renames": [{"partition": x.partition, "fileId": x.file_id, "source": x.source,
                                              "target": x.target} for x in renames]}
    storage.write_replace(journal_path(base_path, instant), json.dumps(body, indent=1).encode())


def _read_journal(base_path: str, instant: str) -> list[_Entry] | None:
    raw = storage.read_optional(journal_path(base_path, instant))
    if raw is None:
        return None
    try:
        body = json.loads(raw)
        return [_Entry(e["partition"], e["fileId"], e["source"], e["target"]) for e in body["renames"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise TidemarkError(f"{journal_path(base_path, instant)} is not an unschedule journal ({exc})") from None


def repair(base_path: str, instant: str, *, dry_run: bool = False, lock: TableLock | None = None) -> r.RepairResult:
    """Put logs an interrupted unschedule of pending compaction `instant` moved back into slice C, for the file
    groups still in the plan; then validate. A dry run lists the renames and changes nothing."""
    with _locks(base_path, instant, lock, dry_run, "repair"):
        timeline = Timeline.load(base_path)
        entries = _read_journal(base_path, instant)
        pending = [i for i in timeline.pending_compactions() if i.timestamp == instant]
        if not pending:
            _pending(timeline, instant)   # raises: unknown or completed
        plan = timeline.compaction_plan(instant)
        planned = {(op.partition_path, op.file_id) for op in plan.operations}
        undo = [_back(base_path, e) for e in entries or [] if (e.partition, e.file_id) in planned]
        back = [x for x in undo if x is not None]
        if not dry_run:
            for x in back:
                pdir = _pdir(base_path, x.partition)
                ensure_held(f"renaming {x.source}")
                storage.rename(storage.join(pdir, x.source), storage.join(pdir, x.target))
                x.done = True
            storage.remove_if_exists(journal_path(base_path, instant))
        validation = validate_plan(base_path, instant)
        if entries is None:
            message = f"no interrupted unschedule of compaction {instant} is recorded: nothing to move"
        else:
            message = f"{'would move' if dry_run else 'moved'} {len(back)} log(s) back into slice {instant}"
        message += "; the plan is valid" if validation.valid else "; the plan is still invalid (see file_groups)"
        return r.RepairResult(instant=instant, dry_run=dry_run, renames=back, validation=validation, message=message)


def _back(base_path: str, e: _Entry) -> r.LogRename | None:
    """The rename that undoes one journal entry, None when it never happened."""
    pdir = _pdir(base_path, e.partition)
    moved, original = storage.lexists(storage.join(pdir, e.target)), storage.lexists(storage.join(pdir, e.source))
    if moved and original:
        raise TidemarkError(f"both {e.source} and {e.target} exist in {pdir}: repair cannot tell which one is the log "
                            "the unschedule moved")
    if not moved:
        return None
    return r.LogRename(partition=e.partition, file_id=e.file_id, source=e.target, target=e.source)


def _pdir(base_path: str, partition: str) -> str:
    return storage.join(base_path, partition) if partition else base_path
