"""A write's tasks run in this process: the Spark tasks of `engine.write.pipeline` without Spark.

Same steps as the Parquet path's two Spark stages: read the input in chunks, route each chunk
(`engine.index.routing`), gather each (partition, bucket)'s rows in input order, then write every file
group's logs (`engine.write.log_writer`) — on a thread pool, since pyarrow and numpy release the GIL for most
of that work.

The files are those a Spark run writes: file groups are dealt into tasks exactly as `SparkContext.parallelize`
slices a list, and task i writes with write token `i-0-0`. Log bytes (their seqnos carry the task number)
are then the same as a Spark run's on as many cores; names differ only in the token's stage id.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from engine.config.layout import write_partition_metadata
from engine.index import routing
from engine.index.keys import check_partition_path
from engine.io import storage
from engine.io.naming import write_token
from engine.progress import Progress, Reporter
from engine.write import log_writer
from engine.write.job import WriteJob

T = TypeVar("T")
Piece = tuple[pa.Table, np.ndarray | None]         # routed rows and the row numbers of one group (None: all)
Group = tuple[tuple[str, int], list[Piece]]
ROUTE_ROWS = 131_072   # rows routed and grouped at a time


def workers() -> int:
    """Threads for the write stage; Spark's local[*] default parallelism is the core count too."""
    return max(1, os.cpu_count() or 1)


def spark_slices(items: Sequence[T], n: int) -> list[list[T]]:
    """`items` split into `n` slices as `SparkContext.parallelize(items, n)` splits them.

    PySpark pickles the list in batches of max(1, min(len // n, 1024)) items and the JVM slices the batches
    evenly (ParallelCollectionRDD.slice), so the split is by batch, not by item.
    """
    batch = max(1, min(len(items) // n, 1024))
    n_batches = -(-len(items) // batch)
    bounds = [(i * n_batches // n) * batch for i in range(n + 1)]
    return [list(items[bounds[i]:min(bounds[i + 1], len(items))]) for i in range(n)]


def group_rows(routed: Iterable[pa.Table]) -> list[Group]:
    """Each (partition, bucket)'s rows over all routed chunks, chunks in input order; groups sorted by key.

    Each chunk is reordered by group in one take (`log_writer.grouped`); a group's pieces are slices of it."""
    pieces: dict[tuple[str, int], list[Piece]] = {}
    for table in routed:
        if table.num_rows:
            ordered, spans = log_writer.grouped(table)
            for key, start, count in spans:
                pieces.setdefault(key, []).append((ordered.slice(start, count), None))
    return sorted(pieces.items(), key=lambda item: item[0])


def _rows(pieces: list[Piece]) -> pa.Table:
    tables = [t if rows is None else t.take(pa.array(rows)) for t, rows in pieces]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def route_all(rt: routing.Routing, chunks: Iterable[pa.Table]) -> list[Group]:
    """Route and group the input; a chunk bigger than ROUTE_ROWS (a Parquet row group can hold a million rows)
    is routed in zero-copy slices, so each gather of `group_rows` reads a source that stays in the cache."""
    return group_rows(routing.route(rt, chunk.slice(start, ROUTE_ROWS))
                      for chunk in chunks for start in range(0, chunk.num_rows, ROUTE_ROWS))


def write_groups(job: WriteJob, groups: list[Group], on_progress: Progress | None = None) -> list[dict[str, Any]]:
    """Write every group's logs, tasks as Spark's write stage would form them; returns the write stats."""
    n = max(1, min(len(groups), workers() * 2))
    slices = spark_slices(groups, n)
    reporter = Reporter(on_progress, len(groups), "file groups")
    # Each partition's metadata file first, here: its writer stages it under a per-process name, which two
    # threads of one process must not share. The tasks then find it written.
    for partition in sorted({p for (p, _), _ in groups}):
        check_partition_path(partition)
        write_partition_metadata(job.base_path, partition, job.instant)
    done = [0]
    lock = threading.Lock()

    def task(index: int) -> list[dict[str, Any]]:
        token = write_token(index, 0, 0)
        stats: list[dict[str, Any]] = []
        # A group's logs are fsynced and linked while the next group encodes, as in a Spark write task.
        with storage.Publisher() as publisher:
            for (partition, bucket), pieces in slices[index]:
                stats += log_writer.write_group(job, partition, bucket, _rows(pieces), token, publisher.publish)
                with lock:
                    done[0] += 1
                    reporter.update(done[0])
        return stats

    if len(slices) == 1 or workers() == 1:
        results = [task(i) for i in range(len(slices))]
    else:
        with ThreadPoolExecutor(min(workers(), len(slices)), thread_name_prefix="tidemark-write") as pool:
            results = list(pool.map(task, range(len(slices))))
    reporter.finish()
    return [s for part in results for s in part]
