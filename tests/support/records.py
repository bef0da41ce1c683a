"""Rows the control-plane tests create: users in a role group (one known password) and metric samples."""
from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import Group, User

from webapp.tables.models import MetricSample, RegisteredTable

PASSWORD = "tidemark-test-pw"
T0 = dt.datetime(2013, 1, 20, tzinfo=dt.UTC)


def make_user(username: str, group: str) -> User:
    user = User.objects.create_user(username, password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def sample(table: RegisteredTable, taken_at: dt.datetime, *, completion: dt.datetime | None, lag_s: float | None,
           files: int = 0, log_bytes: int = 0, slices: int = 0, pending: int = 0, late: int = 0,
           corrupt: int = 0, tide: list | None = None) -> MetricSample:
    breached = table.freshness_sla_minutes is not None and lag_s is not None and lag_s > table.freshness_sla_minutes * 60
    return MetricSample.objects.create(
        table=table, taken_at=taken_at, ro_completion_time=completion, ro_freshness_time=completion,
        freshness_lag_seconds=lag_s, remaining_log_files=files, remaining_log_bytes=log_bytes,
        file_slices_with_logs=slices, pending_compactions=pending, late_records=late, corrupt_log_blocks=corrupt,
        sla_breached=breached,
        tide=tide or [])
