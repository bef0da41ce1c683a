"""A compaction run's file groups on this process's threads, when no Spark is needed (`engine.placement`).

The same contract as the Spark job (`execute._execute_all` through `progress.counted`): the heaviest file groups
start first, one per CPU at a time; each finished one counts towards the progress; once `should_stop` says so,
no further one starts, the running ones finish and `Stopped` is raised (also when one of them failed meanwhile,
as a cancelled Spark job group's failing task does). The first failure also stops further starts and is raised
once the running ones have ended. Either way, when this returns or raises, no thread of it
is still writing: the caller may roll back or commit at once.

Each file group gets its own write token, `<slot>-0-0` (a Spark task's is `<partition>-<stage>-<attempt>`; slot
is the group's place in the start order, as a Spark partition's is), so base files and carried logs are named as
a Spark run names them, up to the stage number.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextvars import ContextVar
from typing import TypeVar

from engine.progress import POLL_S, Progress, Reporter, Stopped

T = TypeVar("T")
R = TypeVar("R")

_TOKEN: ContextVar[str | None] = ContextVar("tidemark_in_process_token", default=None)


def write_token() -> str | None:
    """The write token of the in-process file group running on this thread (None outside one)."""
    return _TOKEN.get()


@contextlib.contextmanager
def _token(slot: int) -> Iterator[None]:
    reset = _TOKEN.set(f"{slot}-0-0")
    try:
        yield
    finally:
        _TOKEN.reset(reset)


def cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def on_threads(items: Sequence[T], work: Callable[[T], R], threads: int) -> list[R]:
    """`work(item)` for the items in order, on up to `threads` threads (a Spark task's share of small file groups);
    results in `items`' order. After a failure no further item starts (a retried task would run them again anyway),
    and the first failure is raised only once every thread has ended: none is still writing then."""
    failed = threading.Event()

    def guarded(item: T) -> R | None:
        if failed.is_set():
            return None
        try:
            return work(item)
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(items))), thread_name_prefix="tidemark-group") as pool:
        futures = [pool.submit(guarded, item) for item in items]
    for f in futures:
        if f.exception() is not None:
            raise f.exception()  # type: ignore[misc]
    return [f.result() for f in futures]  # type: ignore[misc]


def run_here(items: Sequence[T], order: Sequence[int], work: Callable[[T], R], on_progress: Progress | None,
             should_stop: Callable[[], bool] | None, unit: str, per_cpu: int = 1) -> list[R]:
    """`work(items[i])` for each i, started in `order`, on up to `per_cpu` × `cpus()` threads; results in `items`'
    order."""
    if not items:
        return []
    reporter = Reporter(on_progress, len(items), unit)
    if should_stop is not None and should_stop():   # asked before the first unit started
        raise Stopped(0)
    reporter.update(0)

    def one(slot: int, item: T) -> R:
        with _token(slot):
            return work(item)

    waiting = list(enumerate(order))[::-1]   # popped from the end: start order
    running: dict[Future[R], int] = {}
    results: dict[int, R] = {}
    failure: BaseException | None = None
    stopping = False
    workers = max(1, min(cpus() * per_cpu, len(items)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tidemark-compaction") as pool:
        while waiting or running:
            while waiting and not stopping and failure is None and len(running) < workers:
                slot, i = waiting.pop()
                running[pool.submit(one, slot, items[i])] = i
            if not running:
                break
            finished, _ = wait(running, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in finished:
                i = running.pop(future)
                try:
                    results[i] = future.result()
                except BaseException as exc:  # noqa: BLE001 - raised below, once nothing runs any more
                    failure = failure or exc
            reporter.update(len(results))
            if should_stop is not None and not stopping and should_stop():
                stopping = True
    if failure is not None and not (stopping and isinstance(failure, Exception)):
        raise failure
    if len(results) < len(items):   # stopped (a group that failed after the stop was asked counts as cancelled)
        raise Stopped(len(results))
    reporter.finish()
    return [results[i] for i in range(len(items))]
