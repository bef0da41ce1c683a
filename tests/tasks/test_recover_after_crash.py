"""Recover right after a crash: kill -9 of a worker (its pool child and JVM) mid-compaction, and a recover
requested at once takes over the dead owner's lease without waiting out its ttl (the owner's process is
known gone), marks the dead run lost, rolls its plan back — and the table page stops offering that plan."""
from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path

from engine import Table
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import register, wait_final, wait_until

T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)
LEASE_TTL_S = 120   # far longer than the test waits: a recover that waited for the ttl would time out


def test_recover_right_after_a_crash_takes_over_the_dead_owner_s_lease(stack_env, flights):
    from tasks import jobs
    from webapp.tables import plans
    from webapp.tables.models import Run

    queue = f"crash-{uuid.uuid4().hex[:6]}"
    stack_env.start_worker("crash-victim", extra_env={"TIDEMARK_LEASE_TTL": str(LEASE_TTL_S),
                                                      "TIDEMARK_CELERY_QUEUE": queue})
    rescue_queue = f"rescue-{uuid.uuid4().hex[:6]}"
    stack_env.start_worker("rescuer", warm=False, extra_env={"TIDEMARK_CELERY_QUEUE": rescue_queue})
    try:
        table = register(flights)
        before = rows_by_key(hudi_read(Path(flights), "snapshot"))
        run = Run.objects.create(table=table, kind="schedule_execute", state="queued", threshold=T)
        jobs.BY_KIND["schedule_execute"].apply_async(args=[run.pk], queue=queue)
        wait_until(lambda: Run.objects.get(pk=run.pk).instant != "", 240, "the compaction to be planned")
        stack_env.kill("crash-victim")
        killed_at = time.monotonic()

        recover = Run.objects.create(table=table, kind="recover", state="queued")
        jobs.BY_KIND["recover"].apply_async(args=[recover.pk], queue=rescue_queue)
        recovered = wait_final(recover.pk, LEASE_TTL_S - 20)
        assert recovered.state == "succeeded", (recovered.state, recovered.error)
        assert time.monotonic() - killed_at < LEASE_TTL_S
        lost = Run.objects.get(pk=run.pk)
        assert lost.state == "failed" and "worker lost" in lost.error
        assert lost.instant in recovered.result["rolled_back_plans"]
        assert [c for c in Table.open(str(flights)).compactions() if c.state != "completed"] == []
        assert plans.read(table).pending is None, "the table page still offers the rolled-back plan"
        assert rows_by_key(hudi_read(Path(flights), "snapshot")) == before
    finally:
        stack_env.stop("rescuer")
