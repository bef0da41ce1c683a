"""The read-optimized view in-process: pyarrow dataset scans over the latest slices' base files.

An RO slice read is its base file alone, so nothing needs merging: handing the base files to Arrow dataset
scans (a few files each) lets Arrow decode files and columns on its own thread pool (with read-ahead across files),
where reading slice by slice decodes one file at a time per thread. Rows come in plan order, file after
file, exactly as the slice-by-slice path (`slice_reader.read_slice(..., "read_optimized")`) yields them.

The dataset is given the table's read schema, so each file is projected onto it the way
`merge.conform_to_schema` does: a column an older file lacks (schema evolution) reads as null, a column
the schema no longer has is not read, and a narrower type (int → long, a naive or millisecond timestamp)
is cast with Arrow's safe cast.

Lance base files (engine.io.base_format) have no Arrow dataset format: a run of them is read file by file and
projected with `merge.conform_to_schema`, the same projection the slice-by-slice path applies.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.dataset as ds

from engine.errors import TidemarkError
from engine.io import base_format, storage
from engine.progress import Reporter
from engine.read.merge import conform_to_schema
from engine.read.slice_reader import iter_base


def base_dataset(paths: Sequence[str], schema: pa.Schema) -> ds.Dataset:
    """One dataset over `paths` (all of one table, so on one file system), read as `schema`."""
    located = [storage.filesystem(p) for p in paths]
    fs = located[0][0]
    return ds.dataset([p for _, p in located], schema=schema, format="parquet", filesystem=fs)


def iter_base_files(paths: Sequence[str], schema: pa.Schema, progress: Reporter | None = None) -> Iterator[pa.Table]:
    """The rows of the base files at `paths`, in order, as `schema`; `progress` counts finished files. Parquet
    files go through one dataset scan per run of them; Lance files (no Arrow dataset format) one by one."""
    done = 0
    for lance, run in itertools.groupby(paths, key=base_format.is_lance):
        files = list(run)
        scan = _lance_files(files, schema) if lance else _parquet_files(files, schema)
        for finished, table in scan:
            if finished and progress is not None:
                done += 1
                progress.update(done)
            if table is not None:
                yield table


def _lance_files(paths: Sequence[str], schema: pa.Schema) -> Iterator[tuple[bool, pa.Table | None]]:
    """(file finished?, rows) of Lance base files, each projected onto `schema` as a dataset scan would."""
    for path in paths:
        for t in iter_base(path, schema):
            if t.num_rows:
                yield False, conform_to_schema(t, schema)
        yield True, None


# Base files one dataset scan reads ahead across. One scan over every file held what its threads decoded ahead of
# a slower consumer (an export's Parquet writer): 0.9 GB at 4 M rows, 1.8 GB at 16 M (bench_data_scale); a scan
# per window of files keeps the read-ahead and bounds it by the window.
FILES_PER_SCAN = 4


def _parquet_files(paths: Sequence[str], schema: pa.Schema) -> Iterator[tuple[bool, pa.Table | None]]:
    """(file finished?, rows) of Parquet base files, by dataset scans on Arrow's threads, FILES_PER_SCAN at once."""
    for start in range(0, len(paths), FILES_PER_SCAN):
        yield from _scan(paths[start:start + FILES_PER_SCAN], schema)


def _scan(paths: Sequence[str], schema: pa.Schema) -> Iterator[tuple[bool, pa.Table | None]]:
    scanner = base_dataset(paths, schema).scanner(columns=schema.names, use_threads=True)
    current = None
    try:
        for tagged in scanner.scan_batches():
            path = tagged.fragment.path
            if current is not None and path != current:
                yield True, None
            current = path
            if tagged.record_batch.num_rows:
                yield False, pa.Table.from_batches([tagged.record_batch], schema=schema)
    except (pa.ArrowInvalid, OSError) as exc:
        # Footers were checked when the read was planned: what fails here is a damaged page or a column whose
        # values do not fit the table's type.
        raise TidemarkError(f"read-optimized read of the base files failed: "
                            f"{str(exc).strip().splitlines()[0]}") from None
    if current is not None:
        yield True, None
