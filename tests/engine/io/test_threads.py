"""`engine.io.threads`: the process's request and decode pools are started once, reused, and fresh after a fork."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from engine.io import threads
from engine.io.storage import arrowfs, s3_api


def test_one_pool_per_kind_reused_by_every_caller():
    assert threads.requests_pool() is threads.requests_pool()
    assert threads.decode_pool() is threads.decode_pool()
    assert threads.requests_pool() is not threads.decode_pool()
    threads.requests_pool().submit(int).result()

    def started() -> int:
        return sum(t.name.startswith("tidemark-requests") for t in threading.enumerate())

    before = started()
    for _ in range(20):   # one request at a time: an idle thread serves each, none is started
        threads.requests_pool().submit(int).result()
    assert started() == before <= threads.REQUEST_THREADS


def test_settle_cancels_what_is_queued_and_waits_for_what_runs():
    release, ran = threading.Event(), []
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(lambda: (release.wait(5), ran.append("running")))
        queued = pool.submit(ran.append, "queued")
        threading.Timer(0.2, release.set).start()
        threads.settle([running, queued])
        assert running.done() and queued.cancelled()
    assert ran == ["running"]


def test_a_forked_child_starts_its_own_threads():
    threads.requests_pool().submit(int).result()   # the parent's pool has a thread
    pid = os.fork()
    if pid == 0:   # the child: the parent's threads are not here; a fresh pool must serve
        ok = False
        try:
            ok = threads.requests_pool().submit(lambda: 7).result(timeout=10) == 7
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_forked_child_makes_its_own_store_clients():
    """The storage layer's S3 clients and file systems hold sockets and SDK threads: a child never inherits them."""

    s3_api._S3_CLIENTS[("inherited",)] = object()
    arrowfs._FILESYSTEMS[("s3", ("inherited",))] = object()   # type: ignore[assignment]
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if not s3_api._S3_CLIENTS and not arrowfs._FILESYSTEMS and not s3_api._LOCK.locked() else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        s3_api._S3_CLIENTS.pop(("inherited",), None)
        arrowfs._FILESYSTEMS.pop(("s3", ("inherited",)), None)
