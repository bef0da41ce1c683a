"""Fault injection: stop the process (or raise) at a named step boundary of a table operation.

`TIDEMARK_FAULT=<operation>:<step>[:raise]` makes `fault_point(operation, step)` call `os._exit`
(a kill: no `finally`, no cleanup, like SIGKILL) or raise `InjectedFault`. Unset, a fault point costs
one environment lookup. `STEPS` lists every boundary in the order an operation crosses them, so the
tests can walk all of them; naming an unknown point is a programming error.
"""
from __future__ import annotations

import os

from engine.errors import TidemarkError

ENV = "TIDEMARK_FAULT"
EXIT_CODE = 86

STEPS: dict[str, tuple[str, ...]] = {
    "write": ("requested", "inflight", "tasks", "reconciled", "completed"),
    "schedule": ("planned", "requested"),
    "execute": ("inflight", "tasks", "completed", "published"),
    "carry_over": ("base_written", "linked"),
    "commit": ("temp_written",),
    "clean": ("requested", "inflight", "deleted", "completed"),
    "rollback": ("requested", "inflight", "unpublished", "files_removed", "instant_removed", "completed"),
}


class InjectedFault(TidemarkError):
    """Raised by a fault point in `raise` mode."""


def fault_point(operation: str, step: str) -> None:
    """Crash here when TIDEMARK_FAULT names this point."""
    if step not in STEPS.get(operation, ()):
        raise ValueError(f"unknown fault point {operation}:{step}")
    spec = os.environ.get(ENV)
    if not spec:
        return
    op, _, rest = spec.partition(":")
    st, _, mode = rest.partition(":")
    if (op, st) != (operation, step):
        return
    if mode == "raise":
        raise InjectedFault(f"injected fault at {operation}:{step}")
    os._exit(EXIT_CODE)
