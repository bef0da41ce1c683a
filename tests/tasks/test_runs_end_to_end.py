"""A real Celery worker runs schedule, execute, rollback, schedule-and-execute, clean and recover on the
flights demo table, on SQLite + filesystem broker and on PostgreSQL + Redis; after every step the engine's
own view of the table and hudi 0.5.0's read agree, and the run rows hold what the engine reports."""
from __future__ import annotations

import datetime as dt

from engine import Table
from engine.read.query import read_arrow
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import register, run_to_end

T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)
LATER_T = dt.datetime(2013, 1, 10, tzinfo=dt.UTC)


def assert_hudi_agrees(path) -> dict:
    """Snapshot and read-optimized rows: ours == hudi 0.5.0's. Returns the snapshot rows."""
    snapshot = rows_by_key(read_arrow(str(path), "snapshot"))
    assert snapshot == rows_by_key(hudi_read(path, "snapshot"))
    assert rows_by_key(read_arrow(str(path), "read_optimized")) == rows_by_key(hudi_read(path, "read_optimized"))
    return snapshot


def iso_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def latest_sample(table):
    return table.samples.order_by("-taken_at").first()


def test_worker_runs_every_kind_end_to_end(stack, flights):
    from webapp.tables.models import AuditEvent

    table = register(flights)
    before = assert_hudi_agrees(flights)

    # A plan, rolled back while pending: the timeline is as before.
    first = run_to_end(table, "schedule", threshold=T)
    assert first.state == "succeeded", first.error
    rolled = run_to_end(table, "rollback", instant=first.instant)
    assert rolled.state == "succeeded", rolled.error
    assert first.instant not in {c.instant for c in Table.open(str(flights)).compactions()}
    assert latest_sample(table).pending_compactions == 0
    assert assert_hudi_agrees(flights) == before

    # Schedule, then execute: the run rows hold what the engine reports.
    planned = run_to_end(table, "schedule", threshold=T)
    assert planned.state == "succeeded", planned.error
    assert planned.instant and planned.plan["instant"] == planned.instant
    engine_plan = Table.open(str(flights)).compaction(planned.instant).to_dict()
    assert planned.plan["operations"] == engine_plan["operations"]
    assert engine_plan["state"] == "requested"
    executed = run_to_end(table, "execute", instant=planned.instant)
    assert executed.state == "succeeded", executed.error
    assert executed.result["instant"] == planned.instant
    assert executed.progress_total > 0 and executed.progress_done == executed.progress_total
    completion = iso_time(Table.open(str(flights)).freshness().to_dict()["ro_completion_time"])
    assert completion >= T
    assert latest_sample(table).ro_completion_time == completion, "sampled before the run was marked done"
    assert assert_hudi_agrees(flights) == before, "compaction never changes a snapshot"

    # Both in one run, a later T, logs carried over as copies.
    both = run_to_end(table, "schedule_execute", threshold=LATER_T, carry_over="copy")
    assert both.state == "succeeded", both.error
    assert both.plan["instant"] == both.instant == both.result["instant"]
    assert latest_sample(table).ro_completion_time >= LATER_T
    assert assert_hudi_agrees(flights) == before

    cleaned = run_to_end(table, "clean")
    assert cleaned.state == "succeeded", cleaned.error
    assert cleaned.result is not None
    assert assert_hudi_agrees(flights) == before

    recovered = run_to_end(table, "recover")
    assert recovered.state == "succeeded", recovered.error
    assert assert_hudi_agrees(flights) == before

    outcomes = sorted(AuditEvent.objects.filter(table=table, action__startswith="run.")
                      .values_list("action", "outcome"))
    assert outcomes == sorted([("run.schedule", "succeeded"), ("run.rollback", "succeeded"),
                               ("run.schedule", "succeeded"), ("run.execute", "succeeded"),
                               ("run.schedule_execute", "succeeded"), ("run.clean", "succeeded"),
                               ("run.recover", "succeeded")])


def test_a_trigger_while_a_plan_is_pending_is_refused_with_the_blocking_instant(stack, flights):
    from webapp.tables.models import AuditEvent

    table = register(flights)
    planned = run_to_end(table, "schedule", threshold=T)
    assert planned.state == "succeeded", planned.error
    refused = run_to_end(table, "schedule", threshold=T)
    assert refused.state == "refused"
    assert refused.refusal_reason == "pending_compaction"
    assert refused.blocking_instant == planned.instant
    audit = AuditEvent.objects.get(run=refused, action="run.schedule")
    assert audit.outcome == "refused" and audit.detail["blocking_instant"] == planned.instant


def test_a_metrics_run_stores_a_sample_matching_the_engine(stack, flights):
    table = register(flights)
    run = run_to_end(table, "metrics")
    assert run.state == "succeeded", run.error
    backlog = Table.open(str(flights)).metrics().to_dict()
    sample = latest_sample(table)
    assert (sample.remaining_log_files, sample.remaining_log_bytes, sample.file_slices_with_logs) == (
        backlog["remaining_log_files"], backlog["remaining_log_bytes"], backlog["file_slices_with_logs"])
    assert sample.tide, "the demo table has logs, so its tide has buckets"
    assert sample.freshness_lag_seconds > 0
