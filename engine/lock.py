"""The table lock as a protocol, so that callers choose it: a file lock by default, a database lease in the
control plane.

Every operation that changes the timeline (write commit, compaction schedule and run, rollback, clean,
recover) takes the lock object given by its caller, through `holding`. A lock not granted within the
timeout refuses the operation (`Refused(reason="lock_unavailable")`); nothing was changed then. A lease
can expire while a long operation runs, so just before an operation publishes its instant it calls
`ensure_held`, which refuses (`lock_lost`) rather than commit without the lock.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from engine.errors import LOCK_LOST, LOCK_UNAVAILABLE, Refused
from engine.io import locking


@runtime_checkable
class TableLock(Protocol):
    """What Tidemark needs from a lock; one instance guards one table."""

    def acquire(self, timeout_s: float) -> bool:
        """Take the lock, waiting at most `timeout_s`; False when it was not granted in time."""
        ...

    def release(self) -> None:
        """Give the lock back (a no-op when not held)."""
        ...

    def is_held(self) -> bool:
        """Whether the lock is still ours (a lease may have expired or been taken over)."""
        ...


class FileLock:
    """The default lock: an advisory `flock` on `.hoodie/.tidemark.lock` (serialises processes on one host).

    `lock_file` selects another lock of the same table (the compaction run lock). The flock is bound to the
    open descriptor, so it cannot be lost while held: `is_held` is True from acquire to release.
    """

    def __init__(self, base_path: str, lock_file: str = locking.LOCK_FILE, purpose: str = "change the table") -> None:
        self.base_path = base_path
        self.lock_file = lock_file
        self.purpose = purpose
        self._fd: int | None = None

    def acquire(self, timeout_s: float) -> bool:
        if self._fd is not None:
            raise RuntimeError(f"{self!r} is already held; a FileLock is not re-entrant")
        fd = locking.open_lock_file(self.base_path, self.lock_file)
        if not locking.flock_within(fd, timeout_s):
            os.close(fd)
            return False
        locking.record_holder(fd, self.purpose)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def is_held(self) -> bool:
        return self._fd is not None

    def holder(self) -> str:
        """Who holds the lock now, as its holder wrote it ("pid 123 (clean)")."""
        fd = locking.open_lock_file(self.base_path, self.lock_file)
        try:
            return locking.read_holder(fd)
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"FileLock({self.base_path!r}, {self.lock_file!r})"


# The lock held by the operation running in this thread (innermost last): `ensure_held` checks it.
_HELD: contextvars.ContextVar[tuple[TableLock, ...]] = contextvars.ContextVar("tidemark_held_locks", default=())


@contextlib.contextmanager
def holding(lock: TableLock, purpose: str, timeout_s: float | None = None) -> Iterator[TableLock]:
    """Hold `lock` for the block; Refused(lock_unavailable) when it is not granted within `timeout_s`."""
    timeout = locking.default_timeout_s() if timeout_s is None else timeout_s
    if isinstance(lock, FileLock):
        lock.purpose = purpose
    if not lock.acquire(timeout):
        who = f" (held by {lock.holder()})" if isinstance(lock, FileLock) else ""
        which = "the table lock" if not isinstance(lock, FileLock) or lock.lock_file == locking.LOCK_FILE \
            else f"the lock {lock.lock_file}"
        raise Refused(LOCK_UNAVAILABLE, f"could not take {which}{who} within {timeout:g} s to {purpose}")
    token = _HELD.set((*_HELD.get(), lock))
    try:
        yield lock
    finally:
        _HELD.reset(token)
        lock.release()


def ensure_held(action: str) -> None:
    """Refuse (lock_lost) if a lock this thread's operation holds is no longer ours, before `action`."""
    for lock in _HELD.get():
        if not lock.is_held():
            raise Refused(LOCK_LOST, f"the table lock was lost before {action}; nothing was published")


def holds_lock_outside_store() -> bool:
    """Whether this thread's operation holds a lock that serialises writers across hosts: any caller's
    `TableLock` but the host-local `FileLock` (the control plane's database lease is one)."""
    return any(not isinstance(lock, FileLock) and lock.is_held() for lock in _HELD.get())


def table_lock_of(base_path: str, lock: TableLock | None) -> TableLock:
    """The caller's lock, else the table's file lock."""
    return lock if lock is not None else FileLock(base_path)
