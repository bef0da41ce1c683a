"""Change-driven sampling (tasks.change_sampling) on SQLite and PostgreSQL: an unchanged table is checked
but not sampled, a new compaction plan or its rollback is noticed and sampled, the floor interval samples
an unchanged table anyway, a run's own sample makes the next check a skip, a failing check is counted
without stopping the chunk, the counters reach /metrics, and beat's fan-out runs on the sampling queue of
a real worker."""
from __future__ import annotations

import datetime as dt
import time

from django.test import Client
from django.utils import timezone

from engine import Table
from tasks import change_sampling, sampling
from tests.support.runs import register
from webapp.tables.models import MetricSample, SamplingState

T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)


def state(table) -> SamplingState:
    return SamplingState.objects.get(table=table)


def samples(table) -> int:
    return MetricSample.objects.filter(table=table).count()


def test_only_changed_tables_are_sampled(stack_env, flights):
    table = register(flights)
    first = change_sampling.sample_tables([table.pk])
    assert (first.checked, first.sampled, first.skipped) == (1, 1, 0)       # never sampled: sampled
    assert samples(table) == 1

    again = change_sampling.sample_tables([table.pk])
    assert (again.checked, again.sampled, again.skipped, again.changed) == (1, 0, 1, 0)
    assert samples(table) == 1

    plan = Table.open(str(flights)).schedule_compaction(threshold=T)          # a new compaction plan
    planned = change_sampling.sample_tables([table.pk])
    assert (planned.changed, planned.sampled) == (1, 1)
    assert state(table).latest_sample.pending_compactions == 1
    assert state(table).newest_instant == f"{plan.instant}.compaction.requested"

    Table.open(str(flights)).rollback(plan.instant)                            # and its rollback
    rolled = change_sampling.sample_tables([table.pk])
    assert (rolled.changed, rolled.sampled) == (1, 1)
    assert state(table).latest_sample.pending_compactions == 0
    assert state(table).newest_instant.endswith(".rollback")

    counters = state(table)
    assert (counters.checks, counters.samples, counters.skips, counters.failures) == (4, 3, 1, 0)
    assert counters.check_seconds > 0 and counters.sample_seconds > 0 and counters.last_sample_seconds > 0


def test_floor_interval_samples_unchanged_tables(stack_env, flights, monkeypatch):
    table = register(flights)
    change_sampling.sample_tables([table.pk])
    sampled_at = state(table).sampled_at
    monkeypatch.setenv("TIDEMARK_SAMPLE_FLOOR_SECONDS", "600")
    soon = change_sampling.sample_tables([table.pk], now=sampled_at + dt.timedelta(seconds=599))
    assert (soon.skipped, soon.sampled) == (1, 0)
    due = change_sampling.sample_tables([table.pk], now=sampled_at + dt.timedelta(seconds=601))
    assert (due.changed, due.floor, due.sampled, due.confirmed) == (0, 1, 1, 1)
    assert samples(table) == 1                        # it read what the latest sample says: nothing stored
    assert state(table).sampled_at == sampled_at + dt.timedelta(seconds=601)
    table.freshness_sla_minutes = 1                   # the same table now breaches a new SLA
    table.save()
    later = change_sampling.sample_tables([table.pk], now=sampled_at + dt.timedelta(seconds=1300))
    assert (later.floor, later.sampled, later.confirmed) == (1, 1, 0)
    assert samples(table) == 2 and state(table).latest_sample.sla_breached


def test_a_runs_own_sample_makes_the_next_check_a_skip(stack_env, flights):
    table = register(flights)
    Table.open(str(flights)).schedule_compaction(threshold=T)
    sampling.refresh(table)                      # what the runner does after every run
    report = change_sampling.sample_tables([table.pk])
    assert (report.skipped, report.sampled) == (1, 0)


def test_a_failing_check_is_counted_and_the_chunk_goes_on(stack_env, flights, settings):
    settings.METRICS_OPEN = True   # /metrics is closed without a token unless opened
    gone = register(flights.parent / f"{flights.name}-gone")   # inside the allowed roots, but no table there
    table = register(flights)
    report = change_sampling.sample_tables([gone.pk, table.pk])
    assert (report.checked, report.failed, report.sampled) == (2, 1, 1)
    assert "change check failed" in state(gone).error and "no Hudi table" in state(gone).error
    assert state(gone).failures == 1 and state(table).error == ""

    from webapp.tables import listing

    assert [r.table["name"] for r in listing.page({"status": "failing"}, 10).rows] == [gone.name]
    body = Client().get("/metrics").content.decode()
    assert "tidemark_sampling_checks_total 2.0" in body and "tidemark_sampling_failures_total 1.0" in body
    assert f'tidemark_sample_duration_seconds{{table="{table.name}"}}' in body


def test_a_table_outside_the_roots_is_refused_by_the_check(stack_env, flights, tmp_path):
    outside = register(tmp_path / "elsewhere")   # tasks.location: the allow-list holds for checks too
    report = change_sampling.sample_tables([outside.pk])
    assert (report.checked, report.failed, report.sampled) == (1, 1, 0)
    assert "outside the allowed table roots" in state(outside).error


def test_fan_out_chunks_run_on_the_sampling_queue(stack, flights, tmp_path, monkeypatch):
    from tasks.jobs import sample_all_tables
    from webapp import dispatch, queues

    monkeypatch.setenv("TIDEMARK_SAMPLE_CHUNK", "2")
    tables = [register(flights)] + [register(tmp_path / f"missing-{i}") for i in range(3)]
    assert dispatch.chunks([t.pk for t in tables], dispatch.chunk_size()) == [
        [tables[0].pk, tables[1].pk], [tables[2].pk, tables[3].pk]]
    # beat sends the fan-out to the sampling queue; the worker (no -Q) consumes it and the chunks it sends
    sample_all_tables.apply_async(queue=queues.sampling_queue())
    deadline = time.monotonic() + 120
    while SamplingState.objects.filter(table__in=tables, checked_at__isnull=False).count() < len(tables):
        assert time.monotonic() < deadline, stack.log_text("worker")[-3000:]
        time.sleep(0.3)
    assert state(tables[0]).latest_sample is not None
    assert "tasks.jobs.sample_tables" in stack.log_text("worker")
    assert timezone.now() - state(tables[0]).checked_at < dt.timedelta(minutes=5)
