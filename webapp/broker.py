"""The embedded default broker (kombu's filesystem transport) made safe for processes that start or die at once.

kombu keeps each exchange's bindings as a JSON list in `<control folder>/<exchange>.exchange`. The first process
to bind creates the file by opening it for writing (which truncates it) and only then takes its lock and writes;
a second process that sees the file in between reads it empty, and a process killed in between (kill -9, the
OOM killer) leaves it empty for good: from then on every publish and every worker start fails with a JSON error
(seen as a flaky test: a worker SIGKILLed while it started). So every process that configures the app, before it
binds anything, creates the exchange files it will use whole (written aside, then linked into place: a file
exists only with its content), and gives an empty one left by a crash the empty list it stands for, under
kombu's own lock (a creator writing meanwhile writes after us, over it). kombu then only ever takes its
read-modify-write path, which holds the lock throughout.
"""
from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

# Celery's remote-control (pidbox) fanout exchanges, bound by every worker and by whoever broadcasts.
CONTROL_EXCHANGES = ("celery.pidbox", "reply.celery.pidbox")
_NO_BINDINGS = b"[]"


def seed_exchanges(control_folder: Path, exchanges: Iterable[str]) -> None:
    """Each exchange file created with no bindings where missing, and every empty one in the folder repaired."""
    control_folder.mkdir(parents=True, exist_ok=True)
    for name in exchanges:
        _create_whole(control_folder / f"{name}.exchange")
    for path in control_folder.glob("*.exchange"):
        _repair_if_empty(path)


def _create_whole(path: Path) -> None:
    if path.exists():
        return
    aside = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    aside.write_bytes(_NO_BINDINGS)
    try:
        os.link(aside, path)   # fails if another process created it meanwhile: theirs stands
    except FileExistsError:
        pass
    finally:
        aside.unlink()


def _repair_if_empty(path: Path) -> None:
    try:
        with open(path, "rb+", buffering=0) as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)   # kombu's lock (kombu.transport.filesystem uses flock on POSIX)
            if not fh.read():
                fh.write(_NO_BINDINGS)
    except FileNotFoundError:
        pass
