"""The hudi 0.5.0 (hudi-rs) reader as a test oracle, and row normalisation for comparisons."""
from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")


def hudi_read(path, query: str = "snapshot", *, begin: str | None = None, end: str | None = None,
              as_of: str | None = None, storage_options: dict[str, str] | None = None) -> pa.Table:
    """hudi-rs's answer to a query: snapshot, read_optimized, time_travel (as_of) or incremental (begin, end].
    `storage_options` reach an object store (aws_endpoint_url, aws_allow_http, ...)."""
    builder = HudiTableBuilder.from_base_uri(str(path))
    if storage_options:
        builder = builder.with_storage_options(storage_options)
    if query == "read_optimized":
        builder = builder.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    options = HudiReadOptions()
    if query == "time_travel" and as_of is not None:
        options = options.with_as_of_timestamp(as_of)
    if query == "incremental":
        options = options.with_query_type(HudiQueryType.Incremental).with_start_timestamp(begin or "0")
        if end is not None:
            options = options.with_end_timestamp(end)
    batches = builder.build().read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def _norm(v):
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return round(v.timestamp() * 1000)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, bytes):
        return v.hex()
    return v


def rows_by_key(table: pa.Table, columns=None, with_meta=("_hoodie_record_key", "_hoodie_partition_path",
                                                           "_hoodie_commit_time")) -> dict:
    """{(partition, record key): {column: normalised value}} for data columns + selected meta columns."""
    if table.num_columns == 0:
        return {}
    cols = columns or [c for c in table.column_names if c not in META or c in with_meta]
    out = {}
    for row in table.select(cols).to_pylist():
        out[(row.get("_hoodie_partition_path"), row.get("_hoodie_record_key"))] = {k: _norm(v) for k, v in row.items()}
    assert len(out) == table.num_rows, "duplicate keys in result"
    return out
