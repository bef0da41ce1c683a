"""The cheap change check of a table: one listing of `.hoodie/` says whether anything may have changed.

Every change to a Hudi table's data or state goes through its timeline (docs/HUDI-FORMAT.md §3.1): a
deltacommit, a compaction, a clean, a rollback or a replacecommit each add instant files directly under
`.hoodie/` (requested → inflight → completed), a rollback or an archival removes some, and a changed
`hoodie.properties` changes its size or modification time. So the names, sizes and modification times of
the files directly under `.hoodie/` — one LIST on object storage, one `scandir` locally — fingerprint
everything a full sample (freshness, backlog, tide: many reads) would read. Two equal marks mean nothing
committed or started in between; the control plane samples a table fully only when its mark moved.

Sub-folders (`metadata/`, `archived/`, `.aux/`, `.heartbeat/`, `.temp/`) are not descended: they change
only alongside an instant file of the active timeline, or (heartbeats) while a writer is alive, which
says nothing new about committed data.

The listing is engine.io.listing.list_folder (a local scan, or one LIST through engine.io.storage for `s3://`).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.config.properties import HOODIE_DIR
from engine.errors import TableNotFoundError
from engine.io.listing import Entry, list_folder
from engine.timeline import layout_v8
from engine.timeline.actions import State
from engine.timeline.instants import parse_instant_file_name

PROPERTIES_FILE = "hoodie.properties"
STATES = tuple(State)   # in progress order: an instant's files sort by it


@dataclass(frozen=True)
class TimelineMark:
    """The fingerprint of a table's `.hoodie/` listing; equal marks mean an unchanged table."""

    digest: str                 # sha256 over every (name, size, mtime) of the listing, sorted by name
    newest_instant: str | None  # the newest instant file's name, e.g. "20260101120000000.deltacommit"
    files: int                  # files directly under .hoodie/

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "newest_instant": self.newest_instant, "files": self.files}


def timeline_mark(base_path: str) -> TimelineMark:
    """The mark of the table at `base_path`; TableNotFoundError when it has no `.hoodie/hoodie.properties`."""
    folder = os.path.join(base_path, HOODIE_DIR)
    try:
        entries = list_folder(folder).files
    except (FileNotFoundError, NotADirectoryError):
        raise TableNotFoundError(f"no Hudi table at {base_path}: {folder} does not exist") from None
    if not any(e.name == PROPERTIES_FILE for e in entries):
        raise TableNotFoundError(f"no Hudi table at {base_path}: {folder}/{PROPERTIES_FILE} is missing")
    timeline = os.path.join(folder, layout_v8.DEFAULT_TIMELINE_DIR)
    if os.path.isdir(timeline):   # table version 8: the instants live one folder down
        entries = [*entries, *list_folder(timeline).files]
    return mark_of(entries)


def mark_of(entries: Iterable[Entry]) -> TimelineMark:
    """The mark of a listing (separate from the listing so any storage's entries can be marked). Tidemark's lock
    files (`.tidemark*.lock`, rewritten by every holder) say who holds a lock, not what changed: left out."""
    ordered = sorted((e for e in entries if not _is_lock_file(e.name)), key=lambda e: e.name)
    digest = hashlib.sha256()
    for e in ordered:
        digest.update(f"{e.name}\0{e.size}\0{e.mtime_ns}\n".encode())
    # newest instant, and of its files the most advanced state (completed over inflight over requested)
    instants = [(parsed.timestamp, STATES.index(parsed.state.value), e.name)
                for e in ordered
                if (parsed := parse_instant_file_name(e.name) or parse_instant_file_name(e.name, layout_v8.LAYOUT_VERSION))]
    newest = max(instants)[2] if instants else None
    return TimelineMark(digest.hexdigest(), newest, len(ordered))


def _is_lock_file(name: str) -> bool:
    return name.startswith(".tidemark") and name.endswith(".lock")
