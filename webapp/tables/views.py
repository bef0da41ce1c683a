"""Server-rendered pages: tables list, table page, run (plan audit) page, runs history, audit log."""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from engine import is_object_store
from webapp.accounts.decorators import operator_action
from webapp.tables import access, activity, health, heatmap, history, inputs, listing, overview, plans, services
from webapp.tables import discovery as table_discovery
from webapp.tables.filters import filter_runs, filter_tables
from webapp.tables.models import AuditEvent, MetricSample, RegisteredTable, Run
from webapp.tables.status import iso, progress_view

COMPACTION_MARKERS = 500   # newest completed compactions marked on the charts
PAGE_SIZE = 50
LIST_PAGE_SIZE = 100


@login_required
def table_list(request: HttpRequest) -> HttpResponse:
    return _list_page(request)


def _list_page(request: HttpRequest, form: dict[str, Any] | None = None,
               form_error: inputs.InvalidInput | None = None) -> HttpResponse:
    """One page of tables (webapp.tables.listing: filtered, sorted — "health" is worst first — and
    keyset-paginated in the database); after a refused registration, again with the register form open on
    what the user typed."""
    try:
        page = listing.page(request.GET, LIST_PAGE_SIZE)
    except inputs.InvalidInput as exc:
        messages.error(request, str(exc))
        page = listing.page({}, LIST_PAGE_SIZE)
    summary = listing.summary(filter_tables(RegisteredTable.objects.all(), request.GET))
    return render(request, "tables/list.html", {"page": page.rows, "sort": page.sort, "q": request.GET.get("q", ""),
                                                "status": page.status, "summary": summary,
                                                "version": request.GET.get("version", ""),
                                                "versions": listing.table_versions(),
                                                "next_query": _cursor_query(request, "after", page.next_cursor),
                                                "prev_query": _cursor_query(request, "before", page.prev_cursor),
                                                "form": form or {}, "form_error": form_error},
                  status=400 if form_error else 200)


def _cursor_query(request: HttpRequest, name: str, cursor: str | None) -> str | None:
    if cursor is None:
        return None
    params = request.GET.copy()
    for key in ("after", "before", "page"):
        params.pop(key, None)
    params[name] = cursor
    return params.urlencode()


@login_required
def table_detail(request: HttpRequest, name: str) -> HttpResponse:
    return _detail_page(request, get_object_or_404(RegisteredTable, name=name))


def _detail_page(request: HttpRequest, table: RegisteredTable, form: dict[str, Any] | None = None,
                 form_error: inputs.InvalidInput | None = None) -> HttpResponse:
    """The table page; after a refused trigger form, again with what the user typed and the one error."""
    sample = MetricSample.objects.filter(sampling_latest__table=table).first()
    asked = request.GET.get("range")
    window = asked if asked is not None and asked in history.RANGES else history.DEFAULT_RANGE
    series = history.chart_series(table, window, newest=sample.taken_at if sample else None)
    runs = list(table.runs.select_related("requested_by").exclude(kind=Run.Kind.METRICS)[:15])
    active = _watched_run(request, table)
    compactions = plans.read(table)   # the timeline's pending plan, read once for the whole page
    pending = compactions.pending
    admin_runs = list(table.runs.filter(kind__in=services.PLAN_ADMIN, instant=pending.instant)
                      .order_by("-queued_at", "-id")[:3]) if pending else []
    panels = activity.panels(sample, timezone.now())
    since_write = panels["ingestion"]["lag_seconds"] if panels else None
    return render(request, "tables/detail.html", {
        "activity": panels, "clean": activity.retention_of(sample),
        "stale": {"level": health.staleness(since_write), "seconds": since_write},
        "policies": activity.POLICIES,
        "admin_runs": admin_runs, "compactions": compactions, "kinds": Run.Kind,
        "heatmap": heatmap.layout(sample.backlog_heatmap) if sample else None,
        "table": table, "sample": sample, "runs": runs,
        "progress": progress_view(active) if active else None,
        "sla": overview.sla_status(table.freshness_sla_minutes,
                                   {"freshness_lag_seconds": sample.freshness_lag_seconds} if sample else None), "active": active,
        "chart": {"series": series, "sla_seconds": (table.freshness_sla_minutes or 0) * 60 or None,
                  "compactions": _compaction_markers(table), "rollbacks": _rollback_markers(table),
                  "trends": history.compaction_trends(table),
                  "tide": sample.tide if sample else [],
                  "completion": iso(sample.ro_completion_time) if sample else None},
        "pending": pending, "rollback_instant": compactions.rollback_candidate,
        "range": window, "ranges": list(history.RANGES),
        "catalog": _catalog(sample),
        "form": form or {}, "form_error": form_error, "threshold_hint": threshold_hint(sample, timezone.now()),
        "links": not is_object_store(table.path),   # an object store has no links: no symlink carry-over offered
    }, status=400 if form_error else 200)


def threshold_hint(sample: MetricSample | None, now: dt.datetime) -> str:
    """The threshold field's example, this table's own: the start of its newest event-time bucket with logs (what
    a compaction up to it would fold), else today's midnight UTC — never another table's date."""
    starts = [b.get("start") for b in (sample.tide if sample and sample.tide else []) if b.get("start")]
    if starts:
        return str(max(starts)).replace(".000Z", "Z")
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT00:00:00Z")


def _catalog(sample: MetricSample | None) -> dict[str, Any] | None:
    """The sampled catalog status with its times parsed; None when the table syncs nowhere."""
    status = dict(sample.catalog or {}) if sample else {}
    if not status.get("enabled") and not status.get("synced_at"):
        return None
    for key in ("synced_at", "last_ok_at"):
        value = status.get(key)
        status[key] = dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    return status


TIMELINE_ACTIONS = ("deltacommit", "commit", "compaction", "replacecommit", "clean", "rollback")
TIMELINE_STATES = ("requested", "inflight", "completed")


@login_required
def timeline(request: HttpRequest, name: str) -> HttpResponse:
    """Every instant of the table's active timeline (newest first) with its files and records, filtered by
    action and state; compactions link to the runs that planned or executed them."""
    from engine import TidemarkError

    table = get_object_or_404(RegisteredTable, name=name)
    try:
        instants = [i.to_dict() for i in reversed(access.open_registered(table).timeline_details())]
        error = ""
    except (TidemarkError, inputs.InvalidInput) as exc:   # unreadable, or its folder resolves outside the roots
        instants, error = [], str(exc)
    total = len(instants)
    action, state = request.GET.get("action", ""), request.GET.get("state", "")
    if action:
        instants = [i for i in instants if i["action"] == action]
    if state:
        instants = [i for i in instants if i["state"] == state]
    runs = dict(table.runs.exclude(instant="").exclude(kind=Run.Kind.ROLLBACK).order_by("queued_at")
                .values_list("instant", "pk"))
    for instant in instants:
        instant["run"] = runs.get(instant["instant"])
    page = Paginator(instants, PAGE_SIZE * 2).get_page(request.GET.get("page"))
    return render(request, "tables/timeline.html", {
        "table": table, "page": page, "total": total, "error": error, "action": action, "state": state,
        "actions": TIMELINE_ACTIONS, "states": TIMELINE_STATES, "query": _query_without_page(request)})


def _compaction_markers(table: RegisteredTable) -> list[dict[str, Any]]:
    """When each completed compaction finished (for markers on the backlog and freshness charts)."""
    done = (table.runs.filter(kind__in=(Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE), state=Run.State.SUCCEEDED)
            .exclude(instant="").order_by("-finished_at")[:COMPACTION_MARKERS])
    return [{"t": iso(r.finished_at), "instant": r.instant, "run": r.pk} for r in done if r.finished_at]


def _rollback_markers(table: RegisteredTable) -> list[dict[str, Any]]:
    """When each rollback finished (vertical markers on the backlog and freshness charts: the backlog jumps
    back up and "complete up to" moves back there)."""
    done = (table.runs.filter(kind=Run.Kind.ROLLBACK, state=Run.State.SUCCEEDED, finished_at__isnull=False)
            .order_by("-finished_at")[:COMPACTION_MARKERS])
    return [{"t": iso(r.finished_at), "instant": r.instant, "run": r.pk} for r in done]


def _watched_run(request: HttpRequest, table: RegisteredTable) -> Run | None:
    """The run whose progress the page follows: the one just requested (?run=) or just finished (?done=,
    after the page reloaded to show its new sample), else one in flight."""
    requested = request.GET.get("run") or request.GET.get("done") or ""
    if requested.isdigit():
        run = table.runs.filter(pk=int(requested)).first()
        if run is not None:
            return run
    return (table.runs.filter(state__in=(Run.State.QUEUED, Run.State.RUNNING)).exclude(kind=Run.Kind.METRICS)
            .order_by("queued_at").first())


def _after_action(request: HttpRequest, table: RegisteredTable, run: Run, what: str) -> HttpResponse:
    messages.success(request, f"{what} queued as run #{run.pk}.")
    return redirect(reverse("tables:detail", args=[table.name]) + f"?run={run.pk}")


def _invalid(request: HttpRequest, table: RegisteredTable, exc: Exception) -> HttpResponse:
    messages.error(request, str(exc))
    return redirect("tables:detail", table.name)


@operator_action
def trigger(request: HttpRequest, name: str) -> HttpResponse:
    table = get_object_or_404(RegisteredTable, name=name)
    execute = request.POST.get("mode", "execute") != "schedule"
    try:
        args = services.trigger_args(table, request.POST.dict())
        run = services.trigger_compaction(table, request.user, args, execute=execute)
    except inputs.InvalidInput as exc:   # a Conflict too: another compaction run of the table is queued
        return _detail_page(request, table, form=request.POST.dict(), form_error=exc)
    return _after_action(request, table, run, "Compaction" if execute else "Compaction plan")


def _instant_action(request: HttpRequest, name: str, kind: str, what: str) -> HttpResponse:
    """Queue a run about one instant (execute, rollback) named by the form's `instant` field."""
    table = get_object_or_404(RegisteredTable, name=name)
    try:
        instant = inputs.parse_instant(request.POST.get("instant"))
        run = services.request_run(table, kind, request.user, instant=instant)
    except inputs.InvalidInput as exc:   # a Conflict too: another compaction run of the table is queued
        return _invalid(request, table, exc)
    return _after_action(request, table, run, f"{what} of {instant}")


@operator_action
def execute(request: HttpRequest, name: str) -> HttpResponse:
    return _instant_action(request, name, Run.Kind.EXECUTE, "Execution")


def _table_action(request: HttpRequest, name: str, kind: str, what: str) -> HttpResponse:
    """Queue a run that takes no arguments (clean, recover, metrics refresh)."""
    table = get_object_or_404(RegisteredTable, name=name)
    return _after_action(request, table, services.request_run(table, kind, request.user), what)


def _previewed_action(request: HttpRequest, name: str, kind: str, what: str) -> HttpResponse:
    """Clean and recover change files: the form first asks for the engine's dry run (`preview`), shown with a
    confirm button that posts again without it and queues the real run."""
    table = get_object_or_404(RegisteredTable, name=name)
    if not request.POST.get("preview"):
        return _table_action(request, name, kind, what)
    try:
        result = services.preview_maintenance(table, request.user, kind)
    except inputs.InvalidInput as exc:
        return _invalid(request, table, exc)
    return render(request, "tables/maintenance_preview.html", {"table": table, "kind": kind, "what": what,
                                                               "result": result, "kinds": Run.Kind})


@operator_action
def clean(request: HttpRequest, name: str) -> HttpResponse:
    return _previewed_action(request, name, Run.Kind.CLEAN, "Clean")


@operator_action
def rollback(request: HttpRequest, name: str) -> HttpResponse:
    return _instant_action(request, name, Run.Kind.ROLLBACK, "Rollback")


def _plan_admin(kind: str, what: str) -> Callable[[HttpRequest, str], HttpResponse]:
    @operator_action
    def view(request: HttpRequest, name: str) -> HttpResponse:
        table = get_object_or_404(RegisteredTable, name=name)
        try:
            run = services.administer_plan(table, request.user, kind, request.POST.dict())
        except inputs.InvalidInput as exc:
            return _invalid(request, table, exc)
        dry = " (dry run)" if run.dry_run else ""
        return _after_action(request, table, run, f"{what} of plan {run.instant}{dry}")
    view.__name__ = f"{kind}_plan"
    return view


validate_plan = _plan_admin(Run.Kind.VALIDATE, "Validation")
unschedule_plan = _plan_admin(Run.Kind.UNSCHEDULE, "Unschedule")
repair_plan = _plan_admin(Run.Kind.REPAIR, "Repair")


@operator_action
def recover(request: HttpRequest, name: str) -> HttpResponse:
    return _previewed_action(request, name, Run.Kind.RECOVER, "Recover")


@operator_action
def refresh(request: HttpRequest, name: str) -> HttpResponse:
    return _table_action(request, name, Run.Kind.METRICS, "Metrics refresh")


@operator_action
def cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("table"), pk=run_id)
    try:
        run = services.cancel_run(request.user, run)
    except inputs.InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run #{run.pk} cancelled." if run.state == Run.State.CANCELLED else
                         f"Run #{run.pk} will stop at its next file-group boundary; its plan is then rolled back.")
    return redirect(request.POST.get("next") or reverse("tables:run", args=[run.pk]))


def _pause(paused: bool) -> Callable[[HttpRequest, str], HttpResponse]:
    @operator_action
    def view(request: HttpRequest, name: str) -> HttpResponse:
        table = services.set_paused(request.user, get_object_or_404(RegisteredTable, name=name), paused)
        messages.success(request, f"{table.name}: schedule and SLA auto-trigger {'paused' if paused else 'resumed'}.")
        return redirect("tables:detail", table.name)
    return view


pause = _pause(True)
resume = _pause(False)


@operator_action
def edit_settings(request: HttpRequest, name: str) -> HttpResponse:
    table = get_object_or_404(RegisteredTable, name=name)
    data = {field: request.POST.get(field, "") for field in inputs.TableSettings.FIELDS}
    data["exact"] = "true" if request.POST.get("exact") else "false"
    data.update({field: request.POST[field] for field in services.CLEAN_FIELDS if field in request.POST})
    try:
        services.update_settings(request.user, table, data)
    except inputs.InvalidInput as exc:
        return _detail_page(request, table, form={"settings": data}, form_error=exc)
    messages.success(request, f"Settings of {table.name} saved.")
    return redirect("tables:detail", table.name)


@operator_action
def unregister(request: HttpRequest, name: str) -> HttpResponse:
    table = get_object_or_404(RegisteredTable, name=name)
    try:
        services.unregister(request.user, table)
    except inputs.InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect("tables:detail", table.name)
    messages.success(request, f"Unregistered {name}; the table on storage is untouched.")
    return redirect("tables:list")


@operator_action
def register(request: HttpRequest) -> HttpResponse:
    try:
        table = services.register_table(request.user, request.POST.dict())
    except inputs.InvalidInput as exc:
        return _list_page(request, form=request.POST.dict(), form_error=exc)
    messages.success(request, f"Registered {table.name}; its first metrics sample is on the way.")
    return redirect("tables:detail", table.name)


@operator_action
def discover(request: HttpRequest) -> HttpResponse:
    """Register every table under a root (or, with "dry run", show what would be registered)."""
    try:
        report = table_discovery.discover(
            request.user, request.POST.get("root"), dry_run=bool(request.POST.get("dry_run")),
            prefix=(request.POST.get("prefix") or "").strip(), defaults=table_discovery.Defaults.parse(request.POST.dict()))
    except inputs.InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect("tables:list")
    return render(request, "tables/discover.html", {"report": report, "summary": report.summary(),
                                                    "form": request.POST})


@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("table", "requested_by"), pk=run_id)
    plan = run.plan or {}
    operations = plan.get("operations") or []
    result = run.result or {}
    plan_admin = run.kind in services.PLAN_ADMIN
    return render(request, "tables/run.html", {
        "run": run, "plan": plan, "operations": operations, "result": result,
        "states": Run.State, "kinds": Run.Kind,   # the template compares with these, not with string literals
        "is_compaction": run.kind in (Run.Kind.SCHEDULE, Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE),
        "plan_admin": plan_admin,
        "validation": (result if run.kind == Run.Kind.VALIDATE else result.get("validation")) if plan_admin else None,
        "renames": result.get("renames") if plan_admin else None,
        "partitions": services.partition_summary(plan),
        "settings_used": sorted((plan.get("settings_used") or {}).items()),
        "events": run.audit_events.select_related("user").order_by("at"),
    })


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    try:
        runs = filter_runs(Run.objects.select_related("table", "requested_by"), request.GET)
    except inputs.InvalidInput as exc:
        messages.error(request, str(exc))
        runs = Run.objects.select_related("table", "requested_by")
    if not request.GET.get("kind"):
        runs = runs.exclude(kind=Run.Kind.METRICS)
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "tables/runs.html", {
        "page": page, "params": request.GET, "query": _query_without_page(request),
        "tables": RegisteredTable.objects.values_list("name", flat=True),
        "users": Run.objects.exclude(requested_by=None).values_list("requested_by__username", flat=True)
        .distinct().order_by("requested_by__username"),
        "states": Run.State.values, "kinds": Run.Kind.values})


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    events = AuditEvent.objects.select_related("table", "run", "user")
    for field, lookup in (("table", "table__name"), ("actor", "actor"), ("action", "action__startswith"),
                          ("outcome", "outcome")):
        if request.GET.get(field):
            events = events.filter(**{lookup: request.GET[field]})
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "tables/audit.html", {"page": page, "params": request.GET,
                                                 "query": _query_without_page(request)})


def _query_without_page(request: HttpRequest) -> str:
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()
