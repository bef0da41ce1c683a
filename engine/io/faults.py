"""Fault injection: stop the process (or raise) at a named step boundary of a table operation.

`TIDEMARK_FAULT=<operation>:<step>[@<n>][:raise|:abort]` makes `fault_point(operation, step)` call `os._exit`
(a kill: no `finally`, no cleanup, like SIGKILL), raise `InjectedFault` (`raise`: a failure the operation's own
error handling sees), or raise `InjectedAbort` (`abort`: a BaseException no `except Exception` catches, so the
operation stops where it is without its own cleanup — a kill the calling test process survives; only `finally`
blocks run, which release what the kernel would release for a dead process). `@n` fires at the n-th crossing of
a step crossed repeatedly (`clean:deleting` after each deleted file), counted per process; default the first.
Unset, a fault point costs one environment lookup. `STEPS` lists every boundary in the order an operation crosses
them, so the tests can walk all of them; naming an unknown point is a programming error.
"""
from __future__ import annotations

import os
import threading

from engine import env
from engine.errors import TidemarkError

ENV = "TIDEMARK_FAULT"
EXIT_CODE = 86

STEPS: dict[str, tuple[str, ...]] = {
    "write": ("requested", "inflight", "tasks", "reconciled", "completed"),
    "schedule": ("planned", "requested"),
    "execute": ("inflight", "tasks", "completed", "published"),
    "carry_over": ("base_written", "linked"),
    "commit": ("temp_written",),
    "clean": ("requested", "inflight", "deleting", "deleted", "completed"),
    "archive": ("written", "deleting"),
    "rollback": ("requested", "inflight", "unpublished", "files_removed", "instant_removed", "completed"),
    # The streaming sink's commit of a micro-batch: rows staged, deltacommit done (Spark's commit log not yet).
    "stream": ("staged", "committed"),
}


class InjectedFault(TidemarkError):
    """Raised by a fault point in `raise` mode."""


class InjectedAbort(BaseException):
    """Raised by a fault point in `abort` mode: the operation dies here, its `except Exception` handlers skipped."""


_crossings: dict[str, int] = {}   # spec -> crossings of its point so far in this process
_crossings_lock = threading.Lock()   # an in-process compaction crosses its executor points on several threads


def reset_crossings() -> None:
    """Forget the crossings counted so far (a test that aborted an operation before its n-th crossing)."""
    _crossings.clear()


def fault_point(operation: str, step: str) -> None:
    """Crash here when TIDEMARK_FAULT names this point."""
    if step not in STEPS.get(operation, ()):
        raise ValueError(f"unknown fault point {operation}:{step}")
    spec = env.text(ENV)
    if not spec:
        return
    op, _, rest = spec.partition(":")
    st, _, mode = rest.partition(":")
    st, _, nth = st.partition("@")
    if (op, st) != (operation, step):
        return
    with _crossings_lock:
        _crossings[spec] = _crossings.get(spec, 0) + 1
        if _crossings[spec] < int(nth or 1):
            return
        _crossings.pop(spec)
    if mode == "raise":
        raise InjectedFault(f"injected fault at {operation}:{step}")
    if mode == "abort":
        raise InjectedAbort(f"injected abort at {operation}:{step}")
    os._exit(EXIT_CODE)
