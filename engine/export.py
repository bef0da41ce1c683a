"""Exporting a query result to a single Parquet file (the CLI's `read`).

A full read into a file stops at a corrupt block of a committed instant (CorruptLogBlockError naming its file
and offset) and leaves no output, unless the caller asks to `skip_corrupt`: then each such block is skipped
with a warning, as in-process reads always do (engine.logformat.integrity).
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from engine import placement
from engine.io import storage
from engine.io.parquet_encoding import dictionary_columns
from engine.logformat import integrity
from engine.progress import Progress, tracked
from engine.read.query import QuerySpec, iter_arrow, plan_read
from engine.write.background import consume_in_background


def export_query(base_path: str, query: str | QuerySpec, output: str, local: bool | None = None,
                 on_progress: Progress | None = None, *, skip_corrupt: bool = False) -> int:
    """Write the query result to `output` (one Parquet file); returns the row count.

    In-process or through Spark as `engine.placement` decides from the bytes of the slices to read (`local`:
    the caller's choice). In-process the slices are merged one at a time and streamed into the file. Through
    Spark the slices are merged on executors and written as part files, which are then
    streamed into one file so the result never has to fit in the driver's memory.
    """
    if storage.is_remote(output):
        # An object-store output: the file is made here, then uploaded (a multipart upload appears whole).
        with tempfile.TemporaryDirectory(prefix=".tidemark-export-") as scratch:
            rows = export_query(base_path, query, os.path.join(scratch, "out.parquet"), local, on_progress,
                                skip_corrupt=skip_corrupt)
            storage.upload(os.path.join(scratch, "out.parquet"), output)
            return rows
    output = storage.resolve(output)
    # Validates the table and query, and stops at corrupt blocks found from headers, before any work.
    plan = plan_read(base_path, query, fail_on_corrupt=not skip_corrupt)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    if placement.read_in_process(sum(ref.size for ref in plan.slices), local):
        return _write_stream(output, plan.context.schema, iter_arrow(plan, on_progress))
    # Spark only from here on: an in-process export never imports pyspark.
    from engine.datasource import load_table
    from engine.spark import get_spark, spark_path

    spark = get_spark()
    tmp = tempfile.mkdtemp(prefix=".tidemark-export-", dir=os.path.dirname(os.path.abspath(output)))
    reports = tempfile.mkdtemp(prefix=".tidemark-corrupt-", dir=os.path.dirname(os.path.abspath(output)))
    try:
        df = load_table(spark, base_path, query, fail_on_corrupt=not skip_corrupt, plan=plan, report_dir=reports)
        writer = df.write.mode("overwrite")
        try:
            tracked(spark.sparkContext, lambda: writer.parquet(spark_path(tmp)), on_progress, "tasks")
        except Exception as exc:
            found = integrity.found_in(exc)   # an executor's decode failed on a committed block
            if found is None:
                raise
            raise found from None
        integrity.warn_skipped(integrity.relayed(reports))   # skip_corrupt: what the executors skipped
        parts = sorted(glob.glob(os.path.join(tmp, "part-*.parquet")))
        schema = pq.read_schema(parts[0]) if parts else plan.context.schema
        return _write_stream(output, schema, _row_groups(parts))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(reports, ignore_errors=True)


def _row_groups(parts: list[str]) -> Iterator[pa.Table]:
    """The part files' rows a row group at a time: a part holds as many of the table's files as Spark packed into
    one task (up to spark.sql.files.maxPartitionBytes of input), so reading one whole grew with the table."""
    for path in parts:
        with pq.ParquetFile(path) as part:
            for i in range(part.num_row_groups):
                yield part.read_row_group(i, use_threads=False)


def _write_stream(output: str, schema: pa.Schema, tables: Iterable[pa.Table]) -> int:
    """The rows into one Parquet file at `output`, which appears only complete.

    The file is encoded on a second thread while this one keeps producing the rows (an in-process read's scan or
    merge, a Spark export's part files): pyarrow's Parquet writer encodes on one thread, and with the producer
    waiting on it an export cost about the sum of the two (~0.9 µs per row of bench_data_scale's table). At most
    two tables wait between them, so memory stays that of the producer's read-ahead."""
    rows = [0]
    tmp = output + ".tmp"

    def write_all(arrived: Iterable[pa.Table]) -> None:
        writer: pq.ParquetWriter | None = None
        try:
            for table in arrived:
                if table.num_rows:
                    table = table.cast(schema)
                    if writer is None:   # the first rows decide the dictionaries (engine.io.parquet_encoding)
                        writer = pq.ParquetWriter(tmp, schema, use_dictionary=dictionary_columns(table))
                    writer.write_table(table)
                    rows[0] += table.num_rows
            if writer is None:   # no rows: a file of the schema alone
                writer = pq.ParquetWriter(tmp, schema)
        finally:
            if writer is not None:
                writer.close()

    try:
        consume_in_background(write_all, iter(tables), depth=2)
    except BaseException:
        # A failed read leaves no partial output behind; `output` appears only complete (os.replace).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    os.replace(tmp, output)
    return rows[0]
