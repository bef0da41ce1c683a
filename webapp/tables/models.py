"""What the control plane remembers: registered tables, runs, metric samples, audit events, leases.

The database holds only what the engine reported (samples, plans, results) and who asked for what;
the table's truth stays on storage and is read through `engine.Table` by the workers.
"""
from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models
from django.utils import timezone

CARRY_OVER_CHOICES = [("symlink", "symlink"), ("copy", "copy")]
FREE_SINCE = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)  # expiry of a lease nobody ever took


class RegisteredTable(models.Model):
    """A Hudi MOR table under an allow-listed root that Tidemark samples and compacts."""

    name = models.SlugField(max_length=100, unique=True)
    path = models.CharField(max_length=1000)
    schedule_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="Run the event-time trigger every N minutes (empty: never automatically).")
    data_latency = models.CharField(
        max_length=32, blank=True, help_text='Threshold T = now − data latency, e.g. "2h" (empty: table default).')
    freshness_sla_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="RO must be complete to within this many minutes (empty: no SLA).")
    carry_over = models.CharField(max_length=16, choices=CARRY_OVER_CHOICES, default="symlink")
    exact = models.BooleanField(default=False)
    paused = models.BooleanField(default=False, help_text="Schedule and SLA auto-trigger suspended (manual runs still allowed).")
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    """One requested table operation, from queueing to its outcome (the plan/run audit record)."""

    class Kind(models.TextChoices):
        SCHEDULE = "schedule"
        EXECUTE = "execute"
        SCHEDULE_EXECUTE = "schedule_execute"
        CLEAN = "clean"
        ROLLBACK = "rollback"
        RECOVER = "recover"
        METRICS = "metrics"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        REFUSED = "refused"
        CANCELLED = "cancelled"

    class Trigger(models.TextChoices):
        USER = "user"
        SCHEDULE = "schedule"
        SLA = "sla"

    table = models.ForeignKey(RegisteredTable, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    instant = models.CharField(max_length=32, blank=True)
    threshold = models.DateTimeField(null=True, blank=True)
    data_latency = models.CharField(max_length=32, blank=True)
    carry_over = models.CharField(max_length=16, choices=CARRY_OVER_CHOICES, blank=True)
    exact = models.BooleanField(null=True, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.USER)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    progress_done = models.IntegerField(default=0)
    progress_total = models.IntegerField(default=0)
    progress_unit = models.CharField(max_length=32, blank=True)
    plan = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    refusal_reason = models.CharField(max_length=64, blank=True)
    blocking_instant = models.CharField(max_length=32, blank=True)
    celery_task_id = models.CharField(max_length=64, blank=True)
    cancel_requested = models.BooleanField(default=False)

    class Meta:
        ordering = ["-queued_at", "-id"]
        indexes = [models.Index(fields=["table", "-queued_at"]), models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} {self.table_id} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)


class MetricSample(models.Model):
    """Freshness and backlog of one table at one moment, as the engine reported them."""

    table = models.ForeignKey(RegisteredTable, on_delete=models.CASCADE, related_name="samples")
    taken_at = models.DateTimeField(default=timezone.now)
    ro_completion_time = models.DateTimeField(null=True, blank=True)
    ro_freshness_time = models.DateTimeField(null=True, blank=True)
    freshness_lag_seconds = models.FloatField(null=True, blank=True)
    remaining_log_files = models.IntegerField(default=0)
    remaining_log_bytes = models.BigIntegerField(default=0)
    file_slices_with_logs = models.IntegerField(default=0)
    pending_compactions = models.IntegerField(default=0)
    late_records = models.BigIntegerField(default=0)
    corrupt_log_blocks = models.IntegerField(default=0)   # damaged committed blocks: their records are hidden
    earliest_pending_compaction = models.CharField(max_length=32, blank=True)   # instant time, "" when none
    latest_completed_compaction = models.CharField(max_length=32, blank=True)
    sla_breached = models.BooleanField(default=False)
    tide = models.JSONField(default=list, blank=True)
    # engine.Table.catalog_status(): catalogs, `<db>.<name>_ro/_rt`, the last sync (synced_at, ok, error)
    catalog = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-taken_at"]
        indexes = [models.Index(fields=["table", "-taken_at"], name="sample_table_latest")]

    def __str__(self) -> str:
        return f"{self.table_id} @ {self.taken_at:%Y-%m-%d %H:%M:%S}"


class AuditEvent(models.Model):
    """Who did what to which table, when, and how it ended."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="audit_events")
    actor = models.CharField(max_length=150)
    action = models.CharField(max_length=64)
    table = models.ForeignKey(RegisteredTable, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="audit_events")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events")
    outcome = models.CharField(max_length=32, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.outcome}"


class TableLease(models.Model):
    """The lock row of one physical table (tasks.lease implements the engine's TableLock protocol on it).

    Keyed by the table's canonical location (symlinks resolved), so every registration of one path shares
    it; `table` is the registration that last took it (for messages).
    """

    location = models.CharField(max_length=1000, unique=True)
    table = models.ForeignKey(RegisteredTable, null=True, blank=True, on_delete=models.SET_NULL, related_name="leases")
    owner = models.CharField(max_length=200, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(default=FREE_SINCE, help_text="A lease past this moment may be taken by anyone.")

    def __str__(self) -> str:
        return f"{self.location}: {self.owner or 'free'}"
