"""API tokens: a bearer credential per user for scripts and CI (the browser uses its session)."""
from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """Only the token's SHA-256 is stored; the raw value is shown once when it is created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.name or self.key_digest[:8]}"

    @classmethod
    def issue(cls, user, name: str = "") -> tuple["ApiToken", str]:
        """Create a token for `user`; returns the row and the raw token (not recoverable later)."""
        raw = "tm_" + secrets.token_urlsafe(32)
        return cls.objects.create(user=user, name=name, key_digest=digest(raw)), raw
