"""A run that plans nothing ends `refused` with its reason and one line, never `failed` with a database
error; an unexpected error ends the run with one line and an error id (the trace only in the worker log);
the table's new sample is recorded with the run's outcome, stamped with its `finished_at`."""
from __future__ import annotations

import datetime as dt
import logging

import pytest

from tests.support.runs import register

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)

T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)
EARLIER_T = dt.datetime(2013, 1, 3, tzinfo=dt.UTC)


def queued(table, kind: str, **params):
    """A queued run row, carried out in this process by `runner.perform` (no broker involved)."""
    from django.utils import timezone

    from webapp.tables.models import Run

    return Run.objects.create(table=table, kind=kind, state="queued", queued_at=timezone.now(), **params)


def perform(run):
    from tasks import runner

    runner.perform(run.pk)
    run.refresh_from_db()
    return run


def test_a_trigger_after_compacting_to_a_later_t_is_refused_nothing_to_compact(stack_env, flights):
    from webapp.tables.models import AuditEvent

    table = register(flights)
    first = perform(queued(table, "schedule_execute", threshold=T))
    assert first.state == "succeeded", first.error
    # What Hudi's metrics report for the compaction is kept for /metrics, and the sample names it.
    stats = first.result["compaction_stats"]
    assert stats["log_files_compacted"] > 0 and stats["log_bytes_compacted"] > 0
    sample = table.samples.order_by("-taken_at").first()
    assert sample.latest_completed_compaction == first.instant and sample.earliest_pending_compaction == ""

    for kind in ("schedule_execute", "schedule"):
        again = perform(queued(table, kind, threshold=EARLIER_T))
        assert again.state == "refused", again.error
        assert again.refusal_reason == "nothing_to_compact"
        assert again.error.startswith("nothing to compact up to 2013-01-03T00:00:00Z")
        assert "\n" not in again.error and "IntegrityError" not in again.error
        assert again.instant == "" and again.plan is None
        event = AuditEvent.objects.get(run=again, action=f"run.{kind}")
        assert event.outcome == "refused" and event.detail["refusal_reason"] == "nothing_to_compact"


def test_an_unexpected_error_ends_the_run_with_one_line_and_an_error_id(stack_env, flights, monkeypatch, caplog):
    from tasks import operations

    def broken(*_args, **_kwargs):
        raise RuntimeError("disk on fire\nsecond line of detail")

    monkeypatch.setitem(operations.BY_KIND, "clean", broken)
    table = register(flights)
    with caplog.at_level(logging.ERROR, logger="tasks.runner"):
        run = perform(queued(table, "clean"))
    assert run.state == "failed"
    assert "\n" not in run.error and "Traceback" not in run.error
    assert run.error.startswith("internal error while running clean: RuntimeError: disk on fire (error id ")
    error_id = run.error.split("error id ")[1].split(";")[0]
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged and logged[0].exc_info, "the trace is logged under the error id"


def test_the_post_run_sample_is_stamped_with_the_run_s_finish(stack_env, flights):
    table = register(flights)
    run = perform(queued(table, "schedule", threshold=T))
    assert run.state == "succeeded", run.error
    sample = table.samples.order_by("-taken_at").first()
    assert sample is not None and sample.taken_at == run.finished_at
    assert sample.pending_compactions == 1
