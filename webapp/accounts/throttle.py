"""Login rate limiting and the audit of failed logins — one record serves both.

Every failed login is an AuditEvent (`login.failed`, actor = the user name tried, the client address in its
detail), written from Django's `user_login_failed` signal, so the audit log shows it as docs/CONTROL-PLANE.md
promises. The login page refuses (429) a user name with `TIDEMARK_LOGIN_MAX_FAILURES` failures (default 5)
or a client address with four times as many within the last `TIDEMARK_LOGIN_WINDOW_MINUTES` (default 15)
— counted from those same rows, so every web process and every server agrees without a shared cache.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils import timezone

from engine import env
from webapp.tables.models import AuditEvent

FAILED = "login.failed"


def max_failures() -> int:
    return env.whole("TIDEMARK_LOGIN_MAX_FAILURES", 5, unit="failures")


def window() -> dt.timedelta:
    return dt.timedelta(minutes=env.number("TIDEMARK_LOGIN_WINDOW_MINUTES", 15, unit="minutes"))


def client_address(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") or "") if request is not None else ""


def username_tried(value: object) -> str:
    """The user name as audited: printable, at most 150 characters (the actor column)."""
    text = "".join(c for c in str(value or "") if c.isprintable())
    return text[:150] or "(empty)"


@receiver(user_login_failed)
def audit_failed_login(sender: object, credentials: dict[str, Any], request: HttpRequest | None = None, **_: object) -> None:
    AuditEvent.objects.create(at=timezone.now(), actor=username_tried(credentials.get("username")), action=FAILED,
                              outcome="refused", detail={"address": client_address(request)})


def locked_out(username: str, address: str) -> bool:
    """Too many recent failures for this user name, or from this address."""
    since = timezone.now() - window()
    recent = AuditEvent.objects.filter(action=FAILED, at__gte=since)
    if recent.filter(actor=username_tried(username)).count() >= max_failures():
        return True
    return bool(address) and recent.filter(detail__address=address).count() >= 4 * max_failures()
