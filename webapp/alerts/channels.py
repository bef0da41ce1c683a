"""Managing alert channels (pages and API alike): validated, audited."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email

from webapp.accounts.roles import AnyUser
from webapp.alerts import targets
from webapp.alerts.models import EVENTS, AlertChannel, AlertDelivery
from webapp.tables.inputs import InvalidInput
from webapp.tables.services import account, audit


def parse_events(raw: Any) -> list[str]:
    if isinstance(raw, str):
        raw = [e for e in (part.strip() for part in raw.split(",")) if e]
    if not isinstance(raw, list) or not raw or not all(isinstance(e, str) for e in raw):
        raise InvalidInput(f"events must be a non-empty list of: {', '.join(EVENTS)}")
    unknown = sorted(set(raw) - set(EVENTS))
    if unknown:
        raise InvalidInput(f"unknown events {', '.join(unknown)}; known: {', '.join(EVENTS)}")
    return [e for e in EVENTS if e in raw]


def parse_target(kind: str, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("target is required (the webhook URL or the email address)")
    target = raw.strip()
    try:
        if kind == AlertChannel.Kind.WEBHOOK:
            URLValidator(schemes=["http", "https"])(target)
        else:
            validate_email(target)
    except ValidationError:
        what = "an http(s) URL" if kind == AlertChannel.Kind.WEBHOOK else "an email address"
        raise InvalidInput(f"target {target!r} is not {what}") from None
    refused = targets.internal_reason(target) if kind == AlertChannel.Kind.WEBHOOK else None
    if refused:
        raise InvalidInput(f"target {target!r} refused: {refused}")
    return target


def create_channel(user: AnyUser | None, data: dict[str, Any]) -> AlertChannel:
    kind = data.get("kind")
    if kind not in AlertChannel.Kind.values:
        raise InvalidInput(f"kind must be \"webhook\" or \"email\", got {kind!r}")
    channel = AlertChannel.objects.create(kind=kind, target=parse_target(kind, data.get("target")),
                                          events=parse_events(data.get("events")), created_by=account(user))
    audit(user, "alert_channel.create", outcome="succeeded",
          detail={"channel": channel.pk, "kind": channel.kind, "target": channel.target, "events": channel.events})
    return channel


def delete_channel(user: AnyUser | None, channel: AlertChannel) -> None:
    detail = {"channel": channel.pk, "kind": channel.kind, "target": channel.target}
    channel.delete()
    audit(user, "alert_channel.delete", outcome="succeeded", detail=detail)


def test_channel(user: AnyUser | None, channel: AlertChannel) -> AlertDelivery:
    """Queue a test alert to `channel`, audited."""
    from webapp.alerts.events import send_test
    from webapp.tables.services import actor_name

    delivery = send_test(channel, actor_name(user))
    audit(user, "alert_channel.test", outcome="queued", detail={"channel": channel.pk, "delivery": delivery.pk})
    return delivery


def channel_dict(channel: AlertChannel, deliveries: int = 0) -> dict[str, Any]:
    from django.urls import reverse

    from webapp.tables.status import iso

    body: dict[str, Any] = {"id": channel.pk, "kind": channel.kind, "target": channel.target,
                            "events": channel.events, "enabled": channel.enabled,
                            "created_at": iso(channel.created_at),
                            "url": reverse("api:alert-channel", args=[channel.pk])}
    if deliveries:
        body["deliveries"] = [delivery_dict(d) for d in channel.deliveries.select_related("table")[:deliveries]]
    return body


def delivery_dict(delivery: AlertDelivery) -> dict[str, Any]:
    from webapp.tables.status import iso

    return {"id": delivery.pk, "event": delivery.event, "table": delivery.table.name if delivery.table else None,
            "run": delivery.run_id, "status": delivery.status, "attempts": delivery.attempts,
            "response_code": delivery.response_code, "error": delivery.last_error or None,
            "created_at": iso(delivery.created_at), "sent_at": iso(delivery.sent_at)}
