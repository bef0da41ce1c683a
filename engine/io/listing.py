"""Listing a folder: the one storage call of the change check and of table discovery.

`list_folder` returns the files (name, size, modification time) and the sub-folders directly in a folder
— what one LIST with delimiter "/" returns on an object store (objects and common prefixes). An `s3://`
folder is listed through the storage layer (engine.io.storage.list_entries: one LIST); a local one is
scanned here, because the change check wants what the storage layer's local listing does not give:
nanosecond modification times, and dangling links or files vanishing mid-listing skipped, not raised.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from engine.io import storage


@dataclass(frozen=True)
class Entry:
    """One file of a listing: its name (relative to the listed folder), size and modification time."""

    name: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Listing:
    files: list[Entry] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)   # names, not paths


def list_folder(folder: str) -> Listing:
    """Files and sub-folders directly in `folder` (FileNotFoundError / NotADirectoryError when it is none).

    Symlinks are followed (carried-over logs and linked tables are what they point at); a dangling link
    is neither a file nor a folder.
    """
    if storage.is_remote(folder):
        entries = storage.list_entries(folder)
        return Listing([Entry(e.name, e.size, e.mtime_ms * 1_000_000) for e in entries if not e.is_dir],
                       [e.name for e in entries if e.is_dir])
    files, folders = [], []
    with os.scandir(folder) as it:
        for item in it:
            try:
                if item.is_dir(follow_symlinks=True):
                    folders.append(item.name)
                elif item.is_file(follow_symlinks=True):
                    stat = item.stat(follow_symlinks=True)
                    files.append(Entry(item.name, stat.st_size, stat.st_mtime_ns))
            except OSError:   # vanished between listing and stat: as if listed a moment later
                continue
    return Listing(files, folders)
