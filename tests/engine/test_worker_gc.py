"""`engine.worker_gc`: a worker's heap is frozen once, after its first task, so later collections are cheap."""
from __future__ import annotations

import gc
import os


def test_the_first_task_freezes_the_heap_and_later_ones_leave_it(monkeypatch):
    pid = os.fork()   # a process of its own, as a Spark Python worker is: this test's interpreter stays unfrozen
    if pid == 0:
        code = 1
        try:
            from engine import worker_gc

            worker_gc.task_finished()   # not in a Spark task (a driver running the same code): nothing frozen
            assert gc.get_freeze_count() == 0
            monkeypatch.setattr(worker_gc, "_in_spark_task", lambda: True)
            held = [{"module-level": i} for i in range(1000)]   # what a first task leaves: caches, modules
            worker_gc.task_finished()
            frozen = gc.get_freeze_count()
            assert frozen >= len(held)
            later = [[i] for i in range(100)]                   # a later task's objects stay collectable
            worker_gc.task_finished()
            assert gc.get_freeze_count() == frozen and len(later) == 100
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

