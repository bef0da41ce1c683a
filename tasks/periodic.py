"""What beat asks for: each table's event-time trigger on its schedule, metric samples, the SLA check.

A scheduled or SLA-triggered compaction is an ordinary run (kind "schedule_execute", requested by no
user, trigger "schedule" or "sla"): it goes through the same lease and the engine's serial trigger as a
click, so it can be refused like one. A table gets no new automatic run while one of its runs is queued
or running.
"""
from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction
from django.utils import timezone

from tasks.jobs import dispatch
from webapp.tables.models import AuditEvent, MetricSample, RegisteredTable, Run

log = logging.getLogger(__name__)

ACTIVE = ("queued", "running")


def _busy(table: RegisteredTable) -> bool:
    return Run.objects.filter(table=table, state__in=ACTIVE).exists()


def enqueue_compaction(table: RegisteredTable, trigger: str) -> Run:
    """Queue a schedule-and-execute run with the table's registered defaults, audited as the system."""
    with transaction.atomic():
        run = Run.objects.create(table=table, kind="schedule_execute", state="queued", trigger=trigger,
                                 data_latency=table.data_latency, carry_over=table.carry_over,
                                 exact=table.exact, queued_at=timezone.now())
        AuditEvent.objects.create(at=timezone.now(), actor=f"system ({trigger})", action="trigger",
                                  table=table, run=run, outcome="queued",
                                  detail={"kind": run.kind, "data_latency": table.data_latency})
        dispatch(run.pk)
    return run


def _due(table: RegisteredTable, now: dt.datetime) -> bool:
    since = now - dt.timedelta(minutes=table.schedule_minutes)
    recent = Run.objects.filter(table=table, trigger="schedule", queued_at__gt=since).exists()
    return not recent and not _busy(table)


def trigger_due_tables() -> list[int]:
    now = timezone.now()
    due = [t for t in RegisteredTable.objects.filter(schedule_minutes__isnull=False, schedule_minutes__gt=0)
           if _due(t, now)]
    return [enqueue_compaction(t, "schedule").pk for t in due]


def check_sla(table: RegisteredTable, sample: MetricSample, previous: MetricSample | None) -> Run | None:
    """On a breached sample: audit the breach when it starts, and auto-trigger unless a run is active."""
    if not sample.sla_breached:
        return None
    detail = {"freshness_lag_seconds": sample.freshness_lag_seconds,
              "freshness_sla_minutes": table.freshness_sla_minutes,
              "ro_completion_time": sample.ro_completion_time.isoformat() if sample.ro_completion_time else None}
    if previous is None or not previous.sla_breached:
        AuditEvent.objects.create(at=timezone.now(), actor="system (sla)", action="sla_breached", table=table,
                                  outcome="breached", detail=detail)
    if _busy(table):
        return None
    return enqueue_compaction(table, "sla")


def sample_all_tables() -> list[int]:
    """Every table in this process (change check first; see tasks.change_sampling); returns SLA runs."""
    from tasks import change_sampling

    ids = RegisteredTable.objects.order_by("pk").values_list("pk", flat=True)
    return change_sampling.sample_tables(list(ids)).triggered
