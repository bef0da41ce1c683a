"""Which columns of a Parquet file get a dictionary: the encoding choice every Parquet writer of Tidemark shares
(Parquet log blocks, compacted base files, overwrite base files, query exports).

pyarrow builds a dictionary for every column by default and gives it up only once it outgrows its page limit: for
unique columns (`_hoodie_commit_seqno`, the record key, most data) that hashes every value for nothing — half a
Parquet block's encoding time, ~40 % of an export's (0.50 → 0.32 µs per row of bench_data_scale's schema,
44 → 36 MB), and a bigger file. Parquet-mr (Spark's and Java Hudi's writer) drops such dictionaries after the first
page likewise. Readers are indifferent to the choice: each column chunk says how it is encoded.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

DICTIONARY_SAMPLE = 2048   # rows sampled per column to decide its dictionary encoding


def dictionary_columns(table: pa.Table) -> list[str] | bool:
    """The columns worth a dictionary: those with at most half as many distinct values as rows in an evenly
    spread sample of `table`'s rows (the first rows a writer gets stand for the file). A table with nested columns
    keeps pyarrow's default (True: every column) — its leaves have paths of their own."""
    if any(pa.types.is_nested(f.type) for f in table.schema):
        return True
    n = table.num_rows
    sample = table if n <= DICTIONARY_SAMPLE else table.take(pa.array(range(0, n, n // DICTIONARY_SAMPLE), pa.int64()))
    return [name for name, column in zip(sample.column_names, sample.columns)
            if _few_distinct(column, max(1, sample.num_rows))]


def _few_distinct(column: pa.ChunkedArray, rows: int) -> bool:
    try:
        return 2 * int(pc.count_distinct(column, mode="all").as_py()) <= rows
    except pa.ArrowNotImplementedError:   # a type without the kernel (null): pyarrow's default, a dictionary
        return True
