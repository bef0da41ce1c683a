"""The local file system: POSIX calls, because hard-link publishing, relative symlinks for carry-over, `fsync` and
`flock` are the guarantees the local layout was built on."""
from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from typing import IO

from engine.io.storage.interface import Entry, Positional, PublishConflict, Store
from engine.io.storage.paths import relative


class LocalStore(Store):
    posix = True
    round_trips = False
    replaces_whole = True

    def conditional_put(self, path: str) -> bool:
        return True   # a hard link refuses an existing name

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def is_link(self, path: str) -> bool:
        return os.path.islink(path)

    def lexists(self, path: str) -> bool:
        return os.path.lexists(path)

    def size(self, path: str) -> int:
        """The file's size (a link weighs what its target weighs)."""
        return os.path.getsize(path)

    def mtime_ms(self, path: str) -> int:
        return int(os.stat(path).st_mtime * 1000)

    def list_entries(self, path: str) -> list[Entry]:
        out = []
        with os.scandir(path) as entries:
            for e in entries:
                st = e.stat() if e.is_file() else None
                out.append(Entry(e.name, e.path, e.is_dir(), st.st_size if st else 0,
                                 int(st.st_mtime * 1000) if st else 0, e.is_symlink()))
        return out

    def list_names(self, path: str) -> list[str]:
        return os.listdir(path)

    def list_names_if_dir(self, path: str) -> list[str]:
        return os.listdir(path) if os.path.isdir(path) else []

    def list_tree(self, path: str, skip: str | None = None) -> list[Entry]:
        out = []
        for root, dirs, files in os.walk(path):
            if skip is not None and root == path:
                dirs[:] = [d for d in dirs if d != skip]
            for d in dirs:
                out.append(Entry(relative(os.path.join(root, d), path), os.path.join(root, d), True, 0, 0))
            for f in files:
                out.append(Entry(relative(os.path.join(root, f), path), os.path.join(root, f), False, 0, 0))
        return out

    def read_whole(self, path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()

    def open_input(self, path: str) -> IO[bytes]:
        return open(path, "rb")   # noqa: SIM115 - the caller closes it

    def parquet_source(self, path: str) -> str:
        return path   # pyarrow opens a local path itself (memory-mapped where it helps)

    def positional(self, path: str, known_size: int | None = None) -> Positional:
        return _Descriptor(path)

    def make_dirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        with open(path, "wb") as fh:
            fh.write(data)

    def write_replace(self, path: str, data: bytes) -> None:
        """A temp file beside it, fsynced, renamed over it."""
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    @contextlib.contextmanager
    def open_output(self, path: str, exclusive: bool = False) -> Iterator[IO[bytes]]:
        # `exclusive` is the caller's: it writes a temp name and links that into place (`link_no_clobber`)
        with open(path, "wb") as fh:
            yield fh

    def create_exclusive(self, path: str, data: bytes, staging_dir: str | None = None) -> str | None:
        """Write `staging_dir`/<uuid> (default: a dot-temp beside `path`), fsync, hard-link it into place (the link
        refuses an existing name), unlink the temp."""
        return self.create_exclusive_pieces(path, (data,), staging_dir)

    def create_exclusive_pieces(self, path: str, pieces: Sequence[bytes | memoryview],
                                staging_dir: str | None = None) -> str | None:
        """`create_exclusive` written from the pieces where they lie: the file object's buffer gathers the small
        ones and a big one goes to the file without a copy, so the whole file is never joined in memory."""
        tmp = os.path.join(staging_dir or os.path.dirname(path), f".temp-{uuid.uuid4().hex}")
        with open(tmp, "wb") as fh:
            fh.writelines(pieces)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            link_no_clobber(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return None

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def copy(self, src: str, dst: str) -> None:
        shutil.copyfile(src, dst)

    def remove(self, path: str) -> None:
        os.unlink(path)   # a link, not its target

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)


def link_no_clobber(tmp: str, dest: str) -> None:
    """Hard-link local `tmp` to `dest`, refusing to replace a file (file systems without hard links: check,
    then rename — not race-free, but atomic to readers)."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise PublishConflict(f"{dest} already exists") from None
    except OSError:
        if os.path.exists(dest):
            raise PublishConflict(f"{dest} already exists") from None
        os.replace(tmp, dest)


class _Descriptor(Positional):
    def __init__(self, path: str) -> None:
        self._fd: int | None = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size
        self.etags = set()

    def pread(self, length: int, offset: int) -> bytes:
        assert self._fd is not None, "read after close"
        return os.pread(self._fd, length, offset)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
