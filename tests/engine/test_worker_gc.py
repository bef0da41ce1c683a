"""`engine.worker_gc`: a worker freezes what its tasks leave behind in bulk, so later collections are cheap."""
from __future__ import annotations

import gc
import os


def test_tasks_that_leave_many_objects_freeze_them_and_others_do_not(monkeypatch):
    pid = os.fork()   # a process of its own, as a Spark Python worker is: this test's interpreter stays unfrozen
    if pid == 0:
        code = 1
        try:
            from engine import worker_gc

            worker_gc.task_finished()   # not in a Spark task (a driver running the same code): nothing frozen
            assert gc.get_freeze_count() == 0
            monkeypatch.setattr(worker_gc, "_in_spark_task", lambda: True)
            held = [[i] for i in range(worker_gc.FREEZE_AT)]   # a first task's modules, caches (GC-tracked)
            worker_gc.task_finished()
            frozen = gc.get_freeze_count()
            assert frozen >= len(held)
            later = [[i] for i in range(100)]               # a warm worker's task: its objects stay collectable
            worker_gc.task_finished()
            assert gc.get_freeze_count() == frozen and len(later) == 100
            more = [[i] for i in range(worker_gc.FREEZE_AT)]   # a task that loaded more
            worker_gc.task_finished()
            assert gc.get_freeze_count() >= frozen + len(more)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
