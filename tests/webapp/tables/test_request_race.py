"""One compaction request at a time per table, also when requests arrive at once (SQLite and PostgreSQL): of
several triggers in the same instant exactly one is queued, each other one is refused with the conflict."""
from __future__ import annotations

import threading
import uuid

from django.db import connection

from engine import Table
from webapp.tables import services
from webapp.tables.models import RegisteredTable, Run


def test_compaction_requests_at_once_queue_exactly_one(stack_env, monkeypatch):
    path = stack_env.table_root / f"race-{uuid.uuid4().hex[:8]}"
    Table.create(str(path), name="race", record_keys=["id"], ordering_field="ts", event_time_field="ts")
    table = RegisteredTable.objects.create(name=path.name, path=str(path))
    monkeypatch.setattr(services, "_dispatch", lambda run_id: None)   # queued is enough: no worker here
    checked = services._refuse_a_second_compaction
    requests = 6
    everyone_checked = threading.Barrier(requests, timeout=3)

    def slow_check(t: RegisteredTable) -> None:
        # Every request waits here for the others, after its check and before its run is created: without the
        # table's row lock all of them pass the check; with it the first holds the others before theirs, the
        # barrier times out and the first goes on alone.
        checked(t)
        try:
            everyone_checked.wait()
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(services, "_refuse_a_second_compaction", slow_check)
    start = threading.Barrier(requests)
    queued: list[int] = []
    refused: list[str] = []

    def request() -> None:
        start.wait()
        try:
            queued.append(services.request_run(table, Run.Kind.SCHEDULE_EXECUTE, None, threshold=None).pk)
        except services.Conflict as exc:
            refused.append(str(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(queued) == 1, (queued, refused)
    assert len(refused) == requests - 1
    assert all(f"compaction run {queued[0]} of table {table.name} is queued" in r for r in refused)
    assert list(table.runs.values_list("pk", flat=True)) == queued
