"""Streaming an old base file through a compaction with bounded memory.

A compaction rewrites every row of the old base, so its executor's peak memory is set by how much of the
base is alive at once, not by the file's size. Two things bound it here:

- column chunks are read through a small buffered stream, not whole: pyarrow otherwise loads a row group's
  compressed column chunks in full before decoding the first batch (~100 MB per 1M-row group of 170-byte
  rows), and keeps them for the whole group;
- batches are sized by decoded bytes (from the footer's per-group sizes), so a wide schema gets fewer rows
  per batch. Each batch becomes one row group of the new base (pyarrow's writer starts a row group per
  write), and decoding holds a few times a batch while it builds it, so the bytes bound both.

Each merge of a batch against the log winners rebuilds the hash set of the winners' keys, so a batch never
has fewer rows than there are winners: the rebuilding then costs at most one pass over the base.

A Lance base (engine.io.base_format) is sized the same way by its footer's data bytes (encoded, not decoded:
Lance 2.0's light encodings keep the two close); the buffered stream is Parquet's alone.
"""
from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from engine.io.base_format import BaseFile
from engine.read.slice_reader import iter_base

BATCH_BYTES = 32 * 1024 * 1024     # decoded bytes per batch (and per row group written)
READ_BUFFER_BYTES = 1024 * 1024    # the buffered stream under each column chunk
MIN_BATCH_ROWS = 16_384            # very wide rows still come in batches worth a row group
UNSIZED_BATCH_ROWS = 262_144       # a footer without sizes (some writers leave them 0)


def batch_rows(base: BaseFile, winners: int, batch_bytes: int | None = None) -> int:
    """Rows per batch: `batch_bytes` (BATCH_BYTES) of decoded rows by the footer's sizes, at least `winners`."""
    batch_bytes = BATCH_BYTES if batch_bytes is None else batch_bytes
    rows, size = base.num_rows, base.data_bytes
    by_bytes = batch_bytes * rows // size if rows and size else UNSIZED_BATCH_ROWS
    return max(MIN_BATCH_ROWS, winners, by_bytes)


def stream_base(path: str | None, schema: pa.Schema, winners: int) -> Iterator[pa.Table]:
    """The base file's columns of `schema`, in file order, in batches of `batch_rows`."""
    return iter_base(path, schema, lambda base: batch_rows(base, winners), buffer_size=READ_BUFFER_BYTES)
