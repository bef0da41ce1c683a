"""Reading one file slice: base file batches merged with the slice's committed log blocks.

Everything here runs on Spark executors, so its inputs are small picklable values (`ReadContext`,
`SliceRef`) and its output is Arrow tables — no row-by-row Python.
"""
from __future__ import annotations

import contextvars
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import pyarrow as pa

from engine import logformat
from engine.io import storage
from engine.io.base_format import BaseFile, open_base
from engine.io.threads import decode_pool, settle
from engine.logformat import integrity
from engine.read.merge import DataItem, DeleteItem, LogItem, base_batch_rows, conform_to_schema, merge_log_items, merge_with_winners
from engine.read.window import InstantWindow
from engine.timeline.extents import CommittedExtents


@dataclass(frozen=True)
class ReadContext:
    """What an executor needs to merge a slice, independent of the slice."""

    schema: pa.Schema                 # read schema, meta fields first
    merge_mode: str
    ordering_field: str | None
    committed: frozenset[str]         # completed write instants; other blocks are invisible
    window: InstantWindow | None = None  # time travel / incremental: the instants (and rows) read
    # Corrupt blocks of committed instants: warn and skip them, or fail the read (a full read into a file).
    fail_on_corrupt: bool = False
    reported: frozenset[tuple[str, int]] = frozenset()   # (path, offset) the driver already reported
    report_dir: str | None = None     # relay what executors find to the driver here, instead of their own log
    # The byte ranges of each log completed instants wrote (built only if a log is damaged): damage inside them
    # is a committed block's, never a torn tail.
    extents: CommittedExtents | None = None


@dataclass(frozen=True)
class SliceRef:
    partition_path: str
    file_id: str
    base_instant: str
    base_path: str | None
    log_paths: tuple[str, ...] = field(default_factory=tuple)
    size: int = 0   # bytes of base + logs, to balance slices across tasks


@dataclass
class SliceLogs:
    """A slice's committed log content, in log order, plus what was skipped and why."""

    items: list[LogItem]
    corrupt: list[logformat.CorruptBlock]   # corrupt blocks of committed instants (engine.logformat.integrity)
    blocks_read: int
    blocks_skipped: int


def read_slice_logs(log_paths: Sequence[str], committed: frozenset[str], window: InstantWindow | None = None,
                    extents: CommittedExtents | None = None) -> SliceLogs:
    """Decode the slice's logs; keep blocks of committed instants not rolled back (and in `window`).
    `extents`: the logs' committed extents, so damage inside them counts as a committed block's."""
    contents = _decode_all(log_paths)
    # Like Java's log record reader, rollback command blocks count whatever their own instant: the
    # rollback action that wrote them is not a write instant.
    rolled_back = {b.info.target_instant_time for c in contents for b in c.blocks
                   if isinstance(b, logformat.CommandBlock)}
    items: list[LogItem] = []
    corrupt: list[logformat.CorruptBlock] = []
    read = skipped = 0
    for c in contents:
        known = extents.of(c.path) if c.corrupt and extents is not None else ()
        found = integrity.classify(c.corrupt, [b.info for b in c.blocks], committed, known)
        # Corruption outside a time-travel / incremental window hides nothing this read returns.
        corrupt.extend(b for b in found.committed
                       if window is None or b.instant is None or window.in_range(b.instant))
        for block in c.blocks:
            inst = block.info.instant_time
            if isinstance(block, logformat.CommandBlock):
                continue
            if inst not in committed or inst in rolled_back or (window is not None and not window.in_range(inst)):
                skipped += 1
                continue
            read += 1
            items.append(_to_item(block))
    return SliceLogs(items, corrupt, read, skipped)


def report_corrupt(blocks: Sequence[logformat.CorruptBlock], ctx: ReadContext) -> None:
    """Warn about (or fail on) the corrupt committed blocks a decode found that the driver did not report."""
    new = [b for b in blocks if (b.path, b.offset) not in ctx.reported]
    if not new:
        return
    if ctx.fail_on_corrupt:
        raise integrity.corrupt_error(new, "read stopped", READ_REMEDY)
    if ctx.report_dir is not None:
        integrity.relay(new, ctx.report_dir)
    else:
        integrity.warn_skipped(new)


READ_REMEDY = ("Nothing was written. Repair the blocks, or read the rest explicitly without them "
               "(tidemark read --skip-corrupt, Table.read(..., skip_corrupt=True)).")


PARALLEL_DECODE_BYTES = 64 * 1024 * 1024


def _decode_all(paths: Sequence[str]) -> list[logformat.LogFileContents]:
    """Decode logs in order; with two threads when a slice's logs are large, as the codec's numpy/Arrow
    kernels release the GIL (5 logs, 245 MB: 1.35 s -> 1.0 s). Small slices stay sequential: there the
    codec's per-record Python loop would only fight over the GIL with the other thread."""
    # Object stores: the two threads overlap the GETs as well (no size probe, which would cost a HEAD each).
    if len(paths) < 2 or (not storage.is_remote(paths[0])
                          and sum(os.path.getsize(p) for p in paths) < PARALLEL_DECODE_BYTES):
        return [logformat.read_log_file(p) for p in paths]
    # Each read runs in a copy of this context, so a scan memo open here (logformat.scan_memo) sees its scans.
    # Two in flight at a time: beyond that the codec's loops would fight over the GIL.
    running: deque[Future[logformat.LogFileContents]] = deque()
    out: list[logformat.LogFileContents] = []
    try:
        for path in paths:
            running.append(decode_pool().submit(contextvars.copy_context().run, logformat.read_log_file, path))
            if len(running) == 2:
                out.append(running.popleft().result())
        out.extend(f.result() for f in running)
    finally:
        settle(running)
    return out


def _to_item(block: logformat.DataBlock | logformat.DeleteBlock) -> LogItem:
    if isinstance(block, logformat.DataBlock):
        return DataItem(block.records, block.partial)
    d = block.deletes
    return DeleteItem(d.column("record_key").combine_chunks(), d.column("ordering_value").combine_chunks(),
                      d.column("always_wins").combine_chunks(), block.info.instant_time,
                      d.column(logformat.EVENT_TIME_COLUMN).combine_chunks())


def iter_base(path: str | None, schema: pa.Schema, batch_rows: int | Callable[[BaseFile], int] = 262_144,
              buffer_size: int = 0) -> Iterator[pa.Table]:
    """Stream a base file (Parquet or Lance, by its extension) in batches of `batch_rows` (or as many as
    `batch_rows(file)` says from its footer), so a large base never sits in memory whole: Parquet one row group
    at a time (the reader decodes a row group's pages incrementally). `buffer_size` > 0 reads each Parquet
    column chunk through a buffered stream of that size instead of loading the row group's compressed chunks
    whole (engine.compaction.base_stream)."""
    if path is None:
        return
    with open_base(path, buffer_size) as base:
        names = [f.name for f in schema if f.name in base.schema.names]
        size = batch_rows(base) if callable(batch_rows) else batch_rows
        for batch in base.batches(names, size):
            yield pa.Table.from_batches([batch])


def read_slice(ref: SliceRef, ctx: ReadContext, query: str = "snapshot") -> Iterator[pa.Table]:
    """Merged rows of a slice (snapshot) or its base rows (read_optimized), conformed to ctx.schema."""
    if query == "read_optimized":
        for t in iter_base(ref.base_path, ctx.schema):
            yield conform_to_schema(t, ctx.schema)
        return
    window = ctx.window
    logs = read_slice_logs(ref.log_paths, ctx.committed, window, ctx.extents)
    report_corrupt(logs.corrupt, ctx)
    winners = merge_log_items(logs.items, ctx.merge_mode, ctx.ordering_field, ctx.schema)
    base_path = ref.base_path if window is None or window.keeps_base(ref.base_instant) else None
    merged = merge_with_winners(iter_base(base_path, ctx.schema, base_batch_rows(winners.size)), winners,
                                ctx.merge_mode, ctx.ordering_field, ctx.schema)
    yield from merged if window is None else (window.filter_rows(t) for t in merged)

