"""Stores reached through `pyarrow.fs` (GCS, HDFS, and whatever `FileSystem.from_uri` resolves), in the driver and in
the Spark executors' Python alike: Spark's own Hadoop readers have no object-store connector here. S3 builds on this
(`engine.io.storage.s3`) and replaces the calls where one boto3 request does what pyarrow needs several for."""
from __future__ import annotations

import contextlib
import datetime
import os
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from engine.io.storage import aws_env
from engine.io.storage.interface import Entry, Positional, PublishConflict, Store
from engine.io.storage.paths import GCS_SCHEMES, S3_SCHEMES, bucket_key, join, scheme

_LOCK = threading.Lock()
# (scheme[, bucket or host], the AWS environment) -> its file system
_FILESYSTEMS: dict[tuple[str | tuple[str | None, ...], ...], pafs.FileSystem] = {}

# How long a GCS request is retried (pyarrow's default is 15 minutes: a machine without Google credentials
# would seem to hang on every command before it says so).
GCS_RETRY_S = 20


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system holding `path` and the path inside it."""
    s = scheme(path)
    if not s:
        return pafs.LocalFileSystem(), os.path.abspath(path)
    key: tuple[str | tuple[str | None, ...], ...] = ((s, aws_env.env_key()) if s in S3_SCHEMES
                                                     else (s, urlsplit(path).netloc, aws_env.env_key()))
    with _LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is None:
            fs = _s3_filesystem() if s in S3_SCHEMES else _gcs_filesystem() if s in GCS_SCHEMES \
                else pafs.FileSystem.from_uri(path)[0]
            _FILESYSTEMS[key] = fs
    if s in S3_SCHEMES + GCS_SCHEMES:
        bucket, name = bucket_key(path)
        return fs, f"{bucket}/{name}".rstrip("/")
    return fs, pafs.FileSystem.from_uri(path)[1]


def _s3_filesystem() -> pafs.FileSystem:
    kwargs: dict[str, Any] = {}
    endpoint = aws_env.endpoint_url()
    if endpoint:
        parts = urlsplit(endpoint)
        kwargs["endpoint_override"] = parts.netloc or parts.path
        kwargs["scheme"] = parts.scheme or "https"
    if aws_env.region():
        kwargs["region"] = aws_env.region()
    # Credentials: the AWS SDK's default chain (env vars, AWS_PROFILE / config files, instance roles).
    return pafs.S3FileSystem(**kwargs)


def _gcs_filesystem() -> pafs.FileSystem:
    return pafs.GcsFileSystem(retry_time_limit=datetime.timedelta(seconds=GCS_RETRY_S))


def forget_after_fork() -> None:
    """A forked child must not share the AWS SDK's threads a pyarrow S3 file system holds, nor a lock some parent
    thread held at the fork: it makes its own."""
    global _LOCK
    _LOCK = threading.Lock()
    _FILESYSTEMS.clear()


def _info(path: str) -> pafs.FileInfo:
    fs, p = filesystem(path)
    return fs.get_file_info(p)


def _mtime_ms(info: pafs.FileInfo) -> int:
    return int(info.mtime.timestamp() * 1000) if info.mtime is not None else 0


class ArrowStore(Store):
    """No links, no rename, no `flock`: callers copy (server-side where the store can) and publish with a
    conditional put where the store arbitrates one, else under a lock outside the store."""

    def conditional_put(self, path: str) -> bool:
        return False

    def exists(self, path: str) -> bool:
        return bool(_info(path).type != pafs.FileType.NotFound)

    def is_file(self, path: str) -> bool:
        return bool(_info(path).type == pafs.FileType.File)

    def is_dir(self, path: str) -> bool:
        """A folder (on an object store: a prefix with at least one object, or a directory marker)."""
        return bool(_info(path).type == pafs.FileType.Directory)

    def size(self, path: str) -> int:
        info = _info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(path)
        return int(info.size or 0)

    def mtime_ms(self, path: str) -> int:
        info = _info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(path)
        return _mtime_ms(info)

    def list_entries(self, path: str) -> list[Entry]:
        """One listing request (with one more to tell an empty folder from a missing one)."""
        fs, p = filesystem(path)
        infos = fs.get_file_info(pafs.FileSelector(p, allow_not_found=True))
        if not infos and fs.get_file_info(p).type != pafs.FileType.Directory:
            raise FileNotFoundError(path)
        return [Entry(i.base_name, join(path, i.base_name), i.type == pafs.FileType.Directory, int(i.size or 0),
                      _mtime_ms(i)) for i in infos]

    def list_names_if_dir(self, path: str) -> list[str]:
        fs, p = filesystem(path)
        return [i.base_name for i in fs.get_file_info(pafs.FileSelector(p, allow_not_found=True))]

    def list_tree(self, path: str, skip: str | None = None) -> list[Entry]:
        fs, p = filesystem(path)
        prefix = p.rstrip("/") + "/"
        out = []
        for i in fs.get_file_info(pafs.FileSelector(p, recursive=True, allow_not_found=True)):
            rel = i.path[len(prefix):] if i.path.startswith(prefix) else i.base_name
            if skip is not None and (rel == skip or rel.startswith(skip + "/")):
                continue
            out.append(Entry(rel, join(path, rel), i.type == pafs.FileType.Directory, int(i.size or 0), _mtime_ms(i)))
        return out

    def read_whole(self, path: str) -> bytes:
        fs, p = filesystem(path)
        try:
            with fs.open_input_stream(p) as fh:
                data: bytes = fh.read()
                return data
        except FileNotFoundError:
            raise
        except OSError as exc:
            if "not found" in str(exc).lower() or "NoSuchKey" in str(exc):
                raise FileNotFoundError(path) from exc
            raise

    def open_input(self, path: str) -> Any:
        """A pyarrow RandomAccessFile (ranged reads)."""
        fs, p = filesystem(path)
        return fs.open_input_file(p)

    def positional(self, path: str, known_size: int | None = None) -> Positional:
        return _ArrowFile(self.open_input(path))

    def write_bytes(self, path: str, data: bytes) -> None:
        fs, p = filesystem(path)
        with fs.open_output_stream(p) as out:
            out.write(data)

    @contextlib.contextmanager
    def open_output(self, path: str, exclusive: bool = False) -> Iterator[Any]:
        fs, p = filesystem(path)
        with fs.open_output_stream(p) as out:
            yield out

    def create_exclusive(self, path: str, data: bytes, staging_dir: str | None = None) -> str | None:
        """Check, then write: this store cannot refuse a second writer, so callers hold a lock outside it."""
        if self.exists(path):
            raise PublishConflict(f"{path} already exists")
        self.write_bytes(path, data)
        return None

    def rename(self, src: str, dst: str) -> None:
        fs, s = filesystem(src)
        fs.move(s, filesystem(dst)[1])

    def copy(self, src: str, dst: str) -> None:
        """Server-side where the store does it (no bytes through this process)."""
        fs, s = filesystem(src)
        fs.copy_file(s, filesystem(dst)[1])

    def remove(self, path: str) -> None:
        fs, p = filesystem(path)
        if fs.get_file_info(p).type == pafs.FileType.NotFound:
            raise FileNotFoundError(path)
        fs.delete_file(p)

    def remove_tree(self, path: str) -> None:
        fs, p = filesystem(path)
        try:
            fs.delete_dir_contents(p, missing_dir_ok=True)
        except FileNotFoundError:
            return
        with contextlib.suppress(OSError):
            fs.delete_dir(p)


class _ArrowFile(Positional):
    def __init__(self, file: Any) -> None:
        self._file = file
        self.size = int(file.size())
        self.etags = set()

    def pread(self, length: int, offset: int) -> bytes:
        return bytes(self._file.read_at(length, offset))

    def close(self) -> None:
        self._file.close()
os.register_at_fork(after_in_child=forget_after_fork)
