"""A dead Spark JVM never poisons a worker: kill -9 of the pool process's JVM, and the next compaction
notices before it starts, starts a fresh session and succeeds; a compaction whose start fails (the JVM dies
between plan and execution) rolls its own plan back, so no plan is left behind and the table page stops
offering it."""
from __future__ import annotations

import datetime as dt
import os
import signal
from pathlib import Path

from engine import Table
from engine.lock import FileLock
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import register, wait_final, wait_until

T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)


def _jvms_in_group(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            exe = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if int(stat[2]) == pgid and exe.endswith(b"/java"):
            found.append(int(entry))
    return found


def test_a_killed_jvm_is_replaced_before_the_next_run(stack_env, flights):
    import uuid

    from tasks import jobs
    from webapp.tables.models import Run

    queue = f"jvm-{uuid.uuid4().hex[:6]}"
    worker = stack_env.start_worker("jvm-victim", extra_env={"TIDEMARK_CELERY_QUEUE": queue})
    try:
        jvms = _jvms_in_group(worker.pid)
        assert len(jvms) == 1, f"expected the pool process's one JVM, found {jvms}"
        os.kill(jvms[0], signal.SIGKILL)
        wait_until(lambda: not _jvms_in_group(worker.pid), 30, "the JVM to die")
        table = register(flights)
        before = rows_by_key(hudi_read(Path(flights), "snapshot"))
        run = Run.objects.create(table=table, kind="schedule_execute", state="queued", threshold=T)
        jobs.BY_KIND["schedule_execute"].apply_async(args=[run.pk], queue=queue)
        done = wait_final(run.pk, 400)
        assert done.state == "succeeded", done.error
        assert "starting a new one" in stack_env.log_text("jvm-victim")
        assert len(_jvms_in_group(worker.pid)) == 1, "a fresh JVM serves the worker"
        assert [c.state for c in Table.open(str(flights)).compactions()] == ["completed"]
        assert rows_by_key(hudi_read(Path(flights), "snapshot")) == before
    finally:
        stack_env.stop("jvm-victim")


def test_a_failed_start_withdraws_its_plan(stack_env, flights, monkeypatch):
    from tasks import operations
    from tasks.progress import RunProgress
    from webapp.tables import plans
    from webapp.tables.models import Run

    table = register(flights)
    run = Run.objects.create(table=table, kind="schedule_execute", state="running", threshold=T)
    engine_table = Table.open(str(flights))

    def jvm_gone(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")   # what py4j raises once the JVM is gone
    monkeypatch.setattr(engine_table, "run_compaction", jvm_gone)
    try:
        operations.schedule_execute(engine_table, run, FileLock(str(flights)), RunProgress(run.pk))
    except ConnectionRefusedError:
        pass
    else:
        raise AssertionError("the failure must still be reported")
    run.refresh_from_db()
    assert run.instant and run.result["withdrawn_plan"] == run.instant
    assert [c.state for c in Table.open(str(flights)).compactions() if c.state != "completed"] == []
    Run.objects.filter(pk=run.pk).update(state="failed")
    assert plans.read(table).pending is None, "the table page must not offer a withdrawn plan"
