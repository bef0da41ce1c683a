"""Arrow's memory pool for executor work that streams large files.

pyarrow's default pool (mimalloc) keeps freed pages, so a task streaming a 1 GB base file row group by
row group sees its RSS climb with every group even though Arrow holds only ~one group at a time.
jemalloc's does not: measured on a 4 x 1M-row base, peak RSS 860 MB -> 550 MB.
`pa.set_memory_pool` only reaches allocations pyarrow makes for Python; Arrow's C++ code (the Parquet
reader's decoding among it) keeps the process default, which only `ARROW_DEFAULT_MEMORY_POOL` set before
pyarrow loads can change: executors get it from their environment (`executor_pool_env`).

Which freed pages jemalloc hands back is its decay setting. As Arrow configures it (decay 0) it hands them back
at once, so every new buffer faults its pages in again: ~120,000 minor faults and ~0.25 s of kernel time per
pass over bench_read_floor's 8 base files, and two workers faulting at once slow each other further (the
kernel's address-space locks). Executors therefore keep freed pages (`JE_ARROW_MALLOC_CONF` without decay):
compaction and snapshot-read tasks free and allocate buffers of the same sizes batch after batch, so kept pages
are reused and RSS stays about the live data. Measured side by side: a compaction of a 1 GB base 21.4 -> 11.6 s
at 333 -> 408 MB peak RSS; the workers' CPU per 8-file-group compaction 3.6 -> 3.0 s on one core, and per
snapshot read 2.6 -> 1.9 s. An idle worker keeps what it holds until Spark stops it (idle Python workers are
stopped after a minute). Python workers are reused across tasks, and a task may have switched pyarrow's pool
for Python allocations, so each executor task selects jemalloc when it starts (`use_streaming_pool`).

A write run in this process (`engine.write.in_process`) allocates from jemalloc too, for its duration only
(`in_process_pool`), whatever its environment says. The process default, mimalloc, serves a driver well once it has
grown into the memory a write needs, but a driver that has not (its earlier work ran on Spark tasks; a fresh CLI
process) gets every new buffer's memory from the kernel, which with transparent huge pages zeroes 2 MB per fault,
again and again as mimalloc hands freed ranges back: a 400 k-row upsert after a Spark insert spent 0.27–0.30 of its
0.9 CPU-s in the kernel's `clear_page_erms` (perf), 0.02 s with jemalloc, even at Arrow's decay 0 (which returns
freed pages at once, so the driver keeps no more memory after the write than before it).
"""
from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

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
    at the start of every executor task that streams large files (compaction, snapshot reads): a reused worker
    may have had its pool switched by an earlier task."""
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (NotImplementedError, AttributeError):  # a pyarrow built without jemalloc keeps its default
        pass
    return str(pa.default_memory_pool().backend_name)


_SCOPE = threading.Lock()
_open = {"blocks": 0}
_before: list[pa.MemoryPool] = []   # the pool in use when the first open block began


@contextmanager
def in_process_pool() -> Iterator[None]:
    """pyarrow allocates from jemalloc while the block runs, in every thread of this process; the pool in use before
    is restored when the last open block ends (concurrent writes' blocks may overlap and end in any order). A pyarrow
    built without jemalloc keeps its pool. Buffers remember their pool, so any may outlive the block."""
    try:
        jemalloc = pa.jemalloc_memory_pool()
    except (NotImplementedError, AttributeError):
        yield
        return
    with _SCOPE:
        if not _open["blocks"]:
            _before[:] = [pa.default_memory_pool()]
        _open["blocks"] += 1
        pa.set_memory_pool(jemalloc)
    try:
        yield
    finally:
        with _SCOPE:
            _open["blocks"] -= 1
            if not _open["blocks"]:
                pa.set_memory_pool(_before.pop())
