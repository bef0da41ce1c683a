"""A consumer on a second thread while this one keeps pulling what it consumes: a Spark write task's routing
stage receives the JVM's Arrow batches on one thread and routes and exchanges them on another, so the two overlap.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def consume_in_background(consume: Callable[[Iterable[T]], None], items: Iterator[T], depth: int = 32) -> None:
    """`consume(items)` on a second thread while this one keeps pulling `items` (a task's Arrow batches, which
    the JVM converts and sends meanwhile): routing and exchanging then overlap receiving. At most `depth`
    items wait; the consumer's error is raised here, after which the items left are not pulled."""
    done = object()
    waiting: queue.Queue[Any] = queue.Queue(depth)
    failed: list[BaseException] = []

    ended = threading.Event()

    def drain() -> Iterator[T]:
        while (item := waiting.get()) is not done:
            yield item
        ended.set()

    def run() -> None:
        try:
            consume(drain())
        except BaseException as exc:   # noqa: BLE001 - re-raised on the calling thread
            failed.append(exc)
            while not ended.is_set() and waiting.get() is not done:   # unblock the producer
                pass

    worker = threading.Thread(target=run, name="tidemark-route", daemon=True)
    worker.start()
    try:
        for item in items:
            if failed:
                break
            waiting.put(item)
    finally:
        waiting.put(done)
        worker.join()
    if failed:
        raise failed[0]
