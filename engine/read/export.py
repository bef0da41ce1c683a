"""Exporting a query result to a single Parquet file (the CLI's `read`)."""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile

import pyarrow.parquet as pq

from engine.progress import Progress, tracked
from engine.read.query import QuerySpec, iter_arrow, plan_read


def export_query(base_path: str, query: str | QuerySpec, output: str, use_spark: bool = True,
                 on_progress: Progress | None = None) -> int:
    """Write the query result to `output` (one Parquet file); returns the row count.

    Through Spark the slices are merged on executors and written as part files, which are then
    streamed into one file so the result never has to fit in the driver's memory.
    """
    plan = plan_read(base_path, query)  # validates the table and query before any work
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    if not use_spark:
        return _write_stream(output, plan.context.schema, iter_arrow(plan, on_progress))
    from engine.read.datasource import load_table
    from engine.spark import get_spark

    spark = get_spark()
    tmp = tempfile.mkdtemp(prefix=".tidemark-export-", dir=os.path.dirname(os.path.abspath(output)))
    try:
        writer = load_table(spark, base_path, query).write.mode("overwrite")
        tracked(spark.sparkContext, lambda: writer.parquet(tmp), on_progress, "tasks")
        parts = sorted(glob.glob(os.path.join(tmp, "part-*.parquet")))
        schema = pq.read_schema(parts[0]) if parts else plan.context.schema
        return _write_stream(output, schema, (pq.ParquetFile(p).read(use_threads=False) for p in parts))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_stream(output: str, schema, tables) -> int:
    rows = 0
    tmp = output + ".tmp"
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for table in tables:
                if table.num_rows:
                    writer.write_table(table.cast(schema))
                    rows += table.num_rows
    except BaseException:
        # A failed read leaves no partial output behind; `output` appears only complete (os.replace).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    os.replace(tmp, output)
    return rows
