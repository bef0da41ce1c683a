"""Template filters for the dashboard's units: bytes, durations, UTC times, run states."""
from __future__ import annotations

import datetime as dt
import html
from collections.abc import Callable
from typing import Any

from django import template
from django.template import Context
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from engine import human
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
            value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def took(run: Run) -> str:
    """How long a run ran (or has been running)."""
    if not run.started_at:
        return "—"
    from django.utils import timezone

    end = run.finished_at or timezone.now()
    return duration((end - run.started_at).total_seconds())


@register.filter
def state_class(state: str | None) -> str:
    """The badge class of a run state (the one map, also sent in run JSON as `state_class`)."""
    return STATE_CLASS.get(state or "", "muted")


@register.simple_tag
def state_badge(state: str | None, reason: str | None = None) -> SafeString:
    if not state:
        return mark_safe('<span class="badge muted">never run</span>')
    return format_html('<span class="badge {}" title="{}">{}</span>', state_class(state), reason or "", state)


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
    """An audit detail as "key=value key=value", each value in words (engine.humanize); an empty one is left out."""
    if not isinstance(detail, dict):
        return "" if detail in (None, "") else human(detail)
    return " ".join(f"{k}={human(v)}" for k, v in detail.items() if human(v) != human(None))


@register.filter
def human_label(key: object) -> str:
    """A stored field's name in words (`log_files_compacted` → "log files compacted")."""
    return str(key).replace("_", " ")


@register.filter(name="human")
def human_filter(value: object) -> str:
    """Any stored value in words — never a Python repr (engine.humanize.human)."""
    return human(value)


@register.filter
def is_list(value: object) -> bool:
    """Lists in a stored result (base files, carried logs) are folded in the page, not dumped inline."""
    return isinstance(value, (list, tuple))


# ------------------------------------------------------------------------------------------ the tables list
# Written with plain f-strings and html.escape (the same escaping as Django's): a page of 100 rows through the
# per-row template, or through format_html, spent most of the request in the template engine.

HEALTH_CLASS = {"critical": "bad", "warning": "warn", "ok": "ok"}
SLA_BADGES = {"ok": ("ok", "within SLA"), "breached": ("bad", "SLA breached"), "unknown": ("muted", "lag unknown"),
              "none": ("muted", "no SLA")}
CORRUPT_TITLE = ("log blocks of committed writes that do not decode: their records are missing from every read, "
                 "and compaction refuses their logs")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _badge(css: str, text: object, title: object = None) -> str:
    attr = "" if title is None else f' title="{_e(title)}"'
    return f'<span class="badge {_e(css)}"{attr}>{_e(text)}</span>'


def _url_maker(name: str, placeholder: str) -> Callable[[object], str]:
    """reverse() once, then fill in the argument (slugs and ids need no quoting): 200 reverses a page cost more
    than the rest of its rows."""
    from django.urls import reverse

    head, _, tail = reverse(name, args=[placeholder]).rpartition(placeholder)
    return lambda arg: f"{head}{arg}{tail}"


def _completion_cell(t: dict[str, Any], s: dict[str, Any] | None) -> str:
    from django.contrib.humanize.templatetags.humanize import intcomma

    if not s:
        text = '<span class="muted">not sampled yet</span>'
    elif s["ro_completion_time"]:
        text = f'<span class="mono">{_e(utc(s["ro_completion_time"]))}</span>'
    else:
        text = '<span class="muted">nothing compacted yet</span>'
    if s and s["corrupt_log_blocks"]:
        corrupt = s["corrupt_log_blocks"]
        text += f"<div>{_badge('bad', f'corrupt blocks: {corrupt}', CORRUPT_TITLE)}</div>"
    if s and s["late_records"]:
        title = f"{s['late_records']} records arrived with event times before the completion time"
        late = intcomma(s["late_records"])
        text += f"<div>{_badge('warn', f'late data: {late}', title)}</div>"
    return f'<td data-completion="{_e(t["name"])}">{text}</td>'


def _table_row(row: Any, detail_url: Callable[[object], str], run_url: Callable[[object], str]) -> str:
    t, s, h = row.table, row.sample, row.health
    paused = (' <span class="badge warn" data-paused title="schedule and SLA auto-trigger paused">paused</span>'
              if t["paused"] else "")
    cells = [f'<td class="name"><a href="{_e(detail_url(t["name"]))}" class="strong">{_e(t["name"])}</a>'
             f'{version_badge(s["table_version"] if s else None)}{paused}<div class="sub path">{_e(t["path"])}</div></td>']
    sub = ""
    if h.reasons:
        more = f" (+{len(h.reasons) - 1})" if len(h.reasons) > 1 else ""
        sub = f'<div class="sub">{_e(h.reasons[0])}{more}</div>'
    cells.append(f'<td data-health="{_e(h.level)}">'
                 f'{_badge(HEALTH_CLASS.get(h.level, "muted"), h.level, "; ".join(h.reasons))}{sub}</td>')
    cells.append(_completion_cell(t, s))
    cells.append(f"<td>{_e(duration(s['freshness_lag_seconds'] if s else None))}</td>")
    cells.append(_last_write_cell(row.stale_seconds))
    sla_minutes = t["freshness_sla_minutes"]
    limit = f'<div class="sub">≤ {_e(duration_minutes(sla_minutes))}</div>' if sla_minutes else ""
    cells.append(f"<td data-sla>{_badge(*SLA_BADGES[row.sla])}{limit}</td>")

    def number(key: str) -> str:   # as `default_if_none:"—"` did: blank when never sampled
        return "" if not s else "—" if s[key] is None else _e(s[key])

    cells.append(f'<td class="num">{number("remaining_log_files")}</td>')
    cells.append(f'<td class="num opt">{_e(filesize(s["remaining_log_bytes"] if s else None))}</td>')
    cells.append(f'<td class="num opt">{number("file_slices_with_logs")}</td>')
    if s and s["pending_compactions"]:
        pending = _badge("info", f"{s['pending_compactions']} pending")
    else:
        pending = '<span class="muted">none</span>' if s else "—"
    cells.append(f"<td>{pending}</td>")
    cells.append(_last_compaction_cell(row.last_compaction, run_url))
    return "<tr>" + "".join(cells) + "</tr>"


def _last_write_cell(seconds: float | None) -> str:
    """How long since the last write, against the clock; marked from health's staleness bounds on."""
    from webapp.tables.health import STALE_AGE_S

    if seconds is None:
        return '<td data-last-write><span class="muted">—</span></td>'
    css = "bad" if seconds >= STALE_AGE_S[1] else "warn" if seconds >= STALE_AGE_S[0] else ""
    text = f"{_e(duration(seconds))} ago"
    return f'<td data-last-write>{_badge(css, text, "no write for this long: ingestion may have stopped") if css else text}</td>'


def _last_compaction_cell(run: dict[str, Any] | None, run_url: Callable[[object], str]) -> str:
    """The newest compaction run (a clean or a recover since does not hide it) with its state and end."""
    if not run:
        return '<td data-last-compaction><span class="badge muted">none yet</span></td>'
    state = _badge(STATE_CLASS.get(run["state"], "muted"), run["state"], run["refusal_reason"] or "")
    when = f'<div class="sub">{_e(utc(run["finished_at"]))}</div>' if run.get("finished_at") else ""
    return (f'<td data-last-compaction><a href="{_e(run_url(run["id"]))}">{_e(kind_label(run["kind"]))}</a> '
            f'{state}{when}</td>')


@register.simple_tag
def version_badge(version: int | str | None) -> SafeString:
    """The Hudi table version as the list and the table page show it ("v8"); nothing before the first sample
    (a template gives "" for the version of a missing sample)."""
    if not isinstance(version, int):
        return mark_safe("")
    return mark_safe(f' <span class="badge version" data-version="{version}" '
                     f'title="Hudi table version {version}">v{version}</span>')


@register.simple_tag
def table_rows(rows: list[dict[str, Any]]) -> str:
    """The body rows of the tables list: the markup the per-row template made, in Python."""
    detail_url, run_url = _url_maker("tables:detail", "name-placeholder"), _url_maker("tables:run", "0")
    return mark_safe("\n".join(_table_row(row, detail_url, run_url) for row in rows))
