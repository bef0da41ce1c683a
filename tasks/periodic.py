"""What beat asks for: each table's event-time trigger on its schedule, metric samples, the SLA check.

A scheduled or SLA-triggered compaction is an ordinary run (kind "schedule_execute", requested by no
user, trigger "schedule" or "sla"), requested through the pages' own door (`webapp.tables.services.request_run`:
the queued row, its audit entry, its dispatch): it goes through the same lease and the engine's serial trigger
as a click, so it can be refused like one. A table gets no new automatic run while one of its runs is queued
or running.
"""
from __future__ import annotations

import datetime as dt
import logging

from django.utils import timezone

from engine import Refused, TidemarkError
from tasks import location as locations
from tasks.operations import NOTHING_TO_COMPACT
from tasks.records import finish
from webapp.tables.models import AuditEvent, MetricSample, RegisteredTable, Run
from webapp.tables.services import request_run

log = logging.getLogger(__name__)

ACTIVE = (Run.State.QUEUED, Run.State.RUNNING)


def _busy(table: RegisteredTable) -> bool:
    return Run.objects.filter(table=table, state__in=ACTIVE).exists()


def enqueue_compaction(table: RegisteredTable, trigger: str) -> Run:
    """Queue a schedule-and-execute run with the table's registered defaults, audited as the system."""
    return request_run(table, Run.Kind.SCHEDULE_EXECUTE, None, trigger=trigger, data_latency=table.data_latency,
                       carry_over=table.carry_over, exact=table.exact)


def _due(table: RegisteredTable, now: dt.datetime) -> bool:
    if not table.schedule_minutes:   # trigger_due_tables asks only of scheduled tables
        return False
    since = now - dt.timedelta(minutes=table.schedule_minutes)
    recent = Run.objects.filter(table=table, trigger=Run.Trigger.SCHEDULE, queued_at__gt=since).exists()
    return not recent and not _busy(table)


def trigger_due_tables() -> list[int]:
    now = timezone.now()
    due = [t for t in RegisteredTable.objects.filter(schedule_minutes__isnull=False, schedule_minutes__gt=0,
                                                     paused=False)
           if _due(t, now)]
    return [enqueue_compaction(t, Run.Trigger.SCHEDULE).pk for t in due]


def check_sla(table: RegisteredTable, sample: MetricSample) -> Run | None:
    """On a breached sample, auto-trigger a compaction unless a run is active. A trigger that cannot plan
    (nothing to compact, a plan pending, no threshold) is recorded once per breach as a refused run with
    its reason, instead of being queued to fail on every sample. (The breach itself is audited and alerted
    by tasks.watch when the sample is stored.)"""
    if not sample.sla_breached or table.paused or _busy(table):
        return None
    refusal = _cannot_plan(table)
    if refusal is None:
        return enqueue_compaction(table, Run.Trigger.SLA)
    reason, message, blocking = refusal
    if _refused_since_breach(table, reason):
        return None
    return record_refusal(table, reason, message, blocking)


def _cannot_plan(table: RegisteredTable) -> tuple[str, str, str] | None:
    """(reason, message, blocking instant) when the SLA trigger would plan nothing now; None when it would."""
    try:
        plan = locations.open_table(table.path).plan_compaction(
            strategy="event_time", data_latency=table.data_latency or None, carry_over=table.carry_over or None,
            exact=table.exact)
    except Refused as refusal:
        return refusal.reason, refusal.message, refusal.blocking_instant or ""
    except TidemarkError as exc:
        return "cannot_plan", str(exc), ""
    if plan.instant is None and not plan.operations:
        return NOTHING_TO_COMPACT, f"the SLA trigger has nothing to compact up to {plan.threshold}", ""
    return None


def _refused_since_breach(table: RegisteredTable, reason: str) -> bool:
    started = (AuditEvent.objects.filter(table=table, action="sla_breached").order_by("-at")
               .values_list("at", flat=True).first())
    runs = Run.objects.filter(table=table, trigger=Run.Trigger.SLA, state=Run.State.REFUSED, refusal_reason=reason)
    return runs.filter(queued_at__gte=started).exists() if started else runs.exists()


def record_refusal(table: RegisteredTable, reason: str, message: str, blocking: str) -> Run:
    """A refused SLA run, recorded (audited, alerted) without ever being queued."""
    now = timezone.now()
    run = Run.objects.create(table=table, kind=Run.Kind.SCHEDULE_EXECUTE, state=Run.State.RUNNING, trigger=Run.Trigger.SLA,
                             data_latency=table.data_latency, carry_over=table.carry_over, exact=table.exact,
                             queued_at=now, started_at=now)
    finish(run, Run.State.REFUSED, refusal_reason=reason, error=message, blocking_instant=blocking)
    return run
