"""`compaction rollback`: the general rollback (engine.services.rollback) restricted to compactions.

A pending plan or the latest completed compaction is undone: its new base files, exact-mode spill logs
and carried-over links or copies are deleted (never their targets), its RO guarantee is replaced by the
previous one and its plan is removed, all as rollback instant R.
"""
from __future__ import annotations

from engine.errors import NOT_ROLLBACKABLE, RollbackRefused
from engine.lock import TableLock
from engine.progress import Progress
from engine.results import RollbackResult
from engine.services.rollback import rollback
from engine.timeline.instants import COMMIT, COMPACTION, Timeline

__all__ = ["RollbackRefused", "RollbackResult", "rollback_compaction"]


def rollback_compaction(base_path: str, instant: str, lock: TableLock | None = None,
                        on_progress: Progress | None = None) -> RollbackResult:
    """Roll back compaction `instant` (pending, or the latest completed one)."""
    kinds = {i.action for i in Timeline.load(base_path).get(instant)}
    if not kinds & {COMPACTION, COMMIT}:
        raise RollbackRefused(NOT_ROLLBACKABLE, f"{instant} is not a compaction on {base_path}")
    return rollback(base_path, instant, lock=lock, on_progress=on_progress)
