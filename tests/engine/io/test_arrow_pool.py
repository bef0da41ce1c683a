"""Executor tasks allocate from jemalloc keeping freed pages, whatever a task before them in the same worker chose;
in-process writes allocate from jemalloc while they run."""
from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from engine.io.arrow_pool import use_streaming_pool


@pytest.fixture(autouse=True)
def _restore_pool() -> Iterator[None]:
    before = pa.default_memory_pool()
    yield
    pa.set_memory_pool(before)


def test_a_task_gets_jemalloc_back_whatever_a_task_before_chose() -> None:
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    assert use_streaming_pool() == "jemalloc"
    assert pa.default_memory_pool().backend_name == "jemalloc"


def test_executors_get_jemalloc_keeping_freed_pages_unless_the_user_chose(monkeypatch) -> None:
    from engine.io import arrow_pool

    for name in (arrow_pool.POOL_ENV, arrow_pool.JEMALLOC_CONF_ENV):
        monkeypatch.delenv(name, raising=False)
    arrow_pool.executor_pool_env.cache_clear()
    try:
        env = arrow_pool.executor_pool_env()
        assert env == {arrow_pool.POOL_ENV: "jemalloc", arrow_pool.JEMALLOC_CONF_ENV: arrow_pool.KEEP_FREED_PAGES}
        monkeypatch.setenv(arrow_pool.POOL_ENV, "system")
        monkeypatch.setenv(arrow_pool.JEMALLOC_CONF_ENV, "dirty_decay_ms:0")
        arrow_pool.executor_pool_env.cache_clear()
        assert arrow_pool.executor_pool_env() == {arrow_pool.POOL_ENV: "system",
                                                  arrow_pool.JEMALLOC_CONF_ENV: "dirty_decay_ms:0"}
    finally:
        arrow_pool.executor_pool_env.cache_clear()


_FREE_AND_MEASURE = """
import pyarrow as pa
def rss():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmRSS:")) // 1024
pool = pa.jemalloc_memory_pool()
buffers = [pa.allocate_buffer(16 << 20, memory_pool=pool) for _ in range(8)]
for b in buffers:
    memoryview(b).cast("B")[::4096] = b"\\x01" * len(range(0, b.size, 4096))
held = rss()
del buffers
print(held - rss())
"""


@pytest.mark.parametrize("conf, kept", [(None, True), ("dirty_decay_ms:0,muzzy_decay_ms:0", False)])
def test_the_executor_setting_keeps_freed_pages_in_the_process(conf: str | None, kept: bool) -> None:
    """What executors get: 128 MB freed through jemalloc stay in the process for reuse; with Arrow's own decay
    of 0 they are handed back at once (the setting reaches jemalloc through the environment)."""
    import os
    import subprocess
    import sys

    from engine.io import arrow_pool

    env = {**os.environ, arrow_pool.JEMALLOC_CONF_ENV: conf or arrow_pool.KEEP_FREED_PAGES}
    returned_mb = int(subprocess.run([sys.executable, "-c", _FREE_AND_MEASURE], env=env, check=True,
                                     capture_output=True, text=True).stdout)
    assert (returned_mb < 16) if kept else (returned_mb > 96), returned_mb


def test_in_process_work_allocates_from_jemalloc_and_gives_the_pool_back() -> None:
    from engine.io.arrow_pool import in_process_pool

    pa.set_memory_pool(pa.mimalloc_memory_pool())
    with in_process_pool():
        assert pa.default_memory_pool().backend_name == "jemalloc"
        kept = pa.array(range(1000))   # a buffer that outlives the block is freed to its own pool later
    assert pa.default_memory_pool().backend_name == "mimalloc"
    assert kept.sum().as_py() == 499500


def test_overlapping_blocks_restore_the_pool_only_when_the_last_ends() -> None:
    from engine.io.arrow_pool import in_process_pool

    pa.set_memory_pool(pa.system_memory_pool())
    first, second = in_process_pool(), in_process_pool()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)   # the earlier write ends first: the later one still runs on jemalloc
    assert pa.default_memory_pool().backend_name == "jemalloc"
    second.__exit__(None, None, None)
    assert pa.default_memory_pool().backend_name == "system"


def test_a_failing_block_still_gives_the_pool_back() -> None:
    from engine.io.arrow_pool import in_process_pool

    pa.set_memory_pool(pa.system_memory_pool())
    with pytest.raises(RuntimeError), in_process_pool():
        raise RuntimeError("a write's task failed")
    assert pa.default_memory_pool().backend_name == "system"
