"""Finding the Hudi tables under a root: every folder holding `.hoodie/hoodie.properties`.

The walk lists one folder at a time through engine.io.listing.list_folder (the storage call an `s3://`
layer replaces). It does not descend into
- a table's own folders once it is found (partitions hold data files, not more tables, and a big table
  has thousands of them), so its metadata table (`.hoodie/metadata`, itself a Hudi table) and any other
  table under `.hoodie/` are never reported;
- hidden folders (`.hoodie`, `.spark-staging`, `_temporary`-style dot folders).
Results come back sorted by path, so two walks of the same tree report the same list.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from engine.config.properties import HOODIE_DIR, PROPERTIES_FILE
from engine.io.listing import list_folder

MAX_DEPTH = 32   # a symlink loop ends here rather than walking forever


@dataclass(frozen=True)
class FoundTable:
    path: str          # absolute base path
    relative: str      # relative to the root ("." for the root itself)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "relative": self.relative}


def is_table(folder: str) -> bool:
    """`folder/.hoodie/hoodie.properties` exists (checked by listing `.hoodie`, as on an object store)."""
    try:
        return any(e.name == PROPERTIES_FILE for e in list_folder(os.path.join(folder, HOODIE_DIR)).files)
    except (FileNotFoundError, NotADirectoryError):
        return False


def enclosing_table(path: str) -> str | None:
    """The nearest folder above `path` (a resolved location) that is a Hudi table, or None. On an object store
    one HEAD per level, the bucket's root included."""
    from engine.io import storage

    here = path.rstrip("/")
    while True:
        up = storage.parent(here)
        if not up or up == here or up.endswith(":/") or up.endswith(":"):
            return None
        try:
            found = storage.file_exists(storage.join(up, HOODIE_DIR, PROPERTIES_FILE))
        except OSError:   # a level the credentials may not read (S3 answers 403 outside a prefix-scoped policy)
            found = False
        if found:
            return up
        here = up


def find_tables(root: str) -> list[FoundTable]:
    """Every table at or under `root` (FileNotFoundError when `root` is not a folder). On an object store the
    same walk costs one delimited LIST per folder above the tables (a table's own folders are never listed)."""
    from engine.io import storage

    root = root.rstrip("/") if storage.is_remote(root) else os.path.abspath(root)
    found: list[FoundTable] = []
    stack = [(root, 0, _folders(root))]   # raises for a missing root, before any walking
    while stack:
        folder, depth, folders = stack.pop()
        if HOODIE_DIR in folders and _holds_table(folder):
            found.append(FoundTable(folder, storage.relative(folder, root) or "."))
            continue
        if depth >= MAX_DEPTH:
            continue
        for name in folders:
            if name.startswith("."):
                continue
            child = storage.join(folder, name)
            try:
                stack.append((child, depth + 1, _folders(child)))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue   # vanished or unreadable: not a table we can manage anyway
    return sorted(found, key=lambda t: t.path)


def _folders(folder: str) -> list[str]:
    """The names of the folders directly in `folder` (FileNotFoundError when it is none)."""
    from engine.io import storage

    if storage.is_remote(folder):
        return [e.name for e in storage.list_entries(folder) if e.is_dir]
    return list(list_folder(folder).folders)


def _holds_table(folder: str) -> bool:
    from engine.io import storage

    if storage.is_remote(folder):
        return storage.file_exists(storage.join(folder, HOODIE_DIR, PROPERTIES_FILE))
    return is_table(folder)
