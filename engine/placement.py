"""Where a write, a read or a compaction run runs: in this process, or on Spark.

Spark's driver JVM takes 2–11 s to start on a small machine, far longer than writing a few hundred thousand
rows or reading a table of a few hundred MB. So work that fits comfortably in one process runs here, and Spark
starts only when
- the caller asks for it (`local=False`; the CLI's `--spark`), or
- `SPARK_MASTER` names a cluster (anything but `local…`): whoever set it wants the cluster's executors, or
- the work is big: a write of more than `TIDEMARK_LOCAL_MAX_ROWS` input rows (default 2,000,000), a read
  of more than `TIDEMARK_LOCAL_MAX_MB` MB of base and log files (default 2048), a Spark DataFrame whose size
  Spark estimates above `TIDEMARK_LOCAL_MAX_DATAFRAME_MB` MB (default 128) or cannot estimate, a compaction
  run whose plan reads more than `TIDEMARK_LOCAL_MAX_COMPACTION_MB` MB of base and log files (default 1024).
`local=True` (the CLI's `--local`) always runs in-process. Both ways write the same files (tests compare them).

A compaction run also goes to Spark whenever a session already runs in this process (a control-plane worker
keeps a warm one): its tasks run in separate Python workers, truly in parallel, where this process's threads
share one interpreter. An in-process run merges one file group per CPU on threads (pyarrow and numpy release
the interpreter for most of the work).

An in-process write holds its routed input in memory (about the input's Arrow size, twice at peak), hence the
row limit; an in-process read streams one file slice at a time, so its limit is about time, not memory.
A DataFrame written in-process is collected here as Arrow (`toArrow`; a plain Parquet scan is read by
pyarrow instead) and written by this process's threads instead of being shuffled to Spark tasks — the same
table as Spark's tasks write (schema, file groups, rows), with other task tokens in seqnos and log names. Its
limit is Spark's own size estimate of the DataFrame's plan (a Parquet scan: its files' size on disk, ~30 MB per
million rows of the benchmarks' six columns), since its row count is unknown before it runs.
"""
from __future__ import annotations

import sys

from engine import env

MAX_ROWS_ENV = "TIDEMARK_LOCAL_MAX_ROWS"
MAX_MB_ENV = "TIDEMARK_LOCAL_MAX_MB"
MAX_DATAFRAME_MB_ENV = "TIDEMARK_LOCAL_MAX_DATAFRAME_MB"
DEFAULT_MAX_ROWS = 2_000_000
DEFAULT_MAX_MB = 2048
DEFAULT_MAX_DATAFRAME_MB = 128
MAX_COMPACTION_MB_ENV = "TIDEMARK_LOCAL_MAX_COMPACTION_MB"
DEFAULT_MAX_COMPACTION_MB = 1024


def cluster_master() -> bool:
    """True when SPARK_MASTER names a cluster rather than a local master."""
    master = env.text("SPARK_MASTER")
    return bool(master) and not master.startswith("local")


def spark_running() -> bool:
    """Whether a SparkContext is up in this process (pyspark is not imported to find out)."""
    # pyspark may be half-imported (another thread) or a Spark Connect client without SparkContext
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    return getattr(context, "_active_spark_context", None) is not None


def _limit(name: str, default: int) -> int:
    return env.whole(name, default, minimum=0)


def max_local_rows() -> int:
    return _limit(MAX_ROWS_ENV, DEFAULT_MAX_ROWS)


def max_local_bytes() -> int:
    return _limit(MAX_MB_ENV, DEFAULT_MAX_MB) * 2**20


def max_local_dataframe_bytes() -> int:
    return _limit(MAX_DATAFRAME_MB_ENV, DEFAULT_MAX_DATAFRAME_MB) * 2**20


def max_local_compaction_bytes() -> int:
    return _limit(MAX_COMPACTION_MB_ENV, DEFAULT_MAX_COMPACTION_MB) * 2**20


def _decide(local: bool | None, big: bool) -> bool:
    if local is not None:
        return local
    return not cluster_master() and not big


def write_in_process(rows: int, local: bool | None = None) -> bool:
    """Whether a write of `rows` input rows runs in-process (`local`: the caller's explicit choice)."""
    return _decide(local, rows > max_local_rows())


def read_in_process(size_bytes: int, local: bool | None = None) -> bool:
    """Whether a read of `size_bytes` of base and log files runs in-process."""
    return _decide(local, size_bytes > max_local_bytes())


def write_dataframe_in_process(estimated_bytes: int | None, local: bool | None = None) -> bool:
    """Whether a Spark DataFrame's write is collected and written in-process (`estimated_bytes`: Spark's size
    estimate of the DataFrame, None when it has none — then Spark writes it unless `local` says otherwise)."""
    return _decide(local, estimated_bytes is None or estimated_bytes > max_local_dataframe_bytes())


def compaction_in_process(size_bytes: int, local: bool | None = None, spark_running: bool = False) -> bool:
    """Whether a compaction run whose plan reads `size_bytes` of base and log files runs in-process
    (`spark_running`: a Spark session is already up in this process, and is used unless `local` says not)."""
    if local is None and spark_running:
        return False
    return _decide(local, size_bytes > max_local_compaction_bytes())
