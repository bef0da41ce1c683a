"""What the control plane remembers: registered tables, runs, metric samples, audit events, leases.

The database holds only what the engine reported (samples, plans, results) and who asked for what;
the table's truth stays on storage and is read through `engine.Table` by the workers.
"""
from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models
from django.utils import timezone

from engine import CarryOver

CARRY_OVER_CHOICES = [(m.value, m.value) for m in CarryOver]   # the engine's set: one definition
FREE_SINCE = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)  # expiry of a lease nobody ever took


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
        VALIDATE = "validate"      # Hudi CLI's `compaction validate` of a pending plan
        UNSCHEDULE = "unschedule"  # `compaction unschedule`: the plan, or one file group of it
        REPAIR = "repair"          # `compaction repair` after an interrupted unschedule

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
    # Pending-plan administration: the one file group to unschedule ("<partition>/<fileId>", or a file id),
    # and whether an unschedule or repair only lists what it would rename.
    file_group = models.CharField(max_length=512, blank=True)
    dry_run = models.BooleanField(default=False)

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
    # The earliest committed write still waiting in a log (instant time, "" when no log remains): backlog age.
    oldest_log_instant = models.CharField(max_length=32, blank=True)
    sla_breached = models.BooleanField(default=False)
    tide = models.JSONField(default=list, blank=True)
    # Log backlog per partition × event-time bucket (tasks.heatmap); only the latest sample keeps it, as the tide.
    backlog_heatmap = models.JSONField(default=dict, blank=True)
    # Retention (webapp.tables.retention): 0 for a sample as taken; 3600 or 86400 once rolled up into the
    # hourly or daily row that stands for `rolled_up` samples.
    resolution_seconds = models.IntegerField(default=0)
    rolled_up = models.IntegerField(default=1)
    # engine.Table.catalog_status(): catalogs, `<db>.<name>_ro/_rt`, the last sync (synced_at, ok, error)
    catalog = models.JSONField(default=dict, blank=True)
    # hoodie.table.version as the engine read it (6, or 8 and 9 for Hudi 1.x); null on samples taken before it was kept
    table_version = models.PositiveSmallIntegerField(null=True, blank=True)
    # engine.Table.activity(): housekeeping (clean policy and retention with their source, last clean, archival,
    # active timeline size) and ingestion (last write and when, a stream's query/batch/watermark); {} before it was kept
    activity = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-taken_at"]
        indexes = [models.Index(fields=["table", "-taken_at"], name="sample_table_latest"),
                   models.Index(fields=["resolution_seconds", "taken_at"], name="sample_resolution_age")]

    def __str__(self) -> str:
        return f"{self.table_id} @ {self.taken_at:%Y-%m-%d %H:%M:%S}"


class SamplingState(models.Model):
    """Where sampling stands for one table: its newest sample, its last change check, and their costs.

    `latest_sample` points at the table's newest MetricSample (kept by webapp.tables.latest on every save),
    so pages filter, sort and paginate thousands of tables with joins on primary keys instead of looking
    for each table's newest sample. `mark` is the engine's timeline fingerprint as of the newest check or
    sample: an equal mark means the table is unchanged and its full sample is skipped (tasks.change_sampling).
    """

    table = models.OneToOneField(RegisteredTable, on_delete=models.CASCADE, primary_key=True,
                                 related_name="sampling")
    latest_sample = models.ForeignKey(MetricSample, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="sampling_latest")
    mark = models.CharField(max_length=64, blank=True)
    newest_instant = models.CharField(max_length=64, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    changed_at = models.DateTimeField(null=True, blank=True, help_text="When a check last saw a new mark.")
    sampled_at = models.DateTimeField(null=True, blank=True)
    checks = models.BigIntegerField(default=0)
    samples = models.BigIntegerField(default=0)
    skips = models.BigIntegerField(default=0)
    failures = models.BigIntegerField(default=0)
    check_seconds = models.FloatField(default=0.0, help_text="Total time spent in change checks.")
    sample_seconds = models.FloatField(default=0.0, help_text="Total time spent in full samples.")
    last_sample_seconds = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The latest sample's sort and filter keys, copied with the pointer: the list sorts and filters 10,000
    # of these narrow rows instead of joining 10,000 samples (each with its tide).
    lag_seconds = models.FloatField(null=True, blank=True)
    completion = models.DateTimeField(null=True, blank=True)
    log_files = models.IntegerField(null=True, blank=True)
    log_bytes = models.BigIntegerField(null=True, blank=True)
    slices = models.IntegerField(null=True, blank=True)
    late_records = models.BigIntegerField(null=True, blank=True)
    pending_compactions = models.IntegerField(null=True, blank=True)
    corrupt_log_blocks = models.IntegerField(null=True, blank=True)
    table_version = models.PositiveSmallIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.table_id}: checked {self.checked_at}, sampled {self.sampled_at}"


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
