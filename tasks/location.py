"""Where a registered table physically is: its canonical location, and whether that is still allowed.

A registration is only a name for a path; two names (an alias folder, a symlink, a trailing slash, a
`file://` URI) may reach the same table. Everything that must be unique per *table* — the lease above all —
is keyed by the canonical location: the path with `file://` dropped and every symlink resolved
(`os.path.realpath`). The engine is then opened at that resolved location, so a link swapped after the
check cannot redirect the run.

The allow-list (`TIDEMARK_TABLE_ROOTS`) is checked on the resolved location on every run, inside the
lease, not only at registration: a registered folder replaced by a link to a table outside the roots is
refused. `open_table` is the workers' one way to open a registered table (tests/tasks/test_location.py holds them
to it).
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.conf import settings

from engine import Refused, Table, is_object_store, is_within, resolve_location

OUTSIDE_ROOTS = "outside_roots"
LOCATION_CHANGED = "location_changed"


def canonical(path: str) -> str:
    """The physical location of `path`: `file://` URIs become paths, symlinks are resolved, no trailing /."""
    if "\x00" in path:
        raise ValueError(f"table path {path!r} contains a NUL byte")
    if is_object_store(path):   # no links on a store: the URI itself (no trailing /) is the location
        return resolve_location(path)
    if path.startswith("file:"):
        path = unquote(urlparse(path).path)
    if not os.path.isabs(path):
        raise ValueError(f"table path {path!r} is not absolute")
    return os.path.realpath(path)


def roots() -> list[Path]:
    """The local roots, links resolved."""
    return [Path(os.path.realpath(r)) for r in settings.TIDEMARK_TABLE_ROOTS if not is_object_store(r)]


def is_allowed(location: str) -> bool:
    if is_object_store(location):
        return any(is_within(location, resolve_location(r)) for r in settings.TIDEMARK_TABLE_ROOTS
                   if is_object_store(r))
    where = Path(location)
    return any(where == root or root in where.parents for root in roots())


def checked(path: str) -> str:
    """The canonical location of `path`, refused (`outside_roots`) when it is outside TIDEMARK_TABLE_ROOTS."""
    location = canonical(path)
    if not is_allowed(location):
        raise Refused(OUTSIDE_ROOTS, f"table path {path} resolves to {location}, outside the allowed table roots "
                                     f"({', '.join(map(str, settings.TIDEMARK_TABLE_ROOTS))}); nothing was done")
    return location


def open_table(path: str) -> Table:
    """The engine's table at the canonical location of `path`, refused (`outside_roots`) outside the roots."""
    return Table.open(checked(path))
