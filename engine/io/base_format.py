"""Base files by format: Parquet (Hudi's default) and Lance (`hoodie.table.base.file.format=LANCE`, Hudi 1.1+).

A Lance base file is one standalone Lance *file* (the lance file writer's output: data pages, column metadata
and a footer), not a Lance dataset folder; Hudi names it like a Parquet base, `<fileId>_<token>_<instant>.lance`,
and keeps the same footer keys in the file's schema metadata (`hoodie_min_record_key`, ...). A file's format
is its extension, so callers never branch on format: they open a `BaseFile` to read and an `open_writer` to write.

Lance reads and writes local paths; on an object store a Lance base is copied through a local temp file (read:
downloaded whole before decoding; written: spooled locally, then streamed to the sink the caller opened), so
every remote byte still goes through `engine.io.storage`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.errors import TidemarkError, UnsupportedTableError
from engine.io import storage
from engine.io.parquet_encoding import dictionary_columns

PARQUET = ".parquet"
LANCE = ".lance"
FORMAT_KEY = "hoodie.table.base.file.format"
_EXTENSIONS = {"PARQUET": PARQUET, "LANCE": LANCE}

# The Lance file format version Hudi's writer produces (lance-core's default, stored as 0.3 in the footer):
# written when there is no older base file to match, so every Hudi reader of Lance tables reads our files.
LANCE_DEFAULT_VERSION = "2.0"
_COPY_CHUNK = 8 << 20
_TAIL = struct.Struct("<HH4s")   # the end of every Lance file: major, minor, magic


def table_extension(props: Mapping[str, str]) -> str:
    """The extension of the table's base files, from `hoodie.table.base.file.format` (PARQUET when absent)."""
    fmt = props.get(FORMAT_KEY, "PARQUET").strip().upper()
    if fmt not in _EXTENSIONS:
        raise UnsupportedTableError(f"{FORMAT_KEY}={fmt} is not supported (Tidemark reads and writes "
                                    f"{' and '.join(_EXTENSIONS)} base files)")
    return _EXTENSIONS[fmt]


def is_lance(path: str) -> bool:
    return path.endswith(LANCE)


def unreadable(path: str, exc: BaseException) -> TidemarkError:
    """The error every reader raises for a base file that does not decode: it names the file."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return TidemarkError(f"base file {path} is unreadable: {first}")


# ------------------------------------------------------------------------------------------- reading


class BaseFile(Protocol):
    """An open base file: its footer facts and its rows in batches, in file order."""

    path: str

    @property
    def num_rows(self) -> int: ...

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def data_bytes(self) -> int:
        """Bytes of the rows as the footer sizes them (Parquet: uncompressed; Lance: encoded); 0 if unknown."""
        ...

    def batches(self, columns: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        """The rows' `columns` (all present in the file) in batches of at most `batch_rows`."""
        ...


class ParquetBase:
    """A Parquet base read one row group at a time, so a large base never sits in memory whole."""

    def __init__(self, path: str, buffer_size: int = 0) -> None:
        self.path = path
        # On an object store, pre-buffering coalesces a row group's column chunks into few ranged GETs.
        self._pf = pq.ParquetFile(storage.parquet_source(path), pre_buffer=storage.is_remote(path),
                                  buffer_size=buffer_size)

    @property
    def num_rows(self) -> int:
        return int(self._pf.metadata.num_rows)

    @property
    def schema(self) -> pa.Schema:
        return self._pf.schema_arrow

    @property
    def data_bytes(self) -> int:
        meta = self._pf.metadata
        return int(sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)))

    def batches(self, columns: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        # Row group by row group: a batch never spans two, so only one group's pages are decoded at a time.
        for i in range(self._pf.metadata.num_row_groups):
            yield from self._pf.iter_batches(batch_size=batch_rows, row_groups=[i], columns=list(columns),
                                             use_threads=False)


class LanceBase:
    """A Lance base file (a local path: see `open_base` for object stores)."""

    def __init__(self, path: str, local: str) -> None:
        from lance.file import LanceFileReader

        self.path = path
        self._local = local
        self._reader = LanceFileReader(local)
        self._meta = self._reader.metadata()

    @property
    def num_rows(self) -> int:
        return int(self._meta.num_rows)

    @property
    def schema(self) -> pa.Schema:
        return self._meta.schema

    @property
    def data_bytes(self) -> int:
        return int(self._meta.num_data_bytes)

    @property
    def version(self) -> str:
        """The file's format version as a writer names it (`version_name`)."""
        # pylance's stub leaves the two version fields out; the runtime object has them.
        return version_name(self._meta.major_version, self._meta.minor_version)  # type: ignore[attr-defined]

    def batches(self, columns: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        from lance.file import LanceFileReader

        # The reader decodes only the projected columns (an empty projection is refused: take one, drop it).
        wanted = list(columns) or self.schema.names[:1]
        reader = self._reader if wanted == self.schema.names else LanceFileReader(self._local, columns=wanted)
        step = max(1, batch_rows)
        # One row range at a time: read_all schedules the whole file's pages ahead, so a large base sat in memory
        # whole (2M rows, 225 MB: peak RSS +280 MB with any batch size); ranges of ~32 MB keep it to +185 MB.
        for start in range(0, self.num_rows, step):
            for batch in reader.read_range(start, min(step, self.num_rows - start), batch_size=step).to_batches():
                yield batch.select(list(columns)) if batch.schema.names != list(columns) else batch


@contextlib.contextmanager
def open_base(path: str, buffer_size: int = 0) -> Iterator[BaseFile]:
    """The base file at `path`, opened by its format; a file that does not decode raises `unreadable`.
    `buffer_size` > 0 reads Parquet column chunks through a buffered stream of that size (engine.compaction)."""
    if not is_lance(path):
        try:
            yield ParquetBase(path, buffer_size)
        except (pa.ArrowInvalid, OSError) as exc:
            raise unreadable(path, exc) from None
        return
    with _local_copy(path) as local:
        try:
            yield LanceBase(path, local)
        except (OSError, ValueError, RuntimeError) as exc:
            # Lance reports a bad footer or page as OSError, a missing file as ValueError.
            raise unreadable(path, exc) from None


@contextlib.contextmanager
def _local_copy(path: str) -> Iterator[str]:
    """`path` itself when local; else a temp copy of the object, removed when done."""
    if not storage.is_remote(path):
        yield path
        return
    fd, local = tempfile.mkstemp(suffix=LANCE, prefix="tidemark-base-")
    try:
        with os.fdopen(fd, "wb") as out, contextlib.closing(storage.open_input(path)) as src:
            _copy(src, out)
        yield local
    finally:
        os.remove(local)


def check_readable(path: str) -> None:
    """The footer of the base file at `path` decodes (a truncated file fails here, by name); else `unreadable`."""
    if is_lance(path):
        with open_base(path) as base:
            base.num_rows   # noqa: B018 - opening read the footer; the row count is what it must give
        return
    try:
        pq.read_metadata(storage.parquet_source(path))
    except (pa.ArrowInvalid, OSError) as exc:
        raise unreadable(path, exc) from None


def read_rows_of_keys(path: str, key_column: str, columns: Sequence[str], keys: pa.Array) -> pa.Table:
    """The rows of the base file whose `key_column` is in `keys`, with those of `columns` the file has."""
    if not is_lance(path):
        fs, inner = storage.filesystem(path)
        names = set(pq.read_schema(inner, filesystem=fs).names)
        present = [c for c in columns if c in names]
        return pq.read_table(inner, columns=present, filters=[(key_column, "in", keys.to_pylist())], filesystem=fs)
    with open_base(path) as base:
        present = [c for c in columns if c in base.schema.names]
        read = present if key_column in present else [key_column, *present]
        parts = [b.filter(pc.is_in(b.column(key_column), value_set=keys)) for b in base.batches(read, 65_536)]
        found = pa.Table.from_batches(parts, schema=base.schema.empty_table().select(read).schema)
        return found.select(present)


# ------------------------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class WriteOptions:
    """How a new base file is written. The Parquet knobs are Hudi's `hoodie.parquet.*`; Lance pages are sized by
    bytes and encoded by the format itself, so it takes neither."""

    compression: str = "snappy"
    row_group_rows: int = 1_000_000
    like: str | None = None   # a base this file replaces: a Lance file keeps its format version


class BaseWriter(Protocol):
    def write(self, t: pa.Table) -> None: ...

    def add_footer(self, meta: Mapping[str, str]) -> None:
        """Footer keys (Parquet key-value metadata, Lance schema metadata), e.g. Hudi's min/max record keys."""
        ...


class _ParquetWriter:
    """Opened at the first rows: they decide which columns get a dictionary (`parquet_encoding`)."""

    def __init__(self, sink: str | IO[bytes] | pa.NativeFile, schema: pa.Schema, opts: WriteOptions) -> None:
        self._sink, self._schema = sink, schema
        self._codec = "NONE" if opts.compression == "none" else opts.compression
        self._rows = opts.row_group_rows
        self._writer: pq.ParquetWriter | None = None

    def _opened(self, first: pa.Table | None = None) -> pq.ParquetWriter:
        if self._writer is None:
            dictionary = dictionary_columns(first) if first is not None else True
            self._writer = pq.ParquetWriter(self._sink, self._schema, compression=self._codec,
                                            use_dictionary=dictionary)
        return self._writer

    def write(self, t: pa.Table) -> None:
        self._opened(t if t.num_rows else None).write_table(t, row_group_size=self._rows)

    def add_footer(self, meta: Mapping[str, str]) -> None:
        self._opened().add_key_value_metadata(dict(meta))

    def close(self) -> None:
        self._opened().close()


class _LanceWriter:
    def __init__(self, local: str, schema: pa.Schema, version: str) -> None:
        from lance.file import LanceFileWriter

        self._schema = schema
        try:
            self._writer = LanceFileWriter(local, schema, version=version)
        except NotImplementedError as exc:   # a type this version cannot encode (maps before 2.2)
            raise TidemarkError(f"a Lance {version} base file cannot hold this schema: "
                                f"{str(exc).splitlines()[0]}") from None

    def write(self, t: pa.Table) -> None:
        if t.num_rows:
            self._writer.write_batch(t.cast(self._schema) if t.schema != self._schema else t)

    def add_footer(self, meta: Mapping[str, str]) -> None:
        for key, value in meta.items():
            self._writer.add_schema_metadata(key, value)

    def close(self) -> None:
        self._writer.close()


@contextlib.contextmanager
def open_writer(dest: str | IO[bytes] | pa.NativeFile, name: str, schema: pa.Schema,
                opts: WriteOptions = WriteOptions()) -> Iterator[BaseWriter]:
    """A writer of the base file `name` (its extension says the format) into `dest`: a local path, or a stream
    the caller opened (an object store upload); the file is complete once the block exits without error."""
    if not is_lance(name):
        parquet = _ParquetWriter(dest, schema, opts)
        yield parquet
        parquet.close()
        return
    version = lance_version(opts.like) if opts.like and is_lance(opts.like) else LANCE_DEFAULT_VERSION
    if isinstance(dest, str):
        lance = _LanceWriter(dest, schema, version)
        yield lance
        lance.close()
        return
    spool = tempfile.mkdtemp(prefix="tidemark-lance-")
    try:
        local = os.path.join(spool, name)
        lance = _LanceWriter(local, schema, version)
        yield lance
        lance.close()
        with open(local, "rb") as src:
            _copy(src, dest)
    finally:
        shutil.rmtree(spool, ignore_errors=True)


def version_name(major: int, minor: int) -> str:
    """A Lance file's stored version as a writer names it: "2.0" is stored as 0.3, the legacy ones as 0.1/0.2."""
    if major == 0:
        return LANCE_DEFAULT_VERSION if minor == 3 else "legacy"
    return f"{major}.{minor}"


def lance_version(path: str) -> str:
    """The format version of the Lance file at `path`, from its last 8 bytes (major and minor as little-endian
    u16, then the magic "LANC"): one ranged read, where opening the file on a store would download it whole."""
    try:
        with contextlib.closing(storage.open_input(path)) as src:
            src.seek(-_TAIL.size, os.SEEK_END)
            major, minor, magic = _TAIL.unpack(src.read(_TAIL.size))
    except (OSError, struct.error) as exc:
        raise unreadable(path, exc) from None
    if magic != b"LANC":
        raise unreadable(path, ValueError("no Lance magic at the end of the file"))
    return version_name(major, minor)


def _copy(src: Any, out: Any) -> None:
    while chunk := src.read(_COPY_CHUNK):
        out.write(chunk)
