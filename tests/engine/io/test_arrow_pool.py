"""Each kind of executor task selects its Arrow pool, whatever a task before it in the same worker chose."""
from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from engine.io.arrow_pool import reusing_pool, use_returning_pool


@pytest.fixture(autouse=True)
def _restore_pool() -> Iterator[None]:
    before = pa.default_memory_pool()
    yield
    pa.set_memory_pool(before)


def _has(factory: str) -> bool:
    try:
        getattr(pa, factory)()
    except (NotImplementedError, AttributeError):
        return False
    return True


@pytest.mark.skipif(not (_has("jemalloc_memory_pool") and _has("mimalloc_memory_pool")), reason="wheel lacks a pool")
def test_a_compaction_after_a_read_gets_jemalloc_back() -> None:
    assert reusing_pool().backend_name == "mimalloc"
    assert pa.default_memory_pool().backend_name == "mimalloc"
    assert use_returning_pool() == "jemalloc"
    assert reusing_pool().backend_name == "mimalloc"
    assert use_returning_pool() == "jemalloc"


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(not _has("mimalloc_memory_pool"), reason="wheel lacks mimalloc")
def test_reusing_pool_keeps_freed_pages_until_released() -> None:
    pool = reusing_pool()
    buffers = [pa.allocate_buffer(16 << 20) for _ in range(8)]
    for b in buffers:
        memoryview(b).cast("B")[::4096] = b"\x01" * len(range(0, b.size, 4096))  # touch every page
    del buffers
    kept = _rss_mb()
    pool.release_unused()
    assert _rss_mb() < kept - 64   # the 128 MB freed above were kept by the pool, and now are handed back
