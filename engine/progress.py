"""Progress of long operations: `on_progress(done, total, unit)` called as file groups / tasks finish.

Spark reports a task to the driver when it ends, so progress is read while the job runs: the job's action
runs on a helper thread and this thread polls either an accumulator the tasks add to (one count per file
group, where we own the task function) or Spark's status tracker (completed tasks of the job's stages,
for DataFrame jobs). Counts only ever increase and the last call is (total, total).
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

Progress = Callable[[int, int, str], None]
T = TypeVar("T")

POLL_S = 0.2


class Reporter:
    """Calls `on_progress` only when the count moved, never backwards, and always ends at the total."""

    def __init__(self, on_progress: Progress | None, total: int, unit: str) -> None:
        self.on_progress, self.total, self.unit = on_progress, total, unit
        self.done = -1

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = max(total, self.total)
        done = min(done, self.total)
        if self.on_progress is not None and done > self.done:
            self.done = done
            self.on_progress(done, self.total, self.unit)

    def finish(self) -> None:
        self.update(self.total)


def _in_thread(action: Callable[[], T], poll: Callable[[], None]) -> T:
    """Run `action` on a helper thread, calling `poll` every POLL_S until it ends; re-raise its error."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = action()
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread as is
            box["error"] = exc

    thread = threading.Thread(target=target, name="tidemark-spark-action", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(POLL_S)
        poll()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class Stopped(Exception):
    """`should_stop` said so: the job was cancelled and its running tasks have ended; `done` units finished."""

    def __init__(self, done: int) -> None:
        super().__init__(f"stopped after {done} finished")
        self.done = done


def counted(sc: Any, action: Callable[[Any], T], on_progress: Progress | None, total: int, unit: str,
            should_stop: Callable[[], bool] | None = None) -> T:
    """Run `action(accumulator)`; its tasks add 1 to the accumulator per `unit` finished. With neither progress
    nor `should_stop` nobody reads it: the action gets None and its tasks add nothing (Spark hands every task's
    non-zero Python accumulator to the driver's Python over a socket, waiting for its answer, before the task
    counts as ended: the last task's is on the job's path).

    `should_stop`, polled while the job runs: once it says True no further task starts (the job group is
    cancelled without interrupting running tasks, so each unit is either written whole or not started),
    and Stopped is raised once the running ones have ended.
    """
    if on_progress is None and should_stop is None:
        return action(None)
    reporter = Reporter(on_progress, total, unit)
    acc = sc.accumulator(0)
    if should_stop is not None and should_stop():   # asked before the first unit started
        raise Stopped(0)
    group = f"tidemark-{uuid.uuid4().hex}"
    stopping = threading.Event()

    def run() -> T:
        sc.setJobGroup(group, "tidemark", interruptOnCancel=False)
        try:
            return action(acc)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)

    def poll() -> None:
        reporter.update(int(acc.value))
        if should_stop is not None and not stopping.is_set() and should_stop():
            stopping.set()
            sc.cancelJobGroup(group)

    reporter.update(0)
    try:
        result = _in_thread(run, poll)
    except Exception:
        if not stopping.is_set():
            raise
        _wait_idle(sc, group)
        raise Stopped(int(acc.value)) from None
    reporter.finish()
    return result


def _wait_idle(sc: Any, group: str, timeout_s: float = 600) -> None:
    """Until no task of the job group is running any more (a cancelled job's running tasks go on)."""
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        active = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                active += stage.numActiveTasks if stage is not None else 0
        if not active:
            return
        time.sleep(POLL_S)


def tracked(sc: Any, action: Callable[[], T], on_progress: Progress | None, unit: str = "tasks") -> T:
    """Run a Spark action (e.g. a DataFrame write), reporting completed tasks of its stages."""
    if on_progress is None:
        return action()
    group = f"tidemark-{uuid.uuid4().hex}"
    reporter = Reporter(on_progress, 0, unit)
    tracker = sc.statusTracker()

    def run() -> T:
        sc.setJobGroup(group, "tidemark", interruptOnCancel=False)
        try:
            return action()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)

    def poll() -> None:
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        if total:
            reporter.update(done, total)

    result = _in_thread(run, poll)
    poll()
    reporter.finish()
    return result
