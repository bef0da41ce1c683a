"""Query-string filters shared by the pages and the API (the same ?table=&user=… everywhere)."""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from django.db.models import Q, QuerySet

from webapp.tables import inputs
from webapp.tables.models import RegisteredTable, Run


def filter_tables(tables: QuerySet[RegisteredTable], params: Mapping[str, str]) -> QuerySet[RegisteredTable]:
    """?q= matches name or path."""
    q = (params.get("q") or "").strip()
    if q:
        tables = tables.filter(Q(name__icontains=q) | Q(path__icontains=q))
    return tables


def filter_runs(runs: QuerySet[Run], params: Mapping[str, str]) -> QuerySet[Run]:
    """?table=name &user=username ("system" = beat) &state= &kind= &since= &until= (ISO dates)."""
    if params.get("table"):
        runs = runs.filter(table__name=params["table"])
    user = params.get("user")
    if user == "system":
        runs = runs.filter(requested_by__isnull=True)
    elif user:
        runs = runs.filter(requested_by__username=user)
    if params.get("state"):
        runs = runs.filter(state=params["state"])
    if params.get("kind"):
        runs = runs.filter(kind=params["kind"])
    if params.get("since"):
        runs = runs.filter(queued_at__gte=_day(params["since"], "since"))
    if params.get("until"):
        runs = runs.filter(queued_at__lt=_day(params["until"], "until", end=True))
    return runs


def _day(raw: str, name: str, end: bool = False) -> dt.datetime | None:
    """A date (whole day; `until` includes it) or a date-time."""
    try:
        day = dt.date.fromisoformat(raw)
    except ValueError:
        try:
            return inputs.parse_threshold(raw)
        except inputs.InvalidInput:
            raise inputs.InvalidInput(f"{name} must be a date (2026-01-31) or ISO date-time, got {raw!r}") from None
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    return start + dt.timedelta(days=1) if end else start
