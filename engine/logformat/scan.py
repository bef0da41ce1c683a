"""Header-only scan of a log file: find every block, validate its framing, never decode content.

Per block this does one pread that covers the previous block's trailer, the MAGIC after it and this block's header
(docs/HUDI-FORMAT.md §1.1: Java checks blockLength against the trailing int64 and requires MAGIC or EOF next).
A block failing any check becomes a CorruptBlock and the scan resumes at the next MAGIC, as Java does. When its
header is still readable, the CorruptBlock keeps the block's INSTANT_TIME: that is what tells a failed write's torn
tail from damage to committed data (engine.logformat.integrity).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import struct
import threading
from collections.abc import Iterable, Iterator

from engine.io import storage
from engine.io.threads import requests_pool, settle
from engine.logformat.blocks import (
    LOG_FORMAT_VERSION,
    MAGIC,
    MAGIC_LEN,
    MIN_BLOCK_LENGTH,
    PREFIX_LEN,
    BlockInfo,
    BlockType,
    CorruptBlock,
    HeaderKey,
    LogFileScan,
)

CONTENT_HEAD = 8   # what the content check reads of each block (engine.logformat.content_check)
HEAD_CHUNK = 8192  # covers a typical header (schema JSON of a few KB); larger headers cost one extra pread
# An object-store log up to this size is scanned from one ranged GET of all of it rather than two (the header
# window, then the last block's trailer): on S3 a request's wait for its first byte (20-50 ms) is about the time
# 1 MiB takes to arrive, and requests are what a store bills. Java's log reader buffers 16 MB per read, so it
# too fetches a small log whole. Larger logs are scanned header by header; local files always are (a pread is
# ~free).
REMOTE_WHOLE_SCAN_BYTES = 1 << 20
RESYNC_CHUNK = 1 << 20
MAX_HEADER_ENTRIES = 64  # Java has 9 ordinals; anything bigger is garbage, not a header
_LONG = struct.Struct(">q")
_BLOCK_TYPES = {t.value: t for t in BlockType}


class _BadBlock(Exception):
    """Internal: the block at hand failed a check; the message becomes CorruptBlock.reason."""

    def __init__(self, message: str, instant: str | None = None) -> None:
        super().__init__(message)
        self.instant = instant


class _Window:
    """Bytes of the file starting at `start`, extended on demand with pread."""

    def __init__(self, source: storage.RangeReader) -> None:
        self.source, self.size = source, source.size
        self.start, self.buf = 0, b""
        self.last_head: bytes | None = None

    def load(self, start: int, length: int) -> None:
        self.start, self.buf = start, self.source.pread(length, start)

    def cached(self, offset: int, length: int) -> bytes | None:
        """`length` bytes at `offset` if the window already holds them (no read)."""
        lo = offset - self.start
        return self.buf[lo : lo + length] if 0 <= lo and lo + length <= len(self.buf) else None

    def get(self, offset: int, length: int) -> bytes:
        """`length` bytes at absolute `offset` (fewer only at EOF); one pread when the window misses."""
        length = max(0, min(length, self.size - offset))
        lo = offset - self.start
        if lo < 0 or lo + length > len(self.buf):
            self.load(offset, max(length, HEAD_CHUNK))
            lo = 0
        return self.buf[lo : lo + length]


_MEMO: contextvars.ContextVar[dict[str, LogFileScan] | None] = contextvars.ContextVar("tidemark_scan_memo",
                                                                                      default=None)


@contextlib.contextmanager
def scan_memo() -> Iterator[None]:
    """Scan each log file at most once inside the block (one planning pass under the table lock, where the
    committed logs it reads cannot change): the event-time resolution and the integrity check share scans.
    Nothing outlives the block, so nothing stale is ever served."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


# Scans of object-store logs kept across operations, each with the ETag of the object its bytes came from. One is
# served only when the current operation's listing gives that object the same ETag and size
# (`storage.listed_etag`): an ETag changes with the bytes, so the scan is what scanning again would find. It
# spares the run the re-read of every folded log that planning scanned seconds before (its check for damage
# that appeared since: an object with other bytes has another ETag and is scanned again), and spares repeated
# plan previews and metrics samples on a store the same re-reads. Local files are always scanned (a pread is
# ~free and an mtime is no ETag). Bounded: a scan weighs a few KB (each block's header holds the schema).
VALIDATED_SCANS = 2048
_VALIDATED: dict[str, tuple[str, LogFileScan]] = {}
_VALIDATED_LOCK = threading.Lock()


def _new_lock_after_fork() -> None:
    # a lock some parent thread held at the fork would never be released in the child
    global _VALIDATED_LOCK
    _VALIDATED_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def clear_validated_scans() -> None:
    """Drop every kept scan (the next scan of each log reads it from the store)."""
    with _VALIDATED_LOCK:
        _VALIDATED.clear()


def _validated(path: str, size: int | None) -> LogFileScan | None:
    """The kept scan of `path` if this operation's listing shows the object it was made from."""
    etag = storage.listed_etag(path, size) if storage.is_remote(path) else None
    if not etag:
        return None
    with _VALIDATED_LOCK:
        kept = _VALIDATED.get(path)
    return kept[1] if kept is not None and kept[0] == etag else None


def _keep(path: str, scan: LogFileScan, etags: set[str]) -> None:
    """Keep a scan made from ranged GETs of one object version (its ETag); oldest dropped past the bound."""
    if len(etags) != 1 or not next(iter(etags)):
        return
    with _VALIDATED_LOCK:
        _VALIDATED.pop(path, None)
        _VALIDATED[path] = (next(iter(etags)), scan)
        while len(_VALIDATED) > VALIDATED_SCANS:
            del _VALIDATED[next(iter(_VALIDATED))]


def reads_needed(items: Iterable[tuple[str, int | None]]) -> int:
    """How many of (path, listed size) `scan_log_files` would read from a store: those neither in the open memo
    nor kept with the ETag this operation's listing shows (local files cost no request)."""
    memo = _MEMO.get() or {}
    return sum(1 for p, s in items if storage.is_remote(p) and p not in memo and _validated(p, s) is None)


def scan_log_files(items: Iterable[tuple[str, int | None]]) -> dict[str, LogFileScan]:
    """path -> scan for each (path, size from a listing or None); the memo is used and filled as by
    `scan_log_file`. On an object store the scans run on the process's request threads (engine.io.threads), so a
    planning pass waits for about one request round trip per REQUEST_THREADS logs instead of one per log (same
    requests, same results)."""
    todo = dict(items)
    memo = _MEMO.get()
    out = {p: memo[p] for p in todo if memo is not None and p in memo}
    for p, s in todo.items():   # asked here, in the operation's thread (the scan threads do not see it)
        kept = _validated(p, s) if p not in out else None
        if kept is not None:
            out[p] = kept
    missing = [(p, s) for p, s in todo.items() if p not in out]
    if len(missing) > 1 and storage.is_remote(missing[0][0]):
        pending = [requests_pool().submit(_scan, p, s) for p, s in missing]
        try:
            scans = [f.result() for f in pending]
        finally:
            settle(pending)
    else:
        scans = [_scan(p, s) for p, s in missing]
    for (path, _), scan in zip(missing, scans):
        out[path] = scan
        if memo is not None:
            memo[path] = scan
    return out


def scan_log_bytes(path: str, data: bytes) -> LogFileScan:
    """The same scan over a log already read whole (kept in the memo, when one is open, like any scan)."""
    scan = _scan(path, data=data)
    memo = _MEMO.get()
    if memo is not None:
        memo[path] = scan
    return scan


def scan_log_file(path: str, size: int | None = None) -> LogFileScan:
    memo = _MEMO.get()
    hit = memo.get(path) if memo is not None else None
    if hit is None:
        hit = _validated(path, size) or _scan(path, size)
        if memo is not None:
            memo[path] = hit
    return hit


def _scan(path: str, size: int | None = None, data: bytes | None = None) -> LogFileScan:
    """All blocks of a log file from their headers alone; corrupt regions are reported, not raised.

    On an object store every window is one ranged GET (no whole-object download); `size` from a listing
    saves the HEAD request."""
    blocks: list[BlockInfo] = []
    corrupt: list[CorruptBlock] = []
    heads: dict[int, bytes] = {}
    fd = storage.RangeReader(path, size, data)
    try:
        size = fd.size
        win = _Window(fd)
        win.load(0, size if data is None and storage.is_remote(path) and size <= REMOTE_WHOLE_SCAN_BYTES
                 else HEAD_CHUNK)
        pos = 0
        # Java treats fewer than 6 remaining bytes as EOF (readFully of the MAGIC hits EOF).
        while size - pos >= MAGIC_LEN:
            try:
                info = _read_block(win, path, pos)
            except _BadBlock as bad:
                nxt = _next_magic(fd, size, pos + 1)
                corrupt.append(CorruptBlock(path, pos, f"{bad} (block at offset {pos} of {path})", nxt, bad.instant))
                pos = nxt
                continue
            blocks.append(info)
            head, win.last_head = win.last_head, None
            if head is not None:
                heads[info.offset] = head
            pos = info.offset + info.size
    finally:
        fd.close()
    scan = LogFileScan(path, blocks, corrupt, heads)
    if fd.etags:
        _keep(path, scan, fd.etags)
    return scan


def _read_block(win: _Window, path: str, pos: int) -> BlockInfo:
    head = win.get(pos, PREFIX_LEN)
    if head[:MAGIC_LEN] != MAGIC:
        raise _BadBlock("no MAGIC")
    if len(head) < PREFIX_LEN:
        raise _BadBlock(f"truncated: file ends {win.size - pos} bytes into the block prefix")
    (block_length,) = _LONG.unpack_from(head, MAGIC_LEN)
    end = pos + PREFIX_LEN + block_length
    if block_length < MIN_BLOCK_LENGTH:
        raise _BadBlock(f"blockLength {block_length} is smaller than the minimum {MIN_BLOCK_LENGTH}",
                        _salvage_instant(win, pos))
    if end > win.size:
        raise _BadBlock(f"truncated: blockLength {block_length} exceeds file size {win.size}",
                        _salvage_instant(win, pos))
    # Parse the header while the window still holds it; report framing (trailer) failures first, like Java.
    try:
        parsed, head_error = _read_head(win, pos, end, block_length), None
    except _BadBlock as exc:
        parsed, head_error = None, exc
    if parsed is not None:   # the content's first bytes, while the window holds them (before the trailer read)
        win.last_head = win.cached(parsed[2], min(CONTENT_HEAD, parsed[3]))
    try:
        _check_trailer(win, end, block_length)
    except _BadBlock as exc:
        raise _BadBlock(str(exc), parsed[1].get(HeaderKey.INSTANT_TIME) if parsed else None) from None
    if head_error is not None or parsed is None:
        raise head_error or _BadBlock("unreadable block header")
    block_type, headers, content_offset, content_length = parsed
    return BlockInfo(path, pos, end - pos, block_type, headers, content_offset, content_length)


def _read_head(win: _Window, pos: int, end: int, block_length: int) -> tuple[BlockType, dict[int, str], int, int]:
    version, type_id = struct.unpack(">ii", win.get(pos + PREFIX_LEN, 8))
    if version != LOG_FORMAT_VERSION:
        raise _BadBlock(f"log format version {version}, expected {LOG_FORMAT_VERSION}")
    block_type = _BLOCK_TYPES.get(type_id)
    if block_type is None:
        raise _BadBlock(f"unknown block type {type_id}")
    headers, after = _read_headers(win, pos + PREFIX_LEN + 8, end)
    (content_length,) = _LONG.unpack(win.get(after, 8))
    content_offset = after + 8
    # Content, the footer's int32 count and the trailer must fit inside the block.
    if content_length < 0 or content_offset + content_length + 4 + 8 > end:
        raise _BadBlock(f"contentLength {content_length} does not fit in blockLength {block_length}")
    return block_type, headers, content_offset, content_length


def _check_trailer(win: _Window, end: int, block_length: int) -> None:
    """Trailer == blockLength + 6, then MAGIC or EOF. For big blocks this pread also prefetches the next header."""
    tail = win.get(end - 8, 8 + MAGIC_LEN)
    (total,) = _LONG.unpack_from(tail, 0)
    if total != block_length + MAGIC_LEN:
        raise _BadBlock(f"trailer mismatch: trailing size {total} != blockLength {block_length} + 6")
    if win.size - end >= MAGIC_LEN and tail[8 : 8 + MAGIC_LEN] != MAGIC:
        raise _BadBlock(f"no MAGIC or EOF after the block end at offset {end}")


def _read_headers(win: _Window, offset: int, end: int) -> tuple[dict[int, str], int]:
    (count,) = struct.unpack(">i", win.get(offset, 4))
    if not 0 <= count <= MAX_HEADER_ENTRIES:
        raise _BadBlock(f"implausible header entry count {count}")
    offset += 4
    headers: dict[int, str] = {}
    for _ in range(count):
        key, length = struct.unpack(">ii", win.get(offset, 8))
        offset += 8
        if length < 0 or offset + length > end:
            raise _BadBlock(f"header entry {key} length {length} runs past the block end")
        try:
            headers[key] = win.get(offset, length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _BadBlock(f"header entry {key} is not UTF-8: {exc}") from None
        offset += length
    return headers, offset


def _salvage_instant(win: _Window, pos: int) -> str | None:
    """INSTANT_TIME of a block whose framing failed, if its header survived (a truncated tail usually has one)."""
    try:
        version, _ = struct.unpack(">ii", win.get(pos + PREFIX_LEN, 8))
        if version != LOG_FORMAT_VERSION:
            return None
        headers, _ = _read_headers(win, pos + PREFIX_LEN + 8, win.size)
    except (_BadBlock, struct.error):
        return None
    return headers.get(HeaderKey.INSTANT_TIME)


def _next_magic(fd: storage.RangeReader, size: int, start: int) -> int:
    """Offset of the next MAGIC at or after `start`, or EOF (Java's scanForNextAvailableBlockOffset)."""
    pos = start
    while pos < size:
        chunk = fd.pread(RESYNC_CHUNK + MAGIC_LEN - 1, pos)
        hit = chunk.find(MAGIC)
        if hit >= 0:
            return pos + hit
        pos += RESYNC_CHUNK
    return size
