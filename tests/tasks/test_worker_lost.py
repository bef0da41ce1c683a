"""A worker killed with kill -9 in the middle of a compaction never blocks its table: the lease lapses,
the run is marked failed ("worker lost"), and recover + a new trigger succeed."""
from __future__ import annotations

import datetime as dt
import uuid

from engine.read.query import read_arrow
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import register, request, wait_final, wait_until

LEASE_TTL_S = 4
T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)


def test_a_killed_worker_s_run_fails_and_the_table_recovers(stack_env, flights):
    from tasks import jobs
    from webapp.tables.models import AuditEvent, Run, TableLease

    queue = f"victim-{uuid.uuid4().hex[:6]}"
    # A worker of its own (own queue, short lease) so the kill hits exactly the run under test.
    stack_env.start_worker("victim", extra_env={"TIDEMARK_LEASE_TTL": str(LEASE_TTL_S),
                                                "TIDEMARK_CELERY_QUEUE": queue})
    table = register(flights)
    before = rows_by_key(read_arrow(str(flights), "snapshot"))
    run = Run.objects.create(table=table, kind="schedule_execute", state="queued", threshold=T)
    jobs.BY_KIND["schedule_execute"].apply_async(args=[run.pk], queue=queue)

    def compacting() -> bool:
        current = Run.objects.get(pk=run.pk)
        return current.state == "running" and bool(current.instant)  # planned; its execution under way
    wait_until(compacting, 180, "the compaction to start")
    lease = TableLease.objects.get(table=table)
    assert lease.owner.startswith(f"run:{run.pk}@")
    stack_env.kill("victim")

    wait_until(lambda: TableLease.objects.get(table=table).expires_at < dt.datetime.now(dt.UTC),
               LEASE_TTL_S + 5, "the dead worker's lease to lapse")
    assert Run.objects.get(pk=run.pk).state == "running", "nobody recorded an outcome for the killed run"
    # A worker starting up sweeps: it finds the lapsed lease (it also serves the runs below).
    stack_env.start_worker("sweeper", warm=True)

    wait_until(lambda: Run.objects.get(pk=run.pk).state == "failed", 60, "the sweep to fail the lost run")
    lost = Run.objects.get(pk=run.pk)
    assert "worker lost" in lost.error
    assert AuditEvent.objects.filter(run=lost, outcome="failed").exists()

    recovered = wait_final(request(table, "recover").pk)
    assert recovered.state == "succeeded", recovered.error
    again = wait_final(request(table, "schedule_execute", threshold=T).pk)
    assert again.state == "succeeded", again.error
    after = rows_by_key(read_arrow(str(flights), "snapshot"))
    assert after == before == rows_by_key(hudi_read(flights, "snapshot"))
    assert rows_by_key(read_arrow(str(flights), "read_optimized")) == rows_by_key(hudi_read(flights, "read_optimized"))
    stack_env.stop("sweeper")
