"""Input rows of a write, checked against the table before anything is written.

Every rule here runs on the driver, before the deltacommit is opened, so bad input changes nothing:
- an input file must be readable and hold at least one row (.parquet or a folder of them, .csv, .jsonl);
- upserts and inserts need the record key, partition, ordering and event-time columns; deletes need the
  record key and partition columns and may only carry columns the table knows (extra upsert columns are
  additive schema evolution);
- a record key may not be null or empty, as Java Hudi's key generators refuse it (with several key fields,
  not all of them);
- every column the table already has must convert to the table's type (`schema.conform_column`), and
  event times must lie in years 0001..9999;
- a map may not hold a key twice (`schema.check_map_keys`; a DataFrame's maps are checked by the tasks).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.config import eventtime
from engine.config.choices import META_FIELDS
from engine.config.properties import TableConfig
from engine.config.schema import arrow_schema, check_map_keys, conform_column, table_avro_schema
from engine.errors import InputError
from engine.io import storage
from engine.logformat.avro_schema_map import AvroCodecError, has_map
from engine.timeline.instants import Timeline

PARQUET, CSV, JSONL = "parquet", "csv", "jsonl"


@dataclass(frozen=True)
class InputFiles:
    """What `--input PATH` names: its format and the files to read."""

    path: str
    format: str
    files: tuple[str, ...]


def locate(path: str) -> InputFiles:
    """The input's format and files; a missing, empty or unsupported input raises InputError."""
    path = storage.resolve(path)   # executors run elsewhere: never a path relative to this process
    if not storage.exists(path):
        raise InputError(f"input file {path} does not exist")
    lower = path.lower()
    if storage.is_dir(path):
        files = tuple(sorted(storage.join(path, f) for f in storage.list_names(path) if f.endswith(".parquet")))
        if not files:
            raise InputError(f"no .parquet files in {path}")
        return InputFiles(path, PARQUET, files)
    fmt = PARQUET if lower.endswith(".parquet") else CSV if lower.endswith(".csv") else \
        JSONL if lower.endswith((".jsonl", ".json")) else None
    if fmt is None:
        raise InputError(f"unsupported input {path}: expected .parquet, .csv or .jsonl")
    if storage.size(path) == 0:
        raise InputError(f"input file {path} is empty")
    return InputFiles(path, fmt, (path,))


def read_text(source: InputFiles) -> pa.Table:
    """A .csv or .jsonl input as an Arrow table (types inferred), with naive timestamps made UTC."""
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson

    try:
        with storage.open_input(source.path) as fh:
            table = pacsv.read_csv(fh) if source.format == CSV else pajson.read_json(fh)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {source.path} as {source.format.upper()}: {_first_line(exc)}") from None
    if table.num_rows == 0:
        raise InputError(f"input file {source.path} has no rows")
    binary = [f.name for f in table.schema if pa.types.is_binary(f.type)]
    if binary:  # the text readers fall back to bytes for a column that is not UTF-8
        raise InputError(f"{source.path}: column(s) {', '.join(binary)} are not valid UTF-8 text")
    return _naive_as_utc(table)


def parquet_schema(files: tuple[str, ...]) -> pa.Schema:
    """The common schema of Parquet inputs; unreadable files, differing schemas or no rows raise InputError."""
    schemas, rows = [], 0
    for path in files:
        try:
            meta = pq.read_metadata(storage.parquet_source(path))
            schemas.append(meta.schema.to_arrow_schema())
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"cannot read {path} as Parquet: {_first_line(exc)}") from None
        rows += meta.num_rows
    for path, schema in zip(files[1:], schemas[1:]):
        if not schema.equals(schemas[0], check_metadata=False):
            raise InputError(f"input files disagree on their schema: {files[0]} vs {path}")
    if rows == 0:
        raise InputError(f"input {files[0] if len(files) == 1 else storage.parent(files[0])} has no rows")
    return schemas[0]


def table_schema(cfg: TableConfig) -> pa.Schema | None:
    """The table's data columns and types (no meta fields), or None before its first write."""
    text = Timeline.load(cfg.base_path).latest_schema()
    if not text:
        return None
    return pa.schema([f for f in arrow_schema(json.loads(text)) if f.name not in META_FIELDS])


def check_columns(cfg: TableConfig, current: pa.Schema | None, names: list[str], operation: str,
                  source: str) -> None:
    """Required columns present, each column once; a delete carries no column the table does not know."""
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise InputError(f"{source}: column(s) {', '.join(repeated)} appear more than once")
    needed = list(cfg.record_key_fields) + list(cfg.partition_fields)
    if operation != "delete":
        needed += [f for f in (cfg.ordering_field, cfg.event_time_field) if f]
    missing = [c for c in dict.fromkeys(needed) if c not in names]
    if missing:
        raise InputError(f"{source} lacks column(s) {', '.join(missing)} required by table {cfg.name}")
    if operation == "delete":
        known = set(needed) | set(META_FIELDS) | set(current.names if current is not None else [])
        known |= {f for f in (cfg.ordering_field, cfg.event_time_field) if f}
        unknown = [c for c in names if c not in known]
        if unknown:
            raise InputError(f"{source}: delete input has column(s) {', '.join(unknown)} that table {cfg.name} "
                             "does not have")


def check_types(current: pa.Schema | None, incoming: pa.Schema, source: str) -> None:
    """Column types that can never go into the table: a type the conversion to an existing column refuses
    whatever the values (a number into a timestamp column, ...), or a new column without an Avro type.

    The values of a Spark DataFrame are converted on the executors; these type-level refusals come first.
    """
    for name in _converted_columns(current, incoming):
        conform(current, pa.table({name: pa.array([], incoming.field(name).type)}), source)
    known = set(current.names) if current is not None else set()
    new = pa.schema([f for f in incoming if f.name not in known and f.name not in META_FIELDS])
    nulls = [f.name for f in new if pa.types.is_null(f.type)]
    if nulls:
        raise InputError(f"{source}: new column(s) {', '.join(nulls)} hold only nulls, so their type is unknown; "
                         "drop them or give them a value")
    try:
        table_avro_schema("input", new)
    except AvroCodecError as exc:
        raise InputError(f"{source}: {exc}") from None


def check_rows(cfg: TableConfig, current: pa.Schema | None, rows: pa.Table, source: str) -> pa.Table:
    """Keys present and non-empty, known columns in the table's types, event times in range.

    Returns `rows` with every column the table knows converted to the table's type.
    """
    check_keys(cfg, rows, source)
    rows = conform(current, rows, source)
    event = cfg.event_time_field
    if event and event in rows.column_names:
        eventtime.check_range(rows.column(event), f"{source}: column {event!r}")
    return rows


def conform(current: pa.Schema | None, rows: pa.Table, source: str) -> pa.Table:
    """Columns the table already has, converted to its types (InputError names the file, column, value)."""
    if current is None:
        return rows
    types = {f.name: f.type for f in current}
    for i, name in enumerate(rows.column_names):
        if name in types and rows.schema.field(i).type != types[name]:
            try:
                rows = rows.set_column(i, name, conform_column(rows.column(i), types[name], name))
            except InputError as exc:
                raise InputError(f"{source}: {exc}") from None
    return rows


def check_keys(cfg: TableConfig, rows: pa.Table, source: str) -> None:
    """Java's key generators: a single key field may not be null or empty; several may not all be."""
    check_keys_of(cfg.record_key_fields, rows, source)


def check_keys_of(key_fields: Sequence[str], rows: pa.Table, source: str) -> None:
    fields = list(key_fields)
    if not fields:
        return
    blank = None
    for name in fields:
        values = rows.column(name)
        text = pc.cast(values, pa.string()) if not pa.types.is_string(values.type) else values
        is_blank = pc.fill_null(pc.equal(text, ""), True)
        blank = is_blank if blank is None else pc.and_(blank, is_blank)
    hits = pc.indices_nonzero(blank)
    if len(hits):
        row = hits[0].as_py()
        values = {n: rows.column(n)[row].as_py() for n in fields}
        state = "null" if all(v is None for v in values.values()) else "empty"
        shown = ", ".join(f"{n}={v!r}" for n, v in values.items())
        plural = "s" if len(fields) > 1 else ""
        raise InputError(f"{source}: row {row} has a{'n' if state == 'empty' else ''} {state} record key "
                         f"(field{plural} {shown}); Java Hudi refuses null or empty record keys")


def check_parquet_values(cfg: TableConfig, current: pa.Schema | None, files: tuple[str, ...],
                         schema: pa.Schema) -> None:
    """Value checks on Parquet inputs, reading only the columns they need (keys, event time, converted ones,
    maps).

    Column statistics settle the common case without reading: a key column without nulls whose minimum is
    not "", a timestamp event-time column whose min and max are in range.
    """
    converted = _converted_columns(current, schema)
    maps = [f.name for f in schema if has_map(f.type)]
    for path in files:
        meta = pq.read_metadata(storage.parquet_source(path))
        keys = [k for k in cfg.record_key_fields if k in converted or not _stats_prove_key(meta, schema, k)]
        event = cfg.event_time_field
        events = [event] if event in schema.names and (event in converted or not _stats_prove_time(meta, str(event))) else []
        columns = list(dict.fromkeys([*keys, *events, *converted, *maps]))
        if not columns:
            continue
        if keys and len(cfg.record_key_fields) > 1:  # blank composite keys are judged on all their fields
            columns = list(dict.fromkeys([*cfg.record_key_fields, *columns]))
        try:
            rows = pq.read_table(storage.parquet_source(path), columns=columns, use_threads=True)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"cannot read {path} as Parquet: {_first_line(exc)}") from None
        key_fields = cfg.record_key_fields if keys else ()
        check_keys_of(key_fields, rows, path)
        rows = conform(current, rows, path)
        if events:
            eventtime.check_range(rows.column(event), f"{path}: column {event!r}")
        _check_maps(rows, [m for m in maps if m not in converted], path)   # `conform` checked the others


def _check_maps(rows: pa.Table, names: list[str], source: str) -> None:
    """Maps holding a key twice are refused here, before the write opens its instant, rather than by its tasks."""
    for name in names:
        try:
            check_map_keys(rows.column(name).combine_chunks(), name)
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None


def _column_stats(meta: pq.FileMetaData, name: str) -> list[Any] | None:
    """Per row group statistics of a top-level column, or None when any row group lacks them."""
    index = meta.schema.names.index(name) if name in meta.schema.names else None
    if index is None:
        return None
    out = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(index).statistics
        if stats is None or not stats.has_min_max or not stats.has_null_count:
            return None
        out.append(stats)
    return out


def _stats_prove_key(meta: pq.FileMetaData, schema: pa.Schema, name: str) -> bool:
    stats = _column_stats(meta, name)
    if stats is None:
        return False
    text = pa.types.is_string(schema.field(name).type) or pa.types.is_large_string(schema.field(name).type)
    return all(s.null_count == 0 and (not text or s.min_raw != b"") for s in stats)


_UNIT_MS = {"milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}


def _stats_prove_time(meta: pq.FileMetaData, name: str) -> bool:
    stats = _column_stats(meta, name)
    if not stats:
        return stats is not None
    per_ms = next((v for k, v in _UNIT_MS.items() if f"timeUnit={k}" in str(stats[0].logical_type)), None)
    if per_ms is None or stats[0].physical_type != "INT64" or not str(stats[0].logical_type).startswith("Timestamp"):
        return False
    return all(eventtime.MIN_MS <= s.min_raw // per_ms and s.max_raw // per_ms <= eventtime.MAX_MS for s in stats)


def _converted_columns(current: pa.Schema | None, schema: pa.Schema) -> list[str]:
    if current is None:
        return []
    types = {f.name: f.type for f in current}
    return [f.name for f in schema if f.name in types and f.type != types[f.name]]


def _naive_as_utc(table: pa.Table) -> pa.Table:
    """Inferred naive timestamps are UTC (the one time-zone rule, see `engine.config.eventtime`)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz is None:
            table = table.set_column(i, f.name, table.column(i).cast(pa.timestamp(f.type.unit, tz="UTC")))
    return table


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
