"""Process-wide thread pools for object-store requests, started once and reused by every task of the process.

A compaction task on an object store overlaps its GETs, copies and uploads on threads. Starting those threads
per task cost more than the requests: `Thread.start` waits until the new thread holds the GIL, which on a busy
2-core executor (two tasks, a store emulator) took a switch interval or more per thread, ~34 ms per task of
eight threads (Spark's profiler over 24 S3 compaction tasks: 0.81 s of 3.5 s in `_adjust_thread_count`).
Spark reuses its Python workers, so threads kept here serve every later task of the worker, and every later
operation of a driver or a control-plane worker.

One rule keeps a bounded pool from deadlocking: work running on a pool never waits for other work queued on the
same pool. Hence one pool per kind of work: `requests` runs a few store requests each, made directly (a GET, a
log's header scan, a CopyObject), which wait for no pool; `uploads` runs a multipart upload's parts, apart so a
base file's upload never queues behind a task's copies; `decode` runs log decodes, which may wait for a
`requests` GET; `publish` writes, fsyncs and links new log files (`storage.Publisher`), waiting for no pool.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

# A planning pass scans this many log headers at once, a compaction task overlaps its GETs and copies; idle threads
# cost a stack each and nothing else.
REQUEST_THREADS = 32
UPLOAD_THREADS = 4
# Each slice decodes two logs at a time, and an in-process read decodes one slice per core at once.
DECODE_THREADS = 2 * (os.cpu_count() or 1)
# A writing task keeps up to `storage.Publisher.DEPTH` (2) files publishing, and an in-process write runs one task
# per core.
PUBLISH_THREADS = 2 * (os.cpu_count() or 1)

_POOLS: dict[str, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def _pool(name: str, size: int) -> ThreadPoolExecutor:
    with _LOCK:
        pool = _POOLS.get(name)
        if pool is None:
            pool = _POOLS[name] = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"tidemark-{name}")
        return pool


def requests_pool() -> ThreadPoolExecutor:
    """For store requests made directly (no pool waited on)."""
    return _pool("requests", REQUEST_THREADS)


def uploads_pool() -> ThreadPoolExecutor:
    """For the parts of multipart uploads."""
    return _pool("uploads", UPLOAD_THREADS)


def decode_pool() -> ThreadPoolExecutor:
    """For log decodes, which may wait for a `requests_pool` GET."""
    return _pool("decode", DECODE_THREADS)


def publish_pool() -> ThreadPoolExecutor:
    """For publishing new files (write, fsync, link), which waits for no pool."""
    return _pool("publish", PUBLISH_THREADS)


def on_requests_pool() -> bool:
    """Is the caller itself work on the `requests` pool (which must then not wait for more of it)?"""
    return threading.current_thread().name.startswith("tidemark-requests")


def settle(futures: Iterable[Future[Any]]) -> None:
    """Cancel what has not started and wait for what has: nothing submitted outlives the caller's block."""
    pending = [f for f in futures if not f.cancel()]
    wait(pending)


def _forget_after_fork() -> None:
    # A forked child has the pools' objects but none of their threads: it starts its own on first use.
    global _LOCK
    _POOLS.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
