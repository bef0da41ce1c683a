"""A per-table lock for the critical sections that must not interleave on one machine.

A writer (from computing its targets to completing its deltacommit), a compaction scheduler (from the
trigger check to the written plan) and a cleaner each hold it. Without it a write could start between
the trigger's "nothing pending" check and the plan, land its logs in the old slice, and vanish from the
new one. It is an advisory `flock` on `.hoodie/.tidemark.lock`: it serialises processes on one host.
Writers on several hosts need the control plane's database lock, which wraps the same sections.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator

from engine import env
from engine.errors import LOCK_UNAVAILABLE, Refused
from engine.io import storage

LOCK_FILE = ".tidemark.lock"
# Held for a whole compaction run (long), so it is not the table lock: writers go on meanwhile.
COMPACTION_LOCK_FILE = ".tidemark.compaction.lock"


class TableLocked(Refused):
    """Another process holds the table lock longer than we were willing to wait."""

    def __init__(self, message: str) -> None:
        super().__init__(LOCK_UNAVAILABLE, message)


def default_timeout_s() -> float:
    """How long a timeline-changing operation waits for the table lock (env TIDEMARK_LOCK_TIMEOUT, 600 s)."""
    return env.number("TIDEMARK_LOCK_TIMEOUT", 600.0, unit="seconds", minimum=0, exclusive=False)


def lock_file_path(base_path: str, lock_file: str = LOCK_FILE) -> str:
    """Where the flock lives: `.hoodie/<lock_file>` of a local table. An object store has no flock, so a
    remote table's lock file is on this host (TIDEMARK_LOCK_DIR, default <tmp>/tidemark-locks), named for
    the table's URI: it serialises the processes of one host, as the local lock does; writers on several
    hosts rely on the store's conditional put and the control plane's database lease."""
    if not storage.is_remote(base_path):
        return os.path.join(base_path, ".hoodie", lock_file)
    directory = env.text("TIDEMARK_LOCK_DIR") or os.path.join(tempfile.gettempdir(), "tidemark-locks")
    os.makedirs(directory, exist_ok=True)
    digest = hashlib.sha256(base_path.rstrip("/").encode("utf-8")).hexdigest()[:24]
    return os.path.join(directory, f"{digest}{lock_file}")


def open_lock_file(base_path: str, lock_file: str = LOCK_FILE) -> int:
    return os.open(lock_file_path(base_path, lock_file), os.O_RDWR | os.O_CREAT, 0o644)


def flock_within(fd: int, timeout_s: float) -> bool:
    """Take the exclusive flock on `fd`, polling until `timeout_s` passed; False if never granted."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def record_holder(fd: int, purpose: str) -> None:
    """Write who holds the lock into the lock file, for the message of whoever waits in vain."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} ({purpose})".encode(), 0)


def read_holder(fd: int) -> str:
    return os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"


@contextlib.contextmanager
def table_lock(base_path: str, purpose: str, timeout_s: float | None = None,
               lock_file: str = LOCK_FILE) -> Iterator[None]:
    """Hold the table's lock; wait up to `timeout_s` (env TIDEMARK_LOCK_TIMEOUT, default 600 s)."""
    timeout = default_timeout_s() if timeout_s is None else timeout_s
    fd = open_lock_file(base_path, lock_file)
    try:
        if not flock_within(fd, timeout):
            raise TableLocked(f"table {base_path} is locked by {read_holder(fd)}; gave up after {timeout:.0f} s "
                              f"waiting to {purpose}")
        record_holder(fd, purpose)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
