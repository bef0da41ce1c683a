"""Listing a folder: the one storage call of the change check and of table discovery.

`list_folder` returns the files (name, size, modification time) and the sub-folders directly in a folder
— what one LIST with delimiter "/" returns on an object store (objects and common prefixes) — so a
storage layer for `s3://` prefixes replaces this one function.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field


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
