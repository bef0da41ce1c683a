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

Which freed pages jemalloc hands back is its decay setting, and executors keep them (`JE_ARROW_MALLOC_CONF`
with no decay): a compaction task frees and allocates buffers of the same sizes batch after batch, so kept pages
are reused instead of faulted in again. Measured on bench_compaction_throughput's 8 file groups: the workers'
CPU per compaction 3.6 -> 3.0 s on one core, and two workers at once no longer cost each other 13-18 % more CPU
(page faults contend on the shared address-space locks of the kernel); peak RSS on a 1 GB base 411 -> 438 MB,
still about the live data, since streaming reuses what it freed. An idle worker keeps what it holds until Spark
stops it (idle Python workers are stopped after a minute).
"""
from __future__ import annotations

import functools
import os

import pyarrow as pa

POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
JEMALLOC_CONF_ENV = "JE_ARROW_MALLOC_CONF"
KEEP_FREED_PAGES = "dirty_decay_ms:-1,muzzy_decay_ms:-1"


@functools.cache
def executor_pool_env() -> dict[str, str]:
    """The environment that makes a fresh executor process use jemalloc throughout, keeping the pages it frees
    for reuse (empty when this pyarrow has no jemalloc; a pool or jemalloc settings the user chose are kept)."""
    conf = {JEMALLOC_CONF_ENV: os.environ.get(JEMALLOC_CONF_ENV) or KEEP_FREED_PAGES}
    if os.environ.get(POOL_ENV):
        return {POOL_ENV: os.environ[POOL_ENV], **conf}
    try:
        pa.jemalloc_memory_pool()
    except (NotImplementedError, AttributeError):
        return {}
    return {POOL_ENV: "jemalloc", **conf}


def use_streaming_pool() -> str:
    """Switch this process's pyarrow allocations to jemalloc when the wheel has it; returns the pool in use. Called
    at the start of every task that streams large files: a reused worker may have run a read (mimalloc) before."""
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
