"""One physical table registered under two names (its folder and a symlinked alias), triggered through
both at the same moment on two workers: the test holds the table's lease(s) until both runs are waiting
for it, then lets go, so both workers contend at once whatever the broker's polling. The lease belongs to
the table's location, so exactly one plan
lands on the timeline and the other trigger is refused — in every trial, on both deployments."""
from __future__ import annotations

import time
import uuid

from engine import Table
from tests.support.runs import register, wait_final, wait_until
from tests.support.tables import table_copy

TRIALS = 3
T = "2013-01-06T00:00:00+00:00"


def test_two_registrations_of_one_path_never_make_two_plans(stack_env, flights_template):
    from django.db import transaction
    from django.utils import timezone

    from tasks import jobs
    from tasks.lease import DatabaseLease
    from webapp.tables.models import Run

    queues = [f"alias-{side}-{uuid.uuid4().hex[:6]}" for side in "ab"]
    for queue in queues:   # a worker per queue, so the two runs are taken by two workers at once
        stack_env.start_worker(queue, warm=False, extra_env={"TIDEMARK_CELERY_QUEUE": queue,
                                                             "TIDEMARK_LEASE_WAIT": "60"})
    try:
        for trial in range(TRIALS):
            path = table_copy(flights_template, stack_env.table_root / f"aliased-{uuid.uuid4().hex[:8]}")
            alias = stack_env.table_root / f"alias-of-{path.name}"
            alias.symlink_to(path, target_is_directory=True)
            tables = [register(path), register(alias)]
            with transaction.atomic():
                runs = [Run.objects.create(table=t, kind="schedule", state="queued", threshold=T,
                                           queued_at=timezone.now()) for t in tables]
            gates = [DatabaseLease(t.pk, owner=f"gate-{t.pk}", heartbeat_s=3600) for t in tables]
            held = [gate for gate in gates if gate.acquire(0)]
            for run, queue in zip(runs, queues):
                jobs.BY_KIND["schedule"].apply_async(args=[run.pk], queue=queue)
            ids = [r.pk for r in runs]
            wait_until(lambda: Run.objects.filter(pk__in=ids, state="running").count() == 2,  # noqa: B023
                       120, "both runs to wait for the lease")
            time.sleep(0.5)
            for gate in held:
                gate.release()
            done = [wait_final(run.pk, 180) for run in runs]
            states = sorted(r.state for r in done)
            assert states == ["refused", "succeeded"], [(r.state, r.error) for r in done]
            refused = next(r for r in done if r.state == "refused")
            assert refused.refusal_reason in ("lock_unavailable", "pending_compaction"), refused.error
            pending = [c.instant for c in Table.open(str(path)).compactions() if c.state != "completed"]
            winner = next(r for r in done if r.state == "succeeded")
            assert pending == [winner.instant], f"trial {trial}: plans on the one timeline: {pending}"
    finally:
        for queue in queues:
            stack_env.stop(queue)
