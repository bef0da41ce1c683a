"""What a table's file-system view is made of: base files, log files, file slices and file groups.

Their own module so that the view (`engine.slices.fsview`) and v8's completion-time slicing
(`engine.slices.slicing_v8`) both build on them without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BaseFile:
    name: str
    path: str
    file_id: str
    instant: str
    size: int


@dataclass(frozen=True)
class LogFile:
    name: str
    path: str
    file_id: str
    base_instant: str
    version: int
    write_token: str
    size: int

    @property
    def sort_key(self) -> tuple[int, str]:
        return (self.version, self.write_token)


@dataclass
class FileSlice:
    partition_path: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: list[LogFile] = field(default_factory=list)


@dataclass
class FileGroup:
    partition_path: str
    file_id: str
    slices: list[FileSlice] = field(default_factory=list)   # oldest first

    @property
    def latest(self) -> FileSlice:
        return self.slices[-1]
