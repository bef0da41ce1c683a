"""Alert channels (where people are told) and deliveries (each time they were, or could not be, told)."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

# The events a channel can subscribe to; each is emitted once per occurrence (a breach, a run's end, ...).
EVENTS = ("run_failed", "run_refused", "sla_breached", "sla_recovered", "late_data", "corrupt_block",
          "worker_lost", "table_stale")
TEST_EVENT = "test"   # sent to one channel on an operator's request, whatever it subscribes to


class AlertChannel(models.Model):
    """A webhook (Slack/Teams-compatible JSON) or an email address, with the events it wants."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        EMAIL = "email"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    target = models.CharField(max_length=1000, help_text="The webhook URL or the email address.")
    events = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.target}"


class AlertDelivery(models.Model):
    """One event sent (or to be sent) to one channel, with its attempts and the receiver's answer."""

    class Status(models.TextChoices):
        PENDING = "pending"          # queued, not tried yet
        RETRYING = "retrying"        # failed at least once, will be tried again after a backoff
        SENT = "sent"
        FAILED = "failed"            # every attempt failed
        SUPPRESSED = "suppressed"    # over the channel's rate limit for this table: recorded, not sent

    channel = models.ForeignKey(AlertChannel, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=32)
    table = models.ForeignKey("tables.RegisteredTable", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    run = models.ForeignKey("tables.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.IntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["channel", "table", "-created_at"], name="delivery_rate")]

    def __str__(self) -> str:
        return f"{self.event} → {self.channel_id} ({self.status})"
