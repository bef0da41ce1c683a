"""Template filters for the dashboard's units: bytes, durations, UTC times, run states."""
from __future__ import annotations

import datetime as dt

from django import template
from django.utils.html import format_html
from django.template import Context
from django.utils.safestring import SafeString, mark_safe

from webapp.tables.models import Run

register = template.Library()

# Badge classes of run states (and of audit outcomes and alert deliveries, which share the badge).
STATE_CLASS: dict[str, str] = {Run.State.QUEUED: "muted", Run.State.RUNNING: "info", Run.State.SUCCEEDED: "ok", Run.State.FAILED: "bad",
               Run.State.REFUSED: "warn", Run.State.CANCELLED: "muted",
               "pending": "muted", "retrying": "warn", "sent": "ok", "suppressed": "muted"}


@register.filter
def filesize(value: float | str | None) -> str:
    """1536 → "1.5 KiB", 1040179 → "0.99 MiB" (binary units; never four digits before the point)."""
    if value is None or value == "":
        return "—"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1000 or unit == "TiB":
            if unit == "B":
                return f"{size:.0f} B"
            return f"{size:.2f} {unit}" if abs(size) < 1 else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


@register.filter
def duration(seconds: float | str | None) -> str:
    """Seconds → "2 h 5 min" / "45 s" / "3 d 4 h"."""
    if seconds is None or seconds == "":
        return "—"
    s = int(round(float(seconds)))
    if s < 60:
        return f"{s} s"
    minutes, s = divmod(s, 60)
    if minutes < 60:
        return f"{minutes} min {s} s" if s and minutes < 10 else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def utc(value: dt.datetime | str | None) -> str:
    """A datetime as "2013-01-20 00:00:00 UTC"."""
    if not value:
        return "—"
    if isinstance(value, str):   # an ISO-8601 time from the engine's JSON: the one format of the pages too
        text = value
        try:
            value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return text
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def took(run: Run) -> str:
    """How long a run ran (or has been running)."""
    if not run.started_at:
        return "—"
    from django.utils import timezone

    end = run.finished_at or timezone.now()
    return duration((end - run.started_at).total_seconds())


@register.simple_tag
def state_badge(state: str | None, reason: str | None = None) -> SafeString:
    if not state:
        return mark_safe('<span class="badge muted">never run</span>')
    return format_html('<span class="badge {}" title="{}">{}</span>', STATE_CLASS.get(state, "muted"),
                       reason or "", state)


@register.simple_tag
def sla_badge(status: str) -> SafeString:
    label = {"ok": "within SLA", "breached": "SLA breached", "unknown": "lag unknown", "none": "no SLA"}[status]
    css = {"ok": "ok", "breached": "bad", "unknown": "muted", "none": "muted"}[status]
    return format_html('<span class="badge {}">{}</span>', css, label)


@register.simple_tag(takes_context=True)
def sort_link(context: Context, key: str, label: str) -> SafeString:
    """A column header linking to ?sort=key (toggling direction), keeping the other filters."""
    request = context["request"]
    current = context.get("sort", "name")
    params = request.GET.copy()
    new = f"-{key}" if current == key else key
    params["sort"] = new
    arrow = " ▲" if current == key else (" ▼" if current == f"-{key}" else "")
    return format_html('<a href="?{}" class="sort">{}{}</a>', params.urlencode(), label, arrow)


@register.filter
def duration_minutes(minutes: int | str | None) -> str:
    return "—" if minutes in (None, "") else duration(int(minutes) * 60)


# The one naming of run kinds, on every page and in the run JSON the table page's script renders.
KIND_LABELS: dict[str, str] = {Run.Kind.SCHEDULE: "plan only", Run.Kind.EXECUTE: "execute plan", Run.Kind.SCHEDULE_EXECUTE: "compaction",
               Run.Kind.CLEAN: "clean", Run.Kind.ROLLBACK: "rollback", Run.Kind.RECOVER: "recover",
               Run.Kind.METRICS: "metrics refresh",
               Run.Kind.VALIDATE: "validate plan", Run.Kind.UNSCHEDULE: "unschedule plan", Run.Kind.REPAIR: "repair plan"}


@register.filter
def kind_label(kind: str) -> str:
    """Run kinds in operators' words ("schedule_execute" is the one-click compaction)."""
    return KIND_LABELS.get(kind, kind)


@register.filter
def pairs(detail: object) -> str:
    """A JSON detail dict as "key=value key=value"."""
    if not isinstance(detail, dict):
        return "" if detail in (None, "") else str(detail)
    return " ".join(f"{k}={v}" for k, v in detail.items())


@register.filter
def is_list(value: object) -> bool:
    """Lists in a stored result (base files, carried logs) are folded in the page, not dumped inline."""
    return isinstance(value, (list, tuple))
