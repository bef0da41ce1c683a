"""API tokens: a bearer credential per user for scripts and CI (the browser uses its session)."""
from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models
from django.utils import timezone


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


DEFAULT_LIFETIME_DAYS = 90


class ApiToken(models.Model):
    """Only the token's SHA-256 is stored; the raw value is shown once when it is created.

    A token works until it expires (`expires_at`, 90 days by default; None: never) or is revoked
    (`revoked_at`, `manage.py tidemark_token USER --revoke NAME`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.name or self.key_digest[:8]}"

    @classmethod
    def issue(cls, user: User, name: str = "", days: float | None = DEFAULT_LIFETIME_DAYS) -> tuple[ApiToken, str]:
        """Create a token for `user` valid `days` (None: no expiry); returns the row and the raw token
        (not recoverable later)."""
        raw = "tm_" + secrets.token_urlsafe(32)
        expires = timezone.now() + dt.timedelta(days=days) if days is not None else None
        return cls.objects.create(user=user, name=name, key_digest=digest(raw), expires_at=expires), raw

    @classmethod
    def usable(cls) -> models.QuerySet[ApiToken]:
        """Tokens that authenticate now: not revoked, not expired."""
        now = timezone.now()
        return cls.objects.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))
