"""Raising an alert: one event → a delivery per subscribed channel, sent by a worker after the commit.

Callers (the worker recording a run's outcome, the sampler seeing an SLA breach start, the sweep finding a
lost worker) call `notify` once per occurrence. Each channel is told at most TIDEMARK_ALERT_RATE_PER_HOUR
times an hour about one table; deliveries over that are recorded as "suppressed", never silently dropped.
"""
from __future__ import annotations

import datetime as dt
import functools
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from webapp.alerts.models import EVENTS, AlertChannel, AlertDelivery
from webapp.tables.models import RegisteredTable, Run

log = logging.getLogger(__name__)

TITLES = {"run_failed": "run failed", "run_refused": "run refused", "sla_breached": "freshness SLA breached",
          "sla_recovered": "freshness SLA recovered", "late_data": "late data arrived",
          "corrupt_block": "corrupt log blocks found", "worker_lost": "worker lost during a run",
          "table_stale": "no write for too long", "test": "test alert"}


def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def payload(event: str, *, table: RegisteredTable | None, run: Run | None, reason: str, at: dt.datetime,
            detail: dict[str, Any]) -> dict[str, Any]:
    """The webhook body: the event, the table, the run (id, URL), the reason and the time, plus a `text`
    line that Slack and Teams incoming webhooks show as the message."""
    base = settings.TIDEMARK_BASE_URL
    run_part = None if run is None else {"id": run.pk, "kind": run.kind, "state": run.state,
                                         "url": base + reverse("tables:run", args=[run.pk])}
    table_part = None if table is None else {"name": table.name, "path": table.path,
                                             "url": base + reverse("tables:detail", args=[table.name])}
    where = f" on {table.name}" if table is not None else ""
    which = f" (run #{run.pk})" if run is not None else ""
    text = f"Tidemark: {TITLES.get(event, event)}{where}{which}: {reason}".rstrip(": ")
    return {"event": event, "table": table_part, "run": run_part, "reason": reason, "time": _iso(at),
            "detail": detail, "text": text}


def notify(event: str, *, table: RegisteredTable | None = None, run: Run | None = None, reason: str = "",
           detail: dict[str, Any] | None = None) -> list[int]:
    """Record a delivery of `event` for every enabled channel subscribed to it; returns their ids. Never
    raises: an alert that cannot be queued is logged, and must not fail the run that raised it."""
    if event not in EVENTS:
        raise ValueError(f"unknown alert event {event!r}; known: {', '.join(EVENTS)}")
    try:
        return _notify(event, table, run, reason, detail or {})
    except Exception:
        log.exception("could not queue the %s alert", event)
        return []


def _notify(event: str, table: RegisteredTable | None, run: Run | None, reason: str, detail: dict[str, Any]) -> list[int]:
    now = timezone.now()
    body = payload(event, table=table, run=run, reason=reason, at=now, detail=detail)
    ids = []
    with transaction.atomic():
        for channel in AlertChannel.objects.filter(enabled=True):
            if event not in channel.events:
                continue
            status = AlertDelivery.Status.SUPPRESSED if _over_limit(channel, table, now) else AlertDelivery.Status.PENDING
            delivery = AlertDelivery.objects.create(channel=channel, event=event, table=table, run=run,
                                                    payload=body, status=status, created_at=now)
            if status == AlertDelivery.Status.PENDING:
                ids.append(delivery.pk)
        for delivery_id in ids:
            transaction.on_commit(functools.partial(_dispatch, delivery_id))
    return ids


def send_test(channel: AlertChannel, actor: str) -> AlertDelivery:
    """One test delivery to `channel` (subscribed or not, never rate-limited), sent by a worker after the commit
    like any other: its outcome shows on the channel's page."""
    now = timezone.now()
    body = payload("test", table=None, run=None, reason=f"sent from the dashboard by {actor}", at=now, detail={})
    with transaction.atomic():
        delivery = AlertDelivery.objects.create(channel=channel, event="test", payload=body, created_at=now)
        transaction.on_commit(functools.partial(_dispatch, delivery.pk))
    return delivery


def _over_limit(channel: AlertChannel, table: RegisteredTable | None, now: dt.datetime) -> bool:
    sent = AlertDelivery.objects.filter(channel=channel, table=table, created_at__gt=now - dt.timedelta(hours=1)) \
        .exclude(status=AlertDelivery.Status.SUPPRESSED).count()
    return sent >= settings.TIDEMARK_ALERT_RATE_PER_HOUR


def _dispatch(delivery_id: int) -> None:
    from webapp.dispatch import send_alert  # loaded only when an alert is sent, as for runs

    send_alert(delivery_id)
