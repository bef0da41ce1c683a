"""Keeps `SamplingState.latest_sample` pointing at each table's newest MetricSample, whoever saves one
(and the tide on that newest sample only).

Connected to MetricSample's post_save (webapp.tables.apps), so samples written by workers, by the demo
command or by tests all move the pointer; bulk inserts (the benchmark's synthetic history) call
`point_at_newest` once afterwards.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import OuterRef, Q, Subquery

from webapp.tables.models import MetricSample, RegisteredTable, SamplingState

# SamplingState field ← MetricSample field: the latest sample's sort and filter keys
KEYS = {"lag_seconds": "freshness_lag_seconds", "completion": "ro_completion_time", "log_files": "remaining_log_files",
        "log_bytes": "remaining_log_bytes", "slices": "file_slices_with_logs", "late_records": "late_records",
        "pending_compactions": "pending_compactions", "corrupt_log_blocks": "corrupt_log_blocks",
        "table_version": "table_version"}


def keys_of(sample: MetricSample) -> dict[str, Any]:
    return {key: getattr(sample, field) for key, field in KEYS.items()}


def on_table_saved(sender: type[RegisteredTable], instance: RegisteredTable, created: bool, **_: object) -> None:
    """Every registered table has its SamplingState row from the start (never sampled, never checked)."""
    if created:
        SamplingState.objects.get_or_create(table_id=instance.pk)


def on_sample_saved(sender: type[MetricSample], instance: MetricSample, created: bool, **_: object) -> None:
    if created:
        point_at(instance)


def point_at(sample: MetricSample) -> None:
    """Make `sample` its table's latest unless a newer one is already there.

    The sample it replaces loses its tide: only the latest tide is ever shown, and a tide (one bucket per
    event-time hour of backlog) is most of a sample's bytes, so history keeps the numbers only.
    """
    newer_or_none = Q(latest_sample__isnull=True) | Q(latest_sample__taken_at__lte=sample.taken_at)
    replaced = (SamplingState.objects.filter(table_id=sample.table_id)
                .values_list("latest_sample_id", flat=True).first())
    moved = (SamplingState.objects.filter(newer_or_none, table_id=sample.table_id)
             .update(latest_sample=sample, sampled_at=sample.taken_at, **keys_of(sample)))
    if moved and replaced and replaced != sample.pk:
        MetricSample.objects.filter(pk=replaced).exclude(tide=[]).update(tide=[])
        MetricSample.objects.filter(pk=replaced).exclude(backlog_heatmap={}).update(backlog_heatmap={})
    if not moved:
        SamplingState.objects.get_or_create(table_id=sample.table_id, defaults={
            "latest_sample": sample, "sampled_at": sample.taken_at, **keys_of(sample)})


def point_at_newest(table_ids: Iterable[int] | None = None) -> int:
    """Re-point the given tables (all when None) at their newest stored sample; returns rows updated."""
    newest = MetricSample.objects.filter(table=OuterRef("table_id")).order_by("-taken_at", "-id")
    states = SamplingState.objects.all()
    if table_ids is not None:
        states = states.filter(table_id__in=list(table_ids))
    return states.update(latest_sample=Subquery(newest.values("id")[:1]),
                         sampled_at=Subquery(newest.values("taken_at")[:1]),
                         **{key: Subquery(newest.values(field)[:1]) for key, field in KEYS.items()})
