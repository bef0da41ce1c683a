"""`engine.io.threads`: the process's request and decode pools are started once, reused, and fresh after a fork."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from engine.io import threads


def test_one_pool_per_kind_reused_by_every_caller():
    assert threads.requests_pool() is threads.requests_pool()
    assert threads.decode_pool() is threads.decode_pool()
    assert threads.requests_pool() is not threads.decode_pool()
    first = threads.requests_pool().submit(threading.get_ident).result()
    again = {threads.requests_pool().submit(threading.get_ident).result() for _ in range(20)}
    assert again == {first}   # one request at a time: the idle thread serves each, none is started


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
