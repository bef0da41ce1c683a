"""What every store answers: the one interface the local file system, S3 and other `pyarrow.fs` stores implement.

A store here makes requests and nothing else: what one table operation shares between its reads (kept metadata,
answers asked ahead, prefetched logs) lives in `engine.io.storage.operation`, and `engine.io.storage` combines
the two for callers. Each method makes the requests its docstring says, on the store that holds the path.
"""
from __future__ import annotations

import abc
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from engine.errors import TidemarkError


class PublishConflict(TidemarkError):
    """A file we create-if-absent already exists: another writer published it first."""


@dataclass(frozen=True)
class Entry:
    """One listed file or folder. Remote stores have no links: `is_link` is False there."""

    name: str
    path: str
    is_dir: bool
    size: int
    mtime_ms: int
    is_link: bool = False
    etag: str = ""   # the object's ETag where the listing gives one (S3 `list_tree`): changes with its bytes


class Positional(abc.ABC):
    """Positional reads of one open file (`Store.positional`)."""

    size: int
    etags: set[str]   # ETags of the objects the reads came from, where the store says (S3)

    @abc.abstractmethod
    def pread(self, length: int, offset: int) -> bytes: ...

    def close(self) -> None:
        """Release what the reader holds (a descriptor, a remote file); nothing by default."""
        return None


class Store(abc.ABC):
    """A place bytes live. Capabilities say what a caller may rely on; the methods do the work."""

    # Symlinks, hard links, rename, append, fsync and flock: the POSIX guarantees the local layout was built on.
    posix: bool = False
    # Every request is a round trip worth overlapping with others (prefetching, asking ahead, reading whole).
    round_trips: bool = True
    # `write_bytes` over a file replaces it whole: a reader sees the old bytes or the new, never neither (an object
    # store's PUT; locally `write_replace`'s rename). HDFS and other streams do not: a reader may find no file.
    replaces_whole: bool = False

    def links(self) -> bool:
        """Whether the store has symlinks and hard links."""
        return self.posix

    @abc.abstractmethod
    def conditional_put(self, path: str) -> bool:
        """Whether the store itself arbitrates create-if-absent between racing writers."""

    def conditional_replace(self, path: str) -> bool:
        """Whether the store replaces an object only while it is the one a reader saw (`If-Match`): what a lock
        kept on the store itself needs."""
        return False

    # ------------------------------------------------------------------ queries

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    def file_exists(self, path: str) -> bool:
        """Whether a file (an object) is at `path`."""
        return self.exists(path)

    @abc.abstractmethod
    def is_file(self, path: str) -> bool: ...

    @abc.abstractmethod
    def is_dir(self, path: str) -> bool: ...

    def is_link(self, path: str) -> bool:
        return False

    def lexists(self, path: str) -> bool:
        """Exists, or is a (possibly dangling) link."""
        return self.exists(path)

    @abc.abstractmethod
    def size(self, path: str) -> int: ...

    @abc.abstractmethod
    def mtime_ms(self, path: str) -> int: ...

    @abc.abstractmethod
    def list_entries(self, path: str) -> list[Entry]:
        """The folder's direct children (FileNotFoundError when it does not exist)."""

    def list_names(self, path: str) -> list[str]:
        return [e.name for e in self.list_entries(path)]

    @abc.abstractmethod
    def list_names_if_dir(self, path: str) -> list[str]:
        """Names in a folder, [] when there is no such folder."""

    def list_starting_with(self, path: str, name_prefixes: Sequence[str]) -> list[Entry]:
        """The folder's files whose names start with one of `name_prefixes` ([] when none, or no folder)."""
        try:
            return [e for e in self.list_entries(path) if not e.is_dir and e.name.startswith(tuple(name_prefixes))]
        except FileNotFoundError:
            return []

    @abc.abstractmethod
    def list_tree(self, path: str, skip: str | None = None) -> list[Entry]:
        """Everything below `path` (`Entry.name` relative to it), leaving out the folder `skip` directly under it."""

    # ------------------------------------------------------------------ reading

    @abc.abstractmethod
    def read_whole(self, path: str) -> bytes:
        """The whole file (FileNotFoundError when missing)."""

    @abc.abstractmethod
    def open_input(self, path: str) -> Any:
        """A seekable reader."""

    def parquet_source(self, path: str) -> Any:
        """What pyarrow.parquet takes as a source."""
        return self.open_input(path)

    @abc.abstractmethod
    def positional(self, path: str, known_size: int | None = None) -> Positional:
        """Positional reads of `path`; `known_size` (a listing's) may spare a request for the size."""

    # ------------------------------------------------------------------ writing

    def make_dirs(self, path: str) -> None:
        """Create a folder and its parents (nothing by default: folders are key prefixes on a store)."""
        return None

    @abc.abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write (or overwrite) a whole file."""

    def write_replace(self, path: str, data: bytes) -> None:
        """Replace a file whole, readers seeing the old bytes or the new ones."""
        self.write_bytes(path, data)

    @abc.abstractmethod
    def open_output(self, path: str, exclusive: bool = False) -> contextlib.AbstractContextManager[IO[bytes] | Any]:
        """A writable stream for a whole new file, seen by readers only once complete."""

    @abc.abstractmethod
    def create_exclusive(self, path: str, data: bytes, staging_dir: str | None = None) -> str | None:
        """Create `path` holding `data` only if no file is there (PublishConflict otherwise); the ETag on S3."""

    def create_exclusive_pieces(self, path: str, pieces: Sequence[bytes | memoryview],
                                staging_dir: str | None = None) -> str | None:
        """`create_exclusive` of the bytes `pieces` make one after the other."""
        return self.create_exclusive(path, b"".join(pieces), staging_dir)

    @abc.abstractmethod
    def rename(self, src: str, dst: str) -> None: ...

    @abc.abstractmethod
    def copy(self, src: str, dst: str) -> None: ...

    def copy_new(self, src: str, dst: str, size: int | None = None) -> None:
        """`copy`, creating `dst` only where nothing is, where the store can refuse that."""
        self.copy(src, dst)

    @abc.abstractmethod
    def remove(self, path: str) -> None:
        """Delete a file (FileNotFoundError where the store says it is missing)."""

    @abc.abstractmethod
    def remove_tree(self, path: str) -> None:
        """Delete a folder and everything under it; nothing when it does not exist."""

