"""Where a table's bytes live: one storage layer for every read, write, list, rename, delete, link and copy.

A table is named by a path or a URI (`paths`). Each path's store (`stores.store_for`) implements one interface
(`interface.Store`): the local file system (`local`: POSIX, hard-link publishing, symlinks, fsync), S3 (`s3`,
`s3_client`, `s3_upload`: conditional puts the store arbitrates, one request per answer) and any other
`pyarrow.fs` store (`arrowfs`). What one table operation shares between its reads — kept metadata, answers asked
ahead, prefetched logs — is `operation`'s. The functions here are what callers use: each asks the path's store,
and keeps the operation's shared reads true of what this process writes.

Object stores have no links, no rename and no `flock`, so a store says what it can do (`links`,
`conditional_put`, `round_trips`) and the callers choose: carry-over copies (server-side, S3 CopyObject), and
completed instants are published with a conditional put (`If-None-Match: *`), which the store itself arbitrates
between racing writers.

Credentials and endpoint of `s3://` come from the standard AWS chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, AWS_PROFILE, AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3).
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import os
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import IO, Any

import pyarrow as pa

from engine.io import threads
from engine.io.storage import operation as _op
from engine.io.storage.arrowfs import GCS_RETRY_S, filesystem
from engine.io.storage.aws_env import endpoint_url, region
from engine.io.storage.interface import Entry, Positional, PublishConflict, Store
from engine.io.storage.local import link_no_clobber
from engine.io.storage.operation import (
    ask_ahead,
    clear_kept_immutable,
    drop_asked,
    has_shared_read,
    immutable_reads_needed,
    listed_etag,
    listed_names,
    operation_reads,
    prefetched,
    read_bytes,
    read_current,
    read_immutable,
    read_optional,
    read_shared,
    read_shared_all,
    shared_read_tagged,
)
from engine.io.storage.paths import (
    absolute_location,
    is_remote,
    is_within,
    join,
    name_of,
    on_s3,
    parent,
    relative,
    resolve,
    scheme,
    split_locations,
)
from engine.io.storage.s3 import get_tagged, ordered_listings
from engine.io.storage.s3_api import (
    conditional_put as _s3_conditional_put,
)
from engine.io.storage.s3_api import (
    is_store_client_error,
    s3_client,
    still_tagged,
)
from engine.io.storage.s3_upload import UPLOAD_PART_BYTES, S3Upload
from engine.io.storage.stores import store_for

__all__ = [
    "Entry", "GCS_RETRY_S", "Positional", "PublishConflict", "Publisher", "RangeReader", "S3Upload", "Store",
    "UPLOAD_PART_BYTES", "absolute_location", "ask_ahead", "buffer_reader", "clear_kept_immutable",
    "conditional_put", "conditional_replace", "copy", "copy_new", "create_exclusive", "drop_asked", "endpoint_url", "exists",
    "file_exists", "filesystem", "has_shared_read", "immutable_reads_needed", "is_dir", "is_file", "is_link", "is_remote",
    "is_store_client_error", "is_within", "join", "lexists", "link_no_clobber", "list_entries", "list_names",
    "list_names_if_dir", "list_names_validated", "list_starting_with", "list_tree", "listed_etag",
    "listed_names", "make_dirs", "mtime_ms", "name_of", "on_s3", "open_input", "open_output", "operation_reads",
    "ordered_listings", "parent", "parquet_source", "prefetched", "publish_new", "publishing", "read_bytes",
    "read_current", "read_immutable", "read_optional", "read_shared", "read_shared_all", "read_tagged",
    "read_text", "region", "relative", "remove", "remove_if_exists", "remove_tree", "rename",
    "replace_if_match", "replaces_whole", "resolve", "s3_client", "scheme", "shared_read_tagged", "size", "split_locations",
    "still_tagged", "store_for", "supports_links", "upload", "write_bytes", "write_replace",
]


def supports_links(path: str) -> bool:
    """Whether the store has symlinks and hard links (only the local file system)."""
    return store_for(path).links()


def conditional_put(path: str) -> bool:
    """Whether the store arbitrates create-if-absent itself: the local file system (hard links) and S3
    (`If-None-Match: *`, unless TIDEMARK_S3_CONDITIONAL_PUT=false says this S3-compatible store lacks it)."""
    return store_for(path).conditional_put(path)


def replaces_whole(path: str) -> bool:
    """Whether writing over a file replaces it whole for readers (local rename, an object store's PUT)."""
    return store_for(path).replaces_whole


def conditional_replace(path: str) -> bool:
    """Whether the store replaces an object only while it is the one a reader saw (S3's `If-Match`)."""
    return store_for(path).conditional_replace(path)


# ------------------------------------------------------------------ queries


def exists(path: str) -> bool:
    return store_for(path).exists(path)


def file_exists(path: str) -> bool:
    """Whether a file (an object, on S3) is at `path`: one HEAD on S3 (or the one asked ahead)."""
    return _op.s3_file_exists(path) if on_s3(path) else store_for(path).file_exists(path)


def is_file(path: str) -> bool:
    return store_for(path).is_file(path)


def is_dir(path: str) -> bool:
    """A folder (on S3: a prefix with at least one object, or a directory marker)."""
    return store_for(path).is_dir(path)


def is_link(path: str) -> bool:
    return store_for(path).is_link(path)


def lexists(path: str) -> bool:
    """Exists, or is a (possibly dangling) link."""
    return store_for(path).lexists(path)


def size(path: str) -> int:
    """The file's size (a local link weighs what its target weighs)."""
    return store_for(path).size(path)


def mtime_ms(path: str) -> int:
    return store_for(path).mtime_ms(path)


def list_entries(path: str) -> list[Entry]:
    """The folder's direct children (FileNotFoundError when it does not exist). One LIST on S3."""
    return store_for(path).list_entries(path)


def list_names(path: str) -> list[str]:
    """Names in a folder (FileNotFoundError when it does not exist)."""
    return store_for(path).list_names(path)


def list_names_if_dir(path: str) -> list[str]:
    """Names in a folder, [] when there is no such folder (one request on S3)."""
    return store_for(path).list_names_if_dir(path)


def list_starting_with(path: str, name_prefixes: Sequence[str]) -> list[Entry]:
    """The folder's direct children (files) whose names start with one of `name_prefixes` ([] when none, or no
    folder). On S3 one LIST per prefix: what it returns, not the whole folder; elsewhere one listing, filtered."""
    entries = store_for(path).list_starting_with(path, name_prefixes)
    _op.remember_etags(entries)
    return entries


def list_names_validated(path: str) -> list[str]:
    """`list_names_if_dir`, and on S3 each file's ETag kept for the operation (`listed_etag`): what a timeline
    lists, so its completed instants' kept bytes are served only while the store still holds those objects."""
    if on_s3(path):
        return [e.name for e in _op.s3_children(path)]
    return list_names_if_dir(path)


def list_tree(path: str, skip: str | None = None) -> list[Entry]:
    """Every file and folder below `path`, recursively; `Entry.name` is the path relative to `path`.
    One paginated listing on S3 (not one per folder), its ETags kept for the operation.

    `skip`: a folder directly under `path` left out, with everything in it. On S3 its keys are not even fetched:
    they are one run of the listing's key order, stepped over (a table's `.hoodie/` — timeline history, archived
    timeline, metadata table — is most of a Hudi 1.x table's keys)."""
    return _op.s3_tree(path, skip) if on_s3(path) else store_for(path).list_tree(path, skip)


# ------------------------------------------------------------------ reading


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def read_tagged(path: str) -> tuple[bytes, str] | None:
    """An S3 object's bytes and ETag, read now (never an operation's kept copy); None when there is none. What a
    conditional replace (`replace_if_match`) of it is then made against."""
    try:
        return get_tagged(path)
    except FileNotFoundError:
        return None


def open_input(path: str) -> Any:
    """A seekable reader (local file object, or a pyarrow RandomAccessFile doing ranged GETs on a store)."""
    return store_for(path).open_input(path)


def parquet_source(path: str) -> Any:
    """What pyarrow.parquet takes as a source: the local path itself, or a remote random-access file."""
    return store_for(path).parquet_source(path)


def buffer_reader(data: bytes) -> pa.BufferReader:
    return pa.BufferReader(pa.py_buffer(data))


class RangeReader:
    """Positional reads of one file: `pread` on a local descriptor, one ranged GET per call on a store — or of
    `data` when the file was already read whole (a compaction reads every byte of its logs anyway).

    Given the size from a listing, opening a remote file costs no request (no HEAD)."""

    def __init__(self, path: str, known_size: int | None = None, data: bytes | None = None) -> None:
        self.path = path
        self._data = data
        self._reader: Positional | None = None
        if data is not None:
            self.size = len(data)
            self.etags: set[str] = set()
            return
        self._reader = store_for(path).positional(path, known_size)
        self.size = self._reader.size
        self.etags = self._reader.etags   # ETags of the objects the ranged GETs read (S3)

    def pread(self, length: int, offset: int) -> bytes:
        length = max(0, min(length, self.size - offset))
        if length == 0:
            return b""
        if self._data is not None:
            return bytes(self._data[offset : offset + length])
        assert self._reader is not None, f"{self.path}: read after close"
        return self._reader.pread(length, offset)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------ writing


def make_dirs(path: str) -> None:
    """Create a folder and its parents (no-op on S3, where folders are prefixes)."""
    store_for(path).make_dirs(path)


def write_bytes(path: str, data: bytes) -> None:
    """Write (or overwrite) a whole file; on S3 one PUT, so readers see the old object or the new one."""
    store = store_for(path)
    if not store.round_trips:
        store.write_bytes(path, data)
        return
    shared = _op.wrote(path)   # a failed PUT may still have replaced the object: forget it first
    store.write_bytes(path, data)
    if shared:   # the next read_shared gets what we just wrote (only for files the operation reads)
        _op.wrote(path, data)


def write_replace(path: str, data: bytes) -> None:
    """Replace a file whole: local temp + fsync + rename; on S3 a single PUT (atomic per object)."""
    store = store_for(path)
    if store.round_trips:
        write_bytes(path, data)   # one PUT, with the operation's reads kept true
    else:
        store.write_replace(path, data)


@contextlib.contextmanager
def open_output(path: str, exclusive: bool = False) -> Iterator[IO[bytes] | Any]:
    """A writable stream for a whole new file (Parquet writers), seen by readers only once complete. On S3 a
    file up to UPLOAD_PART_BYTES is one PutObject, a larger one a multipart upload; a failure inside the block
    publishes nothing (the upload is aborted). `exclusive` (S3 only; locally the caller links into place): the
    object is created only where none is (`If-None-Match: *` on the PutObject or the upload's completion),
    PublishConflict otherwise — a file no one else may have written is never replaced."""
    store = store_for(path)
    if store.round_trips:
        _op.wrote(path)
    with store.open_output(path, exclusive) as out:
        yield out


def create_exclusive(path: str, data: bytes, staging_dir: str | None = None, keep: bool = False) -> str | None:
    """Create `path` holding `data`, all at once, only if no file is there (PublishConflict otherwise). On S3 the
    new object's ETag (for a later `replace_if_match`), else None.

    Local: a temp file (in `staging_dir`, default beside `path`), fsynced, hard-linked into place. S3: one
    PutObject with `If-None-Match: *`; the store refuses the second of two racing writers (412). Other stores
    cannot do this: callers must hold a lock outside the store (see `engine.timeline.instants`); here they get a
    check-then-write. `keep`: on S3, keep `data` as `read_immutable` keeps what it reads, with the ETag the store
    gave the new object — this process's later operations then read what it published (a plan it scheduled, a
    commit it completed) without a GET, while their listings show that same object."""
    store = store_for(path)
    if store.round_trips:
        _op.wrote(path)
    etag = store.create_exclusive(path, data, staging_dir)
    if keep and etag:
        _op.keep_immutable(path, etag, data)
    return etag


def publish_new(dest: str, data: bytes | Sequence[bytes | memoryview], staging_dir: str) -> None:
    """Create the table file `dest` holding `data`, refusing to replace one (a committed file is never overwritten,
    whoever else wrote it): locally written in `staging_dir` (`.hoodie/.temp/<instant>`), fsynced and hard-linked
    into place; on S3 one conditional PUT. Readers never see half of it.

    `data` may be the file's consecutive pieces (a log's blocks as their encoders left them): a local file is
    written from them where they lie, with no joined copy of the whole file in memory; other stores get them
    joined."""
    make_dirs(staging_dir)
    store = store_for(dest)
    try:
        if not isinstance(data, bytes) and store.posix:
            store.create_exclusive_pieces(dest, data, staging_dir)   # local: no round trips to account for
        else:
            create_exclusive(dest, data if isinstance(data, bytes) else b"".join(data), staging_dir)
    except PublishConflict:
        raise _taken(dest) from None


class Publisher:
    """`publish_new` on a background thread: a writing task hands over each new file and encodes the next one
    while this one is written, fsynced and linked (fsync releases the GIL and mostly waits for the disk), then
    `wait`s for all before it reports them. Used as a context manager, leaving the block waits; an error of any
    publish (a PublishConflict, a failed write) is raised by the next `publish` or by `wait`, never lost, and a
    block that fails itself leaves nothing publishing behind it.

    At most DEPTH files wait or publish at once: a task's memory holds at most that many encoded files besides
    the one it encodes. Each runs in the caller's context, so the operation's shared reads stay true of it."""

    DEPTH = 2

    def __init__(self) -> None:
        self._pending: collections.deque[Future[None]] = collections.deque()

    def publish(self, dest: str, data: bytes | Sequence[bytes | memoryview], staging_dir: str) -> None:
        """Start publishing `dest` (see `publish_new`); the pieces of `data` must not change until `wait`."""
        while self._pending and (self._pending[0].done() or len(self._pending) >= self.DEPTH):
            self._pending.popleft().result()   # raises an earlier publish's error now
        context = contextvars.copy_context()
        self._pending.append(threads.publish_pool().submit(context.run, publish_new, dest, data, staging_dir))

    def wait(self) -> None:
        """Return once every file handed over is durable and in place; the first error of any, if one failed."""
        try:
            while self._pending:
                self._pending[0].result()
                self._pending.popleft()
        finally:
            self._settle()

    def _settle(self) -> None:
        threads.settle(self._pending)   # after a failure: cancel what has not started, wait for what has
        self._pending.clear()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.wait()
        else:
            self._settle()   # the block's own error is the one raised


@contextlib.contextmanager
def publishing(dest: str, staging_dir: str) -> Iterator[pa.NativeFile]:
    """A stream whose bytes become the table file `dest` when the block ends — whole, only where no file is
    (`publish_new`), nothing at all when the block fails. Locally the stream is a file in `staging_dir` linked into
    place (no copy in memory); elsewhere the bytes are kept and put in one request."""
    if not store_for(dest).posix:
        sink = pa.BufferOutputStream()
        yield sink
        publish_new(dest, sink.getvalue().to_pybytes(), staging_dir)
        return
    make_dirs(staging_dir)
    tmp = join(staging_dir, f".temp-{uuid.uuid4().hex}")
    try:
        with pa.OSFile(tmp, "wb") as out:
            yield out
        try:
            link_no_clobber(tmp, dest)
        except PublishConflict:
            raise _taken(dest) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _taken(dest: str) -> PublishConflict:
    return PublishConflict(f"{dest} already exists: another writer produced the same file name")


def replace_if_match(path: str, data: bytes, etag: str) -> str:
    """PutObject with `If-Match: etag`: replace the S3 object only while it is still the one with that ETag; the new
    object's ETag. PublishConflict when it changed (or went) since: another writer's put came first."""
    shared = _op.wrote(path)   # a refused or failed PUT may still have replaced the object: forget it first
    new = _s3_conditional_put(path, data, {"IfMatch": etag}, "changed since it was read (the store refused the replace")
    if shared:   # the next read_shared gets what was just written, and knows its ETag
        _op.wrote(path, data, new)
    return new


def upload(local: str, dest: str) -> None:
    """Stream a local file to `dest` (a multipart upload on S3: the object appears only once complete)."""
    with open(local, "rb") as src, open_output(dest) as out:
        while True:
            chunk = src.read(8 << 20)
            if not chunk:
                break
            out.write(chunk)


def rename(src: str, dst: str) -> None:
    """Move a file over `dst` (local: atomic rename; S3: server-side copy, then delete the source)."""
    store = store_for(src)
    if store.round_trips:
        _op.wrote(src)
        _op.wrote(dst)
    store.rename(src, dst)


def copy(src: str, dst: str) -> None:
    """Copy a file: on S3 server-side (CopyObject, no bytes through this process); locally a byte copy."""
    store = store_for(src)
    if store.round_trips:
        _op.wrote(dst)
    store.copy(src, dst)


def copy_new(src: str, dst: str, size: int | None = None) -> None:
    """`copy`, creating `dst` only where no object is: on S3 one CopyObject with `If-None-Match: *` (PublishConflict
    when the store refuses it; a store that ignores the condition copies anyway), elsewhere a plain `copy`."""
    store = store_for(dst)
    if store.round_trips:
        _op.wrote(dst)
    store.copy_new(src, dst, size)


def remove(path: str) -> None:
    """Delete a file (a local link, not its target); FileNotFoundError when a local file is missing (S3's
    DELETE does not say, and deleting what is gone is done)."""
    store = store_for(path)
    if store.round_trips:
        _op.wrote(path)
    store.remove(path)


def remove_if_exists(path: str) -> bool:
    try:
        remove(path)
        return True
    except FileNotFoundError:
        return False


def remove_tree(path: str) -> None:
    """Delete a folder and everything under it; nothing when it does not exist."""
    store = store_for(path)
    if store.round_trips:
        _op.wrote_tree(path)
    store.remove_tree(path)
