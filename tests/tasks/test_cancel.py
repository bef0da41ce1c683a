"""Cancelling a running compaction through the control plane: the run ends `cancelled`, the engine rolled
its inflight plan back (hudi 0.5.0 reads the snapshot as before), the lease is free, and a new trigger of
the table succeeds."""
from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from engine import Table
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import register

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)

T = dt.datetime(2013, 1, 10, tzinfo=dt.UTC)


def test_cancel_a_running_compaction_then_trigger_again(stack_env, flights):
    from django.db import connection
    from django.utils import timezone

    from tasks import runner
    from webapp.tables import services
    from webapp.tables.models import AuditEvent, Run, TableLease

    table = register(flights)
    before = rows_by_key(hudi_read(flights, "snapshot"))
    run = Run.objects.create(table=table, kind="schedule_execute", state="queued", queued_at=timezone.now(),
                             threshold=T)

    def work() -> None:
        try:
            runner.perform(run.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    deadline = time.monotonic() + 60
    while Run.objects.get(pk=run.pk).state == "queued":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    asked = services.cancel_run(None, Run.objects.get(pk=run.pk))
    assert asked.cancel_requested and asked.state == "running"
    worker.join(300)

    run.refresh_from_db()
    assert run.state == "cancelled", (run.state, run.error)
    assert "rolled back and nothing was committed" in run.error
    assert not [c for c in Table.open(str(flights)).compactions() if c.state != "completed"]
    assert rows_by_key(hudi_read(flights, "snapshot")) == before
    assert TableLease.objects.get(table=table).owner == ""
    assert AuditEvent.objects.filter(run=run, action="cancel", outcome="cancel_requested").exists()

    again = Run.objects.create(table=table, kind="schedule_execute", state="queued", queued_at=timezone.now(),
                               threshold=T)
    assert runner.perform(again.pk) == "succeeded"
    assert rows_by_key(hudi_read(flights, "snapshot")) == before
