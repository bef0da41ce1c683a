"""The serial trigger under load: 100 compaction requests (plan + execute, what the API's
`POST /api/tables/<name>/compactions` queues) from several processes, served by a worker with several pool
processes, give exactly one compaction; every other request ends `refused` with its reason — behind the
lease, behind the plan, or with nothing left to compact once it completed — and none `failed`."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time

from engine import Table
from tests.support.runs import FINAL, register
from tests.support.stack import REPO

REQUESTS, PROCESSES = 100, 4
T = "2013-01-06T00:00:00+00:00"

# One requesting process: queues its share of trigger runs from several threads at the same moment.
REQUESTER = """
import json, sys, threading, time
import django
django.setup()
from django.db import connection, transaction
from django.utils import timezone
from webapp.dispatch import dispatch
from webapp.tables.models import Run
table_id, count, start_at, threshold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
ids, errors, barrier = [], [], threading.Barrier(count)
# PostgreSQL's default max_connections is 100, shared with the worker and the test: bound this process's
# connections so every one of the 100 requests is made (the race that matters is at the worker's lease).
connections = threading.Semaphore(8)
def trigger():
    barrier.wait()
    time.sleep(max(start_at - time.time(), 0))
    try:
        with connections:
            with transaction.atomic():
                run = Run.objects.create(table_id=table_id, kind="schedule_execute", state="queued",
                                         queued_at=timezone.now(), threshold=threshold)
                dispatch(run.pk)
            connection.close()
        ids.append(run.pk)
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=trigger) for _ in range(count)]
[t.start() for t in threads]; [t.join() for t in threads]
if errors:
    sys.exit("requests failed: " + "; ".join(errors))
print(json.dumps(ids))
"""


def request_concurrently(stack, table_id: int) -> list[int]:
    start_at = time.time() + 4.0  # after every process has imported Django
    env = {**os.environ, **stack.env}
    share = REQUESTS // PROCESSES
    procs = [subprocess.Popen([sys.executable, "-c", REQUESTER, str(table_id), str(share), str(start_at), T],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(PROCESSES)]
    ids: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        ids += json.loads(out.strip().splitlines()[-1])
    return ids


def wait_all_final(ids: list[int], timeout_s: float = 600) -> None:
    from webapp.tables.models import Run

    deadline = time.monotonic() + timeout_s
    while Run.objects.filter(pk__in=ids).exclude(state__in=FINAL).exists():
        assert time.monotonic() < deadline, "trigger runs did not all finish"
        time.sleep(0.5)


def test_one_hundred_concurrent_triggers_make_exactly_one_plan(stack, flights):
    from webapp.tables.models import AuditEvent, Run

    # Pool processes contend for the table's lease at once; only the winner needs Spark, so none is warmed.
    stack.start_worker("crowd", concurrency=4, warm=False)
    try:
        table = register(flights)
        ids = request_concurrently(stack, table.pk)
        assert len(set(ids)) == REQUESTS
        wait_all_final(ids)
    finally:
        stack.stop("crowd")

    runs = Run.objects.filter(pk__in=ids)
    states = {state: runs.filter(state=state).count() for state in ("succeeded", "refused", "failed")}
    assert states == {"succeeded": 1, "refused": REQUESTS - 1, "failed": 0}, \
        [(r.pk, r.state, r.error) for r in runs.exclude(state="refused")]
    plan = runs.get(state="succeeded")
    refused = runs.filter(state="refused")
    reasons = set(refused.values_list("refusal_reason", flat=True))
    assert reasons <= {"pending_compaction", "lock_unavailable", "nothing_to_compact"}, reasons
    # Every refusal says why in one line; a refusal behind the plan names it.
    assert all(r.error and "\n" not in r.error and "Error" not in r.error.split(":")[0] for r in refused)
    assert set(refused.filter(refusal_reason="pending_compaction")
               .values_list("blocking_instant", flat=True)) <= {plan.instant}
    assert AuditEvent.objects.filter(run__in=ids, action="run.schedule_execute", outcome="refused").count() \
        == REQUESTS - 1

    compactions = Table.open(str(flights)).compactions()
    assert [(c.instant, c.state) for c in compactions] == [(plan.instant, "completed")], \
        "the timeline holds exactly the one compaction"
    assert dt.datetime.fromisoformat(T) == plan.threshold
