"""The table lock as a protocol, so that callers choose it: a file lock by default, a database lease in the
control plane.

Every operation that changes the timeline (write commit, compaction schedule and run, rollback, clean,
recover) takes the lock object given by its caller, through `holding`. A lock not granted within the
timeout refuses the operation (`Refused(reason="lock_unavailable")`); nothing was changed then. A lease
can expire while a long operation runs, so just before an operation publishes its instant it calls
`ensure_held`, which refuses (`lock_lost`) rather than commit without the lock; a lock in the table's store is
fenced there (`StoreLock.fence`: the lock object itself is asked, not this process's memory of it).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol, runtime_checkable

from engine.errors import LOCK_LOST, LOCK_UNAVAILABLE, ConfigError, Refused, TableNotFoundError
from engine.io import locking, storage
from engine.io.store_lock import COMPACTION_LOCK, RENEW_S, TABLE_LOCK, VALIDITY_S, StoreLock


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
    """The default lock: an advisory `flock` on `.hoodie/.tidemark.lock` (serialises processes on one host), and,
    for an object-store table whose settings name Hudi's storage-based lock provider, that lock in the table's
    store after it (`store_lock_of`: serialises hosts).

    `lock_file` selects another lock of the same table (the compaction run lock). The flock is bound to the
    open descriptor, so it cannot be lost while held; a store lock's lease can be (`is_held` turns False).
    """

    def __init__(self, base_path: str, lock_file: str = locking.LOCK_FILE, purpose: str = "change the table") -> None:
        self.base_path = base_path
        self.lock_file = lock_file
        self.purpose = purpose
        self._fd: int | None = None
        self._store: StoreLock | None = None
        self._refused_by: StoreLock | None = None

    def acquire(self, timeout_s: float) -> bool:
        if self._fd is not None:
            raise RuntimeError(f"{self!r} is already held; a FileLock is not re-entrant")
        deadline = time.monotonic() + timeout_s
        self._refused_by = None
        fd = locking.open_lock_file(self.base_path, self.lock_file)
        store: StoreLock | None = None
        try:
            if not locking.flock_within(fd, timeout_s):
                os.close(fd)
                return False
            store = store_lock_of(self.base_path, self.lock_file)
            if store is not None and not store.acquire(max(0.0, deadline - time.monotonic())):
                self._refused_by = store
                os.close(fd)
                return False
            locking.record_holder(fd, self.purpose)
        except BaseException:   # the table's settings or lock object unreadable, interrupted: nothing stays held
            if store is not None:
                store.release()
            os.close(fd)
            raise
        self._fd, self._store = fd, store
        return True

    def release(self) -> None:
        if self._store is not None:
            self._store.release()
            self._store = None
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def is_held(self) -> bool:
        return self._fd is not None and (self._store is None or self._store.is_held())

    def fence(self) -> str | None:
        """None while held (the store's lock proven by a request to the store), else why not (`StoreLock.fence`)."""
        if self._fd is None:
            return f"the lock {self.lock_file} of {self.base_path} is not held by this process"
        return None if self._store is None else self._store.fence()

    def holder(self) -> str:
        """Who holds the lock now: as its holder on this host wrote it ("pid 123 (clean)"), or the store lock's
        holder when that one refused."""
        if self._refused_by is not None:
            return self._refused_by.holder()
        fd = locking.open_lock_file(self.base_path, self.lock_file)
        try:
            return locking.read_holder(fd)
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"FileLock({self.base_path!r}, {self.lock_file!r})"


def store_lock_of(base_path: str, lock_file: str = locking.LOCK_FILE) -> StoreLock | None:
    """The table's lock in its own store, which the host's `lock_file` lock takes after the flock, when the table's
    settings name Hudi's storage-based lock provider (`hoodie.write.lock.provider`); None otherwise, and for a
    table not created yet. The table lock is Hudi's own object (Java writers with that provider take the same);
    the compaction run lock one of Tidemark's beside it."""
    if not storage.is_remote(base_path):
        return None
    name = {locking.LOCK_FILE: TABLE_LOCK, locking.COMPACTION_LOCK_FILE: COMPACTION_LOCK}.get(lock_file)
    if name is None:
        return None
    from engine.config.properties import (
        LOCK_PROVIDER_KEY,
        LOCK_RENEW_KEY,
        LOCK_VALIDITY_KEY,
        STORAGE_LOCK_PROVIDER,
        load_table_config,
    )

    try:
        props = load_table_config(base_path).props
    except TableNotFoundError:
        return None
    if props.get(LOCK_PROVIDER_KEY, "") != STORAGE_LOCK_PROVIDER:
        return None
    try:
        validity, renew = int(props.get(LOCK_VALIDITY_KEY) or VALIDITY_S), int(props.get(LOCK_RENEW_KEY) or RENEW_S)
    except ValueError:
        raise ConfigError(f"{base_path}: {LOCK_VALIDITY_KEY} and {LOCK_RENEW_KEY} in hoodie.properties must be whole "
                          f"seconds, not {props.get(LOCK_VALIDITY_KEY)!r} and {props.get(LOCK_RENEW_KEY)!r}") from None
    return StoreLock(base_path, name, validity_s=validity, renew_s=renew)


@contextlib.contextmanager
def compaction_run_lock(base_path: str, purpose: str, ask: Callable[[], None] | None = None) -> Iterator[None]:
    """The table's compaction run lock (one run of a plan at a time), never waited for: the host's flock, and the
    store's when the table uses the storage-based lock (`store_lock_of`). TableLocked when either is held.

    `ask`, called once the flock is held, asks ahead (`storage.ask_ahead`) the run's first requests, in flight with
    the read of the table's settings that says whether the store's lock is taken too: they are true under the flock
    alone when it is not; when it is, they are dropped before it is taken (asked again under it)."""
    with locking.table_lock(base_path, purpose, timeout_s=0, lock_file=locking.COMPACTION_LOCK_FILE):
        if ask is not None:
            ask()
        store = store_lock_of(base_path, locking.COMPACTION_LOCK_FILE)
        if store is None:
            yield
            return
        storage.drop_asked()
        if not store.acquire(0):
            raise locking.TableLocked(f"table {base_path} is locked by {store.holder()}; gave up at once to "
                                      f"{purpose}")
        token = _HELD.set((*_HELD.get(), store))   # a lease can be lost: `ensure_held` checks it before a commit
        try:
            yield
        finally:
            _HELD.reset(token)
            store.release()


# The lock held by the operation running in this thread (innermost last): `ensure_held` checks it.
_HELD: contextvars.ContextVar[tuple[TableLock, ...]] = contextvars.ContextVar("tidemark_held_locks", default=())


@contextlib.contextmanager
def holding(lock: TableLock, purpose: str, timeout_s: float | None = None) -> Iterator[TableLock]:
    """Hold `lock` for the block; Refused(lock_unavailable) when it is not granted within `timeout_s`."""
    timeout = locking.default_timeout_s() if timeout_s is None else timeout_s
    if isinstance(lock, FileLock):
        lock.purpose = purpose
    elif isinstance(lock, CallerAndHostLock):
        lock.file.purpose = purpose
    if not lock.acquire(timeout):
        who = f" (held by {lock.holder()})" if isinstance(lock, (FileLock, CallerAndHostLock)) else ""
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
    """Refuse (lock_lost) if a lock this thread's operation holds is no longer ours, before `action`: called
    immediately before every publish of a completed instant and every rename or overwrite of a committed file.
    The refusal is one line: which lock, who holds it now and until when, and what was not published."""
    why = lost_lock()
    if why is not None:
        raise Refused(LOCK_LOST, f"lock lost: {why}; stopped before {action}: nothing of it was published")


def lost_lock() -> str | None:
    """Why a lock this thread's operation holds is no longer its own (None: every one is held)."""
    for lock in _HELD.get():
        why = lost_because(lock)
        if why is not None:
            return why
    return None


def lost_because(lock: TableLock) -> str | None:
    """Why `lock` is no longer held (None: it is). A lock that can be fenced (`fence() -> str | None`: the store's
    lock, through the host's `FileLock`) is asked to prove itself against its store; any other, `is_held`."""
    fence = getattr(lock, "fence", None)
    if callable(fence):
        why = fence()
        return None if why is None else str(why)
    return None if lock.is_held() else f"{lock!r} is no longer held (its lease ran out or was taken over)"


def holds_lock_outside_store() -> bool:
    """Whether this thread's operation holds a lock that serialises writers across hosts: any caller's
    `TableLock` but the host-local `FileLock` (the control plane's database lease is one). (A `FileLock` with the
    table's store lock serialises hosts too, but only a store that arbitrates writes itself can hold one.)"""
    return any(not isinstance(lock, FileLock) and lock.is_held() for lock in _HELD.get())


def table_lock_of(base_path: str, lock: TableLock | None) -> TableLock:
    """The table's file lock, with the caller's lock before it when there is one (the control plane's lease)."""
    if lock is None:
        return FileLock(base_path)
    if isinstance(lock, (FileLock, CallerAndHostLock)):
        return lock
    return CallerAndHostLock(lock, base_path)


# (lock file, thread) -> how many CallerAndHostLocks of this thread hold that host file lock
_HOST_HELD: dict[tuple[str, int], int] = {}
_HOST_HELD_LOCK = threading.Lock()


class CallerAndHostLock:
    """A caller's lock (the control plane's database lease) and the table's host file lock, in that order: the
    lease keeps out the control plane's other workers, the file lock the processes of this host that know no
    lease (the CLI, the Python API). Without the file lock a CLI schedule and a control-plane run on one host
    could plan two compactions at once, or a write land in a slice a plan was replacing. Nested in one thread (an
    operation's own rollback under it) the file lock is taken once; the caller's lock is re-entrant itself."""

    def __init__(self, caller: TableLock, base_path: str) -> None:
        self.caller = caller
        self.file = FileLock(base_path)
        self.base_path = base_path
        self._nested: list[bool] = []   # per acquire not yet released: whether it found the file lock held

    def _key(self) -> tuple[str, int]:
        return locking.lock_file_path(self.base_path), threading.get_ident()

    def acquire(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + max(timeout_s, 0.0)
        if not self.caller.acquire(timeout_s):
            return False
        key = self._key()
        with _HOST_HELD_LOCK:
            if key in _HOST_HELD:
                _HOST_HELD[key] += 1
                self._nested.append(True)
                return True
        try:
            granted = self.file.acquire(max(deadline - time.monotonic(), 0.0))
        except BaseException:   # the lock file cannot be opened (permissions, a vanished folder): nothing held
            self.caller.release()
            raise
        if not granted:
            self.caller.release()
            return False
        with _HOST_HELD_LOCK:
            _HOST_HELD[key] = 1
        self._nested.append(False)
        return True

    def release(self) -> None:
        if not self._nested:
            return
        nested = self._nested.pop()
        key = self._key()
        with _HOST_HELD_LOCK:
            if key in _HOST_HELD:
                _HOST_HELD[key] -= 1
                if not _HOST_HELD[key]:
                    del _HOST_HELD[key]
        if not nested:
            self.file.release()
        self.caller.release()

    def is_held(self) -> bool:
        return self.caller.is_held() and bool(self._nested) and (self._nested[0] or self.file.is_held())

    def fence(self) -> str | None:
        """The caller's lock by `lost_because`, then (unless an outer hold owns it) the host's file lock's fence."""
        why = lost_because(self.caller) if self._nested else f"{self!r} is not held"
        if why is None and not self._nested[0]:
            why = self.file.fence()
        return why

    def holder(self) -> str:
        return self.file.holder()

    def __repr__(self) -> str:
        return f"CallerAndHostLock({self.caller!r}, {self.base_path!r})"


def host_lock_held(base_path: str) -> bool:
    """Whether this thread holds the table's host file lock through a CallerAndHostLock."""
    with _HOST_HELD_LOCK:
        return (locking.lock_file_path(base_path), threading.get_ident()) in _HOST_HELD
