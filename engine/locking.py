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
import os
import time
from typing import Iterator

from engine.errors import TidemarkError

LOCK_FILE = ".tidemark.lock"
# Held for a whole compaction run (long), so it is not the table lock: writers go on meanwhile.
COMPACTION_LOCK_FILE = ".tidemark.compaction.lock"


class TableLocked(TidemarkError):
    """Another process holds the table lock longer than we were willing to wait."""


@contextlib.contextmanager
def table_lock(base_path: str, purpose: str, timeout_s: float | None = None,
               lock_file: str = LOCK_FILE) -> Iterator[None]:
    """Hold the table's lock; wait up to `timeout_s` (env TIDEMARK_LOCK_TIMEOUT, default 600 s)."""
    timeout = float(os.environ.get("TIDEMARK_LOCK_TIMEOUT", "600")) if timeout_s is None else timeout_s
    path = os.path.join(base_path, ".hoodie", lock_file)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                    raise TableLocked(f"table {base_path} is locked by {holder}; gave up after {timeout:.0f} s "
                                      f"waiting to {purpose}") from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({purpose})".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def publish_no_clobber(tmp: str, dest: str) -> None:
    """Move a finished file into place, refusing to replace an existing one (a committed file is never
    overwritten, whoever else wrote it)."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise TidemarkError(f"{dest} already exists: another writer produced the same file name") from None
    os.unlink(tmp)
