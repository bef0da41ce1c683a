"""Sending one delivery: POST the JSON to a webhook, or mail it through Django's mail backend.

`attempt(delivery_id)` tries once and records the outcome (status, attempts, response code, error); it
returns the seconds to wait before the next try while attempts remain (exponential backoff), else None.
The Celery task `tasks.jobs.deliver_alert` calls it and schedules the retry.
"""
from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from webapp.alerts import targets
from webapp.alerts.models import AlertChannel, AlertDelivery

log = logging.getLogger(__name__)

TIMEOUT_S = 10


class DeliveryError(Exception):
    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook that answers with a redirect is not followed: the new target was never checked
    (`webapp.alerts.targets`); the 3xx is recorded as the delivery's answer."""

    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def post_webhook(url: str, body: dict[str, Any]) -> int:
    refused = targets.internal_reason(url)   # again now: the name may resolve elsewhere than when it was added
    if refused:
        raise DeliveryError(f"webhook not sent: {refused}")
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "tidemark-alerts"})
    try:
        with _OPENER.open(request, timeout=TIMEOUT_S) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"webhook answered {exc.code} {exc.reason}", exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryError(f"webhook unreachable: {getattr(exc, 'reason', exc)}") from None


def send_email(address: str, body: dict[str, Any]) -> int:
    lines = [body["text"], "", f"event: {body['event']}", f"time: {body['time']}"]
    if body.get("table"):
        lines.append(f"table: {body['table']['name']} ({body['table']['url']})")
    if body.get("run"):
        lines.append(f"run: #{body['run']['id']} {body['run']['url']}")
    if body.get("reason"):
        lines.append(f"reason: {body['reason']}")
    try:
        send_mail(subject=body["text"][:150], message="\n".join(lines), from_email=settings.DEFAULT_FROM_EMAIL,
                  recipient_list=[address])
    except Exception as exc:  # smtplib, socket: the receiver's problem, recorded on the delivery
        code = getattr(exc, "smtp_code", None)
        raise DeliveryError(f"mail not accepted: {type(exc).__name__}: {exc}"[:400], code) from None
    return 250


def send(channel: AlertChannel, body: dict[str, Any]) -> int:
    if channel.kind == AlertChannel.Kind.WEBHOOK:
        return post_webhook(channel.target, body)
    return send_email(channel.target, body)


def backoff_s(attempts: int) -> float:
    """Seconds before attempt `attempts + 1`: base, 2×base, 4×base, ..."""
    return float(settings.TIDEMARK_ALERT_BACKOFF_S) * 2.0 ** (attempts - 1)


def attempt(delivery_id: int) -> float | None:
    delivery = AlertDelivery.objects.select_related("channel").get(pk=delivery_id)
    if delivery.status not in (AlertDelivery.Status.PENDING, AlertDelivery.Status.RETRYING):
        return None
    attempts = delivery.attempts + 1
    try:
        code = send(delivery.channel, delivery.payload)
    except DeliveryError as exc:
        last = attempts >= settings.TIDEMARK_ALERT_ATTEMPTS
        AlertDelivery.objects.filter(pk=delivery_id).update(
            attempts=attempts, response_code=exc.code, last_error=str(exc)[:500],
            status=AlertDelivery.Status.FAILED if last else AlertDelivery.Status.RETRYING)
        log.warning("alert delivery %s attempt %s failed: %s", delivery_id, attempts, exc)
        return None if last else backoff_s(attempts)
    AlertDelivery.objects.filter(pk=delivery_id).update(attempts=attempts, response_code=code, last_error="",
                                                        status=AlertDelivery.Status.SENT, sent_at=timezone.now())
    return None
