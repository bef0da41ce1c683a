"""Runs cannot be stranded in the broker: late acknowledgement with a visibility timeout sized to the lease,
and a queued timeout — the sweep fails a run no worker started in time (so beat stops treating its table as
busy), and a worker that receives such a run's message later never executes it."""
from __future__ import annotations

import datetime as dt

from django.utils import timezone

from tests.support.runs import register


def test_broker_settings_ack_late_with_a_visibility_timeout_sized_to_the_lease(stack_env):
    from django.conf import settings

    from tasks import app
    from tasks.lease import DEFAULT_TTL_S

    assert app.conf.task_acks_late is True and app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_reject_on_worker_lost is False   # a killed run is swept and recovered, never re-run
    if stack_env.backend == "postgresql":
        timeout = app.conf.broker_transport_options["visibility_timeout"]
        assert DEFAULT_TTL_S < timeout <= max(60, 4 * DEFAULT_TTL_S) < 3600
    assert settings.TIDEMARK_QUEUED_TIMEOUT_S > 0


def test_a_run_queued_past_its_timeout_is_failed_by_the_sweep_and_never_executed(stack_env, flights, settings):
    from tasks import periodic, runner, sweep
    from webapp.tables.models import AuditEvent, Run

    settings.TIDEMARK_QUEUED_TIMEOUT_S = 60
    table = register(flights, schedule_minutes=1)
    old = timezone.now() - dt.timedelta(minutes=5)
    stranded = Run.objects.create(table=table, kind="schedule", state="queued", queued_at=old,
                                  threshold="2013-01-06T00:00:00Z")
    fresh = Run.objects.create(table=table, kind="metrics", state="queued")
    assert periodic._busy(table)
    assert sweep.sweep_lost_runs() == [stranded.pk]
    stranded.refresh_from_db()
    assert stranded.state == "failed" and "queued for more than 60 s" in stranded.error
    assert AuditEvent.objects.filter(run=stranded, outcome="failed").exists()
    assert Run.objects.get(pk=fresh.pk).state == "queued", "a run within its timeout stays queued"

    late = Run.objects.create(table=table, kind="schedule", state="queued", queued_at=old,
                              threshold="2013-01-06T00:00:00Z")
    assert runner.perform(late.pk) == "failed"      # its message arrives after the timeout: not executed
    late.refresh_from_db()
    assert late.started_at is None and "not executed" in late.error
    from engine import Table

    assert not Table.open(str(flights)).compactions(), "an expired request made a plan"


def test_a_run_whose_worker_died_after_its_commit_is_not_a_failure(stack_env, flights):
    """The sweep finds the run's compaction completed on the timeline: the run did what it was asked (its
    worker died after the commit); one whose compaction did not complete is failed as before."""
    from engine import Table
    from tasks import sweep
    from webapp.tables.models import Run

    table = register(flights)
    t = Table.open(str(flights))
    done = t.run_compaction(t.schedule_compaction(threshold="2013-01-03T00:00:00Z").instant, local=True)
    long_ago = timezone.now() - dt.timedelta(hours=2)
    committed = Run.objects.create(table=table, kind="schedule_execute", state="running", queued_at=long_ago,
                                   started_at=long_ago, instant=done.instant)
    unfinished = Run.objects.create(table=table, kind="schedule_execute", state="running", queued_at=long_ago,
                                    started_at=long_ago, instant="20130101000000000")
    assert sweep.sweep_lost_runs() == [unfinished.pk]
    committed.refresh_from_db()
    unfinished.refresh_from_db()
    assert committed.state == "succeeded" and "after compaction" in committed.result["note"]
    assert unfinished.state == "failed" and unfinished.error == sweep.LOST
