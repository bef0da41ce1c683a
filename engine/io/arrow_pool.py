"""Arrow's memory pool for executor work that streams large files.

pyarrow's default pool (mimalloc) keeps freed pages, so a task streaming a 1 GB base file row group by
row group sees its RSS climb with every group even though Arrow holds only ~one group at a time.
jemalloc gives the pages back: measured on a 4 x 1M-row base, peak RSS 860 MB -> 550 MB.
`pa.set_memory_pool` only reaches allocations pyarrow makes for Python; Arrow's C++ code (the Parquet
reader's decoding among it) keeps the process default, which only `ARROW_DEFAULT_MEMORY_POOL` set before
pyarrow loads can change: executors get it from their environment (`executor_pool_env`).

That bound costs time where memory is allocated and freed over and over: jemalloc, as Arrow configures it, hands
freed pages back at once, so every new buffer faults its pages in again (reading the 8 base files of
bench_read_floor: ~120,000 minor faults and ~0.25 s of kernel time per pass, against ~3,000 with mimalloc). A
snapshot read task holds one slice's log winners and one base batch at a time, so it takes its pyarrow
allocations from mimalloc, which keeps and reuses freed pages, and hands them back after each slice
(`reusing_pool`). Python workers are reused across tasks, so each kind of task selects its pool when it starts.
"""
from __future__ import annotations

import functools
import os

import pyarrow as pa

POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


@functools.cache
def executor_pool_env() -> dict[str, str]:
    """The environment that makes a fresh executor process use jemalloc throughout (empty when this pyarrow
    has no jemalloc, or when the user already chose a pool)."""
    if os.environ.get(POOL_ENV):
        return {POOL_ENV: os.environ[POOL_ENV]}
    try:
        pa.jemalloc_memory_pool()
    except (NotImplementedError, AttributeError):
        return {}
    return {POOL_ENV: "jemalloc"}


def use_returning_pool() -> str:
    """Switch this process's pyarrow allocations to jemalloc when the wheel has it; returns the pool in use. Called
    at the start of every task that needs the bound: a reused worker may have run a read (mimalloc) before."""
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (NotImplementedError, AttributeError):  # a pyarrow built without jemalloc keeps its default
        pass
    return str(pa.default_memory_pool().backend_name)


def reusing_pool() -> pa.MemoryPool:
    """Switch this process's pyarrow allocations to mimalloc (freed pages are kept and reused) and return it, for
    work whose live memory stays bounded on its own; the caller hands the kept pages back with
    `pool.release_unused()` when a unit of work ends. Wheels without mimalloc keep the current pool."""
    try:
        pa.set_memory_pool(pa.mimalloc_memory_pool())
    except (NotImplementedError, AttributeError):
        pass
    return pa.default_memory_pool()
