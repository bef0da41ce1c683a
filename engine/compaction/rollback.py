"""Rolling back a pending (requested or inflight) compaction so a new one can be scheduled.

Unlike Java (facts §6.2, which keeps the plan and re-executes it later), a rolled-back event-time plan is
removed: its threshold was computed for the timeline of its day, and the serial trigger needs the slot.
Removed: the new base files `<fid>_*_<C>.parquet`, the exact-mode spill logs, the carried-over links or
copies named in the plan's symlinkOperations (never their targets), `.hoodie/.temp/<C>/`, then the plan.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from engine.compaction.plan import EXACT_SPILL_VERSION, X_EXACT
from engine.errors import TidemarkError
from engine.locking import COMPACTION_LOCK_FILE, table_lock
from engine.naming import parse_base_file_name, parse_log_file_name
from engine.timeline import COMMIT, COMPACTION, Timeline, delete_instant_files


class RollbackRefused(TidemarkError):
    """The compaction cannot be rolled back safely (completed, unknown, or slice C got new writes)."""


@dataclass
class RollbackResult:
    instant: str
    deleted_files: list[str] = field(default_factory=list)
    removed_instant_files: list[str] = field(default_factory=list)


def rollback_compaction(base_path: str, instant: str) -> RollbackResult:
    """Undo pending compaction `instant`: its outputs and its plan. Logs it only carried are untouched.

    Holds the table lock (no writer may route into slice C while it disappears) and the compaction lock
    (a run of the same plan must not be writing files we are deleting; we do not wait for one).
    """
    with table_lock(base_path, f"roll back compaction {instant}"), \
            table_lock(base_path, f"roll back compaction {instant}", timeout_s=0, lock_file=COMPACTION_LOCK_FILE):
        return _rollback_locked(base_path, instant)


def _rollback_locked(base_path: str, instant: str) -> RollbackResult:
    timeline = Timeline.load(base_path)
    _check_pending(timeline, instant)
    plan = timeline.read_compaction_plan(instant)
    exact = (plan.get("extraMetadata") or {}).get(X_EXACT) == "true"
    created = _created_files(base_path, instant, plan, exact)
    _refuse_new_writes(base_path, instant, plan, exact)
    result = RollbackResult(instant)
    for path in created:
        if os.path.lexists(path):   # lexists: a link is removed even when its target is gone
            os.unlink(path)         # unlinking a symlink never touches its target
            result.deleted_files.append(path)
    shutil.rmtree(os.path.join(base_path, ".hoodie", ".temp", instant), ignore_errors=True)
    result.removed_instant_files = delete_instant_files(base_path, instant, COMPACTION)
    return result


def _check_pending(timeline: Timeline, instant: str) -> None:
    if any(i.timestamp == instant and i.action == COMMIT and i.is_completed for i in timeline.instants):
        raise RollbackRefused(f"compaction {instant} is completed ({instant}.commit exists); rolling back a "
                              "completed compaction is not supported: schedule a new compaction instead")
    if not any(i.timestamp == instant for i in timeline.pending_compactions()):
        raise RollbackRefused(f"{instant} is not a pending compaction on {timeline.base_path}")


def _partition_dir(base_path: str, partition: str) -> str:
    return os.path.join(base_path, partition) if partition else base_path


def _created_files(base_path: str, instant: str, plan: dict, exact: bool) -> list[str]:
    """Everything compaction `instant` may have written, per the plan (existing or not)."""
    out = []
    for op in plan.get("operations") or []:
        pdir = _partition_dir(base_path, op.get("partitionPath") or "")
        fid = op["fileId"]
        if not os.path.isdir(pdir):
            continue
        for name in os.listdir(pdir):
            base = parse_base_file_name(name)
            log = parse_log_file_name(name)
            if base is not None and base.file_id == fid and base.instant == instant:
                out.append(os.path.join(pdir, name))
            elif (exact and log is not None and log.file_id == fid and log.base_instant == instant
                  and log.version == EXACT_SPILL_VERSION):
                out.append(os.path.join(pdir, name))
        out.extend(os.path.join(pdir, s["symlink"]) for s in op.get("symlinkOperations") or [] if s.get("symlink"))
    return out


def _refuse_new_writes(base_path: str, instant: str, plan: dict, exact: bool) -> None:
    """Logs written into slice C while the plan was pending would be orphaned (their slice base never
    appears), so they must not be silently lost: refuse, naming them."""
    strays = []
    for op in plan.get("operations") or []:
        pdir = _partition_dir(base_path, op.get("partitionPath") or "")
        planned = {s["symlink"] for s in op.get("symlinkOperations") or [] if s.get("symlink")}
        if not os.path.isdir(pdir):
            continue
        for name in os.listdir(pdir):
            log = parse_log_file_name(name)
            if log is None or log.file_id != op["fileId"] or log.base_instant != instant or name in planned:
                continue
            if exact and log.version == EXACT_SPILL_VERSION:
                continue
            strays.append(os.path.join(pdir, name))
    if strays:
        raise RollbackRefused(
            f"cannot roll back compaction {instant}: {len(strays)} log file(s) were written into its slice while it "
            f"was pending ({', '.join(sorted(strays))}); they would be orphaned. Run the compaction to completion "
            "instead (run_compaction), which keeps them")
