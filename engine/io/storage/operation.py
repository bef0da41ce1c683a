"""What one table operation shares between its reads on a store where each request is a round trip.

Nothing is cached across operations but the client objects and the immutable files below: every listing goes to
the store, and so does every read (a task may start its reads early, `prefetched`, and is served each of them
once), except the small metadata files a caller reads with `read_shared` inside one table operation
(`operation_reads`): hoodie.properties and timeline instants are fetched once per operation, and whatever this
process writes, copies over or deletes is updated or forgotten there (`wrote`). Local files are always read: a
read is cheap there.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from engine.io.storage import s3
from engine.io.storage.interface import Entry
from engine.io.storage.paths import is_remote, is_within, join, on_s3, parent
from engine.io.storage.stores import store_for
from engine.io.threads import requests_pool, settle


class _Asked:
    """An answer asked ahead: the futures of its requests, and what makes the answer of their results (run by the
    thread that takes it, in its operation: a listing's ETags are kept for the operation there)."""

    def __init__(self, parts: list[Future[Any]], combine: Callable[[list[Any]], Any]) -> None:
        self.parts = parts
        self.combine = combine

    def result(self) -> Any:
        return self.combine([f.result() for f in self.parts])

    def drop(self) -> list[Future[Any]]:
        """Cancel what has not started; the requests still running (waited for when the operation ends, their
        answers not kept once they finish)."""
        return [f for f in self.parts if not f.cancel() and not f.done()]


@dataclass
class _Operation:
    """What one table operation shares (`operation_reads`)."""

    reads: dict[str, bytes]                  # path -> bytes of a small metadata file read whole
    etags: dict[str, tuple[int, str]]        # path -> (size, ETag) as the operation's listing gave them
    # path -> the ETag of the S3 object `reads` holds the bytes of, when its GET said (`shared_read_tagged`)
    read_etags: dict[str, str] = field(default_factory=dict)
    asked: dict[tuple[str | None, ...], _Asked] = field(default_factory=dict)   # `ask_ahead`, not yet answered
    dropped: list[Future[Any]] = field(default_factory=list)   # asked, made stale while running: waited for at the end
    # folder -> the names its listing gave (`s3_children`), until this process writes or removes a file in it
    folders: dict[str, frozenset[str]] = field(default_factory=dict)
    # `asked` and `dropped` change from the operation's own thread and from pool work run in its context (a removal
    # in flight with the commit's publish)
    lock: threading.Lock = field(default_factory=threading.Lock)


_OP_READS: ContextVar[_Operation | None] = ContextVar("tidemark_operation_reads", default=None)
# Whole-object reads a task announced up front (`prefetched`): path -> its GET in flight.
_PREFETCHED: ContextVar[dict[str, Future[bytes]] | None] = ContextVar("tidemark_prefetched", default=None)


@contextlib.contextmanager
def operation_reads() -> Iterator[None]:
    """Inside the block `read_shared` fetches each object-store file once (nested blocks share the outer one).

    One table operation reads hoodie.properties and the same timeline instants from several of its steps (a
    compaction run read the properties 3 times, its plan 3 times); Hudi's Java reads them once per operation
    through its meta client too. Writes made through `engine.io.storage` inside the block keep it true: a file this
    process writes is remembered as written, one it deletes, copies over or renames is forgotten. Another
    process's change during the operation is seen by the next operation, as with a meta client. Nothing
    outlives the block; local files are always read (a read is cheap there)."""
    if _OP_READS.get() is not None:
        yield
        return
    op = _Operation({}, {})
    token = _OP_READS.set(op)
    try:
        yield
    finally:
        _OP_READS.reset(token)
        with op.lock:
            left = [f for asked in op.asked.values() for f in asked.parts] + op.dropped
            op.asked.clear()
            op.dropped.clear()
        settle(left)   # nothing asked outlives the operation


@contextlib.contextmanager
def prefetched(paths: Sequence[str]) -> Iterator[None]:
    """Start the GETs of the object-store files among `paths` at once; inside the block `read_bytes` of one of
    them waits for its GET instead of making another. A compaction task reads its logs one after another, so
    on a store it would otherwise wait one round trip per log; now about one for all. Each is served once and
    then dropped (the bytes are not held twice); what the block did not read is cancelled or discarded.
    Local files are not prefetched: a read is already cheap."""
    remote = list(dict.fromkeys(p for p in paths if store_for(p).round_trips))
    if not remote:
        yield
        return
    pool = requests_pool()
    futures = {p: pool.submit(_read_whole, p) for p in remote}
    token = _PREFETCHED.set(dict(futures))
    try:
        yield
    finally:
        _PREFETCHED.reset(token)
        settle(futures.values())


def _read_whole(path: str) -> bytes:
    return store_for(path).read_whole(path)


def read_bytes(path: str) -> bytes:
    """The whole file (FileNotFoundError when missing). One GET on S3, or none when `prefetched` made it."""
    pending = _PREFETCHED.get()
    ahead = pending.pop(path, None) if pending is not None else None
    if ahead is not None:
        return ahead.result()
    return _read_whole(path)


def _read_if_there(path: str) -> tuple[bytes | None, str]:
    """The whole file now, never a prefetched read (an answer asked ahead is the store's when asked), and the ETag
    of the object it came from ("" when not on S3, or none)."""
    try:
        if on_s3(path):
            return s3.get_tagged(path)
        return _read_whole(path), ""
    except FileNotFoundError:
        return None, ""


def read_optional(path: str) -> bytes | None:
    try:
        return read_bytes(path)
    except FileNotFoundError:
        return None


def read_shared(path: str) -> bytes | None:
    """`read_optional`, served from the operation's earlier read of the same object (see `operation_reads`).
    A missing file is not remembered: it is asked again."""
    op = _OP_READS.get()
    if op is None or not is_remote(path):
        return read_optional(path)
    memo = op.reads
    data = memo.get(path)
    if data is None:
        asked = take_asked(("read", path))
        pending = _PREFETCHED.get()
        if asked is not None:
            data, etag = asked.result()
        elif pending is not None and path in pending:
            data, etag = read_optional(path), ""
        else:
            data, etag = _read_if_there(path)
        if data is not None:
            memo[path] = data
            if etag:
                op.read_etags[path] = etag
    return data


def shared_read_tagged(path: str) -> tuple[bytes, str] | None:
    """The operation's shared read of the S3 object at `path` (`read_shared`) and the ETag of the object it came
    from — what a conditional replace (`replace_if_match`) can be made against instead of reading it again; None
    when the operation holds no such read (none yet, or this process wrote the file since)."""
    op = _OP_READS.get()
    if op is None:
        return None
    data, etag = op.reads.get(path), op.read_etags.get(path)
    return (data, etag) if data is not None and etag else None


def read_current(path: str) -> bytes | None:
    """`read_optional` now — or by the read `ask_ahead` started, whose caller vouches that nothing changed the file
    since — never an older read of the operation."""
    asked = take_asked(("read", path))
    return asked.result()[0] if asked is not None else read_optional(path)


# ------------------------------------------------------------------ listings and their ETags


def s3_children(path: str) -> list[Entry]:
    """The direct children of an S3 folder (asked ahead, or one LIST now), their ETags kept for the operation."""
    asked = take_asked(("children", path))
    entries: list[Entry] = asked.result() if asked is not None else s3.children(path)
    remember_etags(entries)
    op = _OP_READS.get()
    if op is not None:
        op.folders[path] = frozenset(e.name for e in entries)
    return entries


def listed_names(folder: str) -> frozenset[str] | None:
    """The names this operation's listing of `folder` gave (`list_names_validated` on S3), while this process has
    written or removed nothing in it since; None otherwise. The listing is as fresh as an answer asked ahead
    (`ask_ahead`): taken under the locks that keep it true, it tells whether a file is there without a HEAD."""
    op = _OP_READS.get()
    return op.folders.get(folder) if op is not None else None


def s3_tree(path: str, skip: str | None) -> list[Entry]:
    """`list_tree` of an S3 folder (asked ahead, or listed now), their ETags kept for the operation."""
    asked = take_asked(("tree", path, skip))
    if asked is None:
        entries = s3.tree(path, skip)
    else:
        try:
            entries = asked.result()
        finally:
            settle(asked.parts)
    remember_etags(entries)
    return entries


def s3_file_exists(path: str) -> bool:
    asked = take_asked(("head", path))
    return bool(asked.result()) if asked is not None else s3.head_exists(path)


def remember_etags(entries: list[Entry]) -> None:
    """Keep the listed objects' ETags for the operation (`listed_etag`)."""
    op = _OP_READS.get()
    if op is not None:
        op.etags.update((e.path, (e.size, e.etag)) for e in entries if e.etag)


def listed_etag(path: str, size: int | None = None) -> str | None:
    """The ETag this operation's listing (`list_tree` on S3, inside `operation_reads`) gave the object at `path`
    — None when it listed none, or listed another size than `size`. What was derived from bytes with this ETag
    is still true of the object as listed."""
    op = _OP_READS.get()
    known = op.etags.get(path) if op is not None else None
    if known is None or (size is not None and known[0] != size):
        return None
    return known[1]


# ------------------------------------------------------------------ asking ahead


def ask_ahead(reads: Sequence[str] = (), children: Sequence[str] = (), trees: Sequence[tuple[str, str | None]] = (),
              heads: Sequence[str] = (), keep: bool = False) -> None:
    """Start now, all at once, requests the operation's next steps would make one after another: the GETs of
    `reads` (`read_shared`, `read_current`), the listings of `children` (`list_names_validated`) and of `trees`
    ((path, skip): `list_tree`), the HEADs of `heads` (`file_exists`). Each such call then takes its answer
    instead of making a request: on S3 a run of round trips in sequence becomes one.

    An answer is the store's when it was asked: the caller asks only once it holds the locks that keep these
    answers true until they are used, and what it writes itself in between through `engine.io.storage` drops what
    was asked about that file (`wrote`). Answers not taken are dropped when the operation ends. S3 only, inside an
    operation (`operation_reads`); elsewhere nothing is asked. An answer asked again replaces the one asked before,
    unless `keep`: then one still waiting to be taken stays (the caller vouches it was asked under the locks it
    holds now, and `drop_asked` when it takes another lock)."""
    op = _OP_READS.get()
    if op is None:
        return
    pool = requests_pool()

    def ask(key: tuple[str | None, ...], parts: list[Future[Any]], combine: Callable[[list[Any]], Any]) -> None:
        with op.lock:
            old = op.asked.pop(key, None)
            if old is not None:
                op.dropped += old.drop()
            op.asked[key] = _Asked(parts, combine)

    def wanted(path: str, key: tuple[str | None, ...]) -> bool:
        return on_s3(path) and not (keep and key in op.asked)

    for path in (p for p in reads if wanted(p, ("read", p))):
        ask(("read", path), [pool.submit(_read_if_there, path)], lambda r: r[0])
    for path in (p for p in children if wanted(p, ("children", p))):
        ask(("children", path), [pool.submit(s3.children_pages, path, "")],
            lambda r, path=path: s3.children_entries(path, "", r[0]))   # type: ignore[misc]
    for path, skip in ((p, s) for p, s in trees if wanted(p, ("tree", p, s))):
        ask(("tree", path, skip), *s3.tree_requests(pool, path, skip))
    for path in (p for p in heads if wanted(p, ("head", p))):
        ask(("head", path), [pool.submit(s3.head_exists, path)], lambda r: r[0])


def asked(key: tuple[str | None, ...]) -> bool:
    """Whether an answer to `key` was asked ahead and is still waiting to be taken."""
    op = _OP_READS.get()
    return op is not None and key in op.asked


def drop_asked() -> None:
    """Drop every answer the operation asked ahead and has not taken: they were asked under locks that no longer
    keep them true (another lock is being taken first)."""
    op = _OP_READS.get()
    if op is None:
        return
    with op.lock:
        for waiting in op.asked.values():
            op.dropped += waiting.drop()
        op.asked.clear()


def has_shared_read(path: str) -> bool:
    """Whether the operation holds a read of `path` (`read_shared` answers it without a request)."""
    op = _OP_READS.get()
    return op is not None and path in op.reads


def take_asked(key: tuple[str | None, ...]) -> _Asked | None:
    op = _OP_READS.get()
    if op is None or not op.asked:
        return None
    with op.lock:
        return op.asked.pop(key, None)


def _drop_asked(op: _Operation, path: str, folder: bool = False) -> None:
    """Drop the answers asked ahead that a write to `path` makes stale: its GET and HEAD, the listing of its folder,
    the listings of trees that hold it; with `folder` (a folder removed with all it holds), of everything in it."""
    def about(key: tuple[str | None, ...]) -> bool:
        kind, where = key[0], str(key[1])
        if kind in ("read", "head"):
            return where == path or folder and is_within(where, path)
        if kind == "children":
            return parent(path) == where or folder and is_within(where, path)
        skipped = key[2]   # a tree's listing leaves its skipped folder out
        inside = is_within(path, where) or folder and is_within(where, path)
        return inside and not (skipped is not None and is_within(path, join(where, str(skipped))))

    with op.lock:
        for key in [k for k in op.asked if about(k)]:
            op.dropped += op.asked.pop(key).drop()


# ------------------------------------------------------------------ files that never change


# Files whose bytes never change once they exist under their name — completed timeline instants: Hudi creates them
# once (create-if-absent) and otherwise only deletes them (rollback, archival) — kept across operations with the
# ETag of the object they came from, most recently used last, up to IMMUTABLE_BYTES. One is served only when the
# current operation's listing gives that object the same ETag (`list_names_validated`): an instant re-created at the
# same path (a compaction re-run after a crashed rollback removed its commit) is another object, read again. S3
# only (its listing gives ETags; a local read is cheap). Since the ETag is checked, the same holds for any timeline
# file read this way — a compaction plan — and for those this process published (`create_exclusive(keep=True)`).
IMMUTABLE_BYTES = 64 * 1024 * 1024
_IMMUTABLE: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
_IMMUTABLE_SIZE = 0
_IMMUTABLE_LOCK = threading.Lock()


def _kept_immutable(path: str) -> bytes | None:
    """The kept bytes of `path` if this operation's listing shows the object they came from."""
    etag = listed_etag(path)
    if not etag:
        return None
    with _IMMUTABLE_LOCK:
        kept = _IMMUTABLE.get(path)
        if kept is None or kept[0] != etag:
            return None
        _IMMUTABLE.move_to_end(path)
        return kept[1]


def read_immutable(path: str) -> bytes | None:
    """`read_shared` of a file that never changes once it exists (see IMMUTABLE_BYTES): an S3 object this process
    read before, by any operation, is not read again while the operation's listing shows it unchanged."""
    if not on_s3(path):
        return read_shared(path)
    kept = _kept_immutable(path)
    if kept is not None:
        return kept
    op = _OP_READS.get()
    if op is not None and path in op.reads:
        return op.reads[path]
    return _fetch_immutable(path)


def _fetch_immutable(path: str) -> bytes | None:
    try:
        data, etag = s3.get_tagged(path)
    except FileNotFoundError:
        return None
    op = _OP_READS.get()
    if op is not None:
        op.reads[path] = data
        if etag:
            op.read_etags[path] = etag
    if etag:
        keep_immutable(path, etag, data)
    return data


def immutable_reads_needed(paths: Sequence[str]) -> int:
    """How many of `paths` `read_immutable` would fetch from a store now."""
    op = _OP_READS.get()
    return sum(1 for p in paths if is_remote(p) and (op is None or p not in op.reads) and _kept_immutable(p) is None)


def keep_immutable(path: str, etag: str, data: bytes) -> None:
    global _IMMUTABLE_SIZE
    with _IMMUTABLE_LOCK:
        old = _IMMUTABLE.pop(path, None)
        _IMMUTABLE_SIZE -= len(old[1]) if old is not None else 0
        if len(data) > IMMUTABLE_BYTES // 16:   # a huge commit would push out everything else
            return
        _IMMUTABLE[path] = (etag, data)
        _IMMUTABLE_SIZE += len(data)
        while _IMMUTABLE_SIZE > IMMUTABLE_BYTES:
            _IMMUTABLE_SIZE -= len(_IMMUTABLE.popitem(last=False)[1][1])


def clear_kept_immutable() -> None:
    """Drop every kept file: the next read of each is a GET, as in a new process."""
    global _IMMUTABLE_SIZE
    with _IMMUTABLE_LOCK:
        _IMMUTABLE.clear()
        _IMMUTABLE_SIZE = 0


def _forget_immutable(path: str) -> None:
    global _IMMUTABLE_SIZE
    with _IMMUTABLE_LOCK:
        old = _IMMUTABLE.pop(path, None)
        _IMMUTABLE_SIZE -= len(old[1]) if old is not None else 0


def read_shared_all(paths: Sequence[str], immutable: bool = False) -> None:
    """Fetch into the operation's shared reads, in parallel, those of `paths` it does not hold yet (object-store
    files only; missing ones are skipped): the `read_shared` (`read_immutable`) calls that follow are then
    answered from memory. Without an operation, or locally, nothing is read ahead."""
    op = _OP_READS.get()
    todo = [p for p in dict.fromkeys(paths) if op is not None and is_remote(p) and p not in op.reads]
    if immutable:
        todo = [p for p in todo if _kept_immutable(p) is None]
    if op is None or len(todo) < 2:
        return
    fetch = _fetch_immutable if immutable and on_s3(todo[0]) else read_optional
    futures = {p: requests_pool().submit(fetch, p) for p in todo}
    try:
        for p, f in futures.items():
            data = f.result()
            if data is not None:
                op.reads[p] = data
    finally:
        settle(futures.values())


# ------------------------------------------------------------------ writes keep it true


def wrote(path: str, data: bytes | None = None, etag: str = "") -> bool:
    """Forget the operation's shared read of `path` (this process is removing or replacing it); with `data`
    (what it wrote there, and the new object's `etag` when the store said), remember that instead. True when the
    read had been shared."""
    _forget_immutable(path)
    op = _OP_READS.get()
    if op is None:
        return False
    if op.asked:
        _drop_asked(op, path)
    op.etags.pop(path, None)
    op.read_etags.pop(path, None)
    op.folders.pop(parent(path), None)
    memo = op.reads
    if data is not None:
        memo[path] = bytes(data)
        if etag:
            op.read_etags[path] = etag
        return True
    return memo.pop(path, None) is not None


def wrote_tree(path: str) -> None:
    """Forget everything the operation and the immutable files hold under the folder `path` (being removed)."""
    op = _OP_READS.get()
    for known in [k for k in [*op.reads, *op.etags] if is_within(k, path)] if op is not None else []:
        wrote(known)
    if op is not None and op.asked:
        _drop_asked(op, path, folder=True)
    if op is not None:
        for folder in [f for f in op.folders if is_within(f, path) or is_within(path, f)]:
            op.folders.pop(folder, None)
    with _IMMUTABLE_LOCK:
        kept = [k for k in _IMMUTABLE if is_within(k, path)]
    for known in kept:
        _forget_immutable(known)


def _forget_after_fork() -> None:
    global _IMMUTABLE_LOCK
    _IMMUTABLE_LOCK = threading.Lock()   # the kept immutable files stay: their bytes are true in the child too


os.register_at_fork(after_in_child=_forget_after_fork)
