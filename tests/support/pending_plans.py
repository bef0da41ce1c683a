"""A pending event-time compaction plan on a table_model table with late writes into its slice, and what the
table looks like around it: shared by the engine's plan-admin tests and the control plane's plan-admin runs."""
from __future__ import annotations

import os

from engine import Table
from engine.read.query import read_arrow
from tests.support.table_model import E, T, new_table, write

LATE = [("upsert", [(5, E + 4000)]), ("upsert", [(5, E + 4200)])]   # one key: one file group, two logs


def ours(path: str) -> dict[str, int]:
    t = read_arrow(path)
    return dict(zip(t.column("id").to_pylist(), t.column("ts").to_pylist()))


def files(path: str) -> dict[str, str]:
    """Every file and link of the table with what it is (content size or link target)."""
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, path)] = os.readlink(p) if os.path.islink(p) else str(os.path.getsize(p))
    return out


def pending_with_late_writes(path: str, late=LATE, make=new_table) -> tuple[Table, str]:
    """A table made by `make` with a pending event-time plan, then `late` written into the plan's slice."""
    make(path)
    table = Table.open(path)
    c = table.schedule_compaction(threshold=T, carry_over="symlink").instant
    assert c is not None
    for op, rows in late:
        write(path, op, rows)
    return table, c


def group_of_late_writes(table: Table, c: str) -> str:
    written = [g for g in table.validate_compaction(c).file_groups if g.logs_written_since]
    assert len(written) == 1
    return written[0].file_id
