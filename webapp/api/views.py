"""The JSON API (documented in openapi.yaml, served at /api/schema)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec

from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils import timezone

from webapp.alerts import channels
from webapp.alerts.channels import channel_dict
from webapp.alerts.models import AlertChannel
from webapp.api import request_schema
from webapp.api.auth import api_view, error
from webapp.errors import NotFound
from webapp.tables import activity, inputs, listing, plans, services
from webapp.tables.filters import filter_runs
from webapp.tables.models import MetricSample, RegisteredTable, Run
from webapp.tables.overview import statuses
from webapp.tables.status import run_dict, table_dict

P = ParamSpec("P")

SCHEMA = request_schema.DOCUMENT
RUNS_LIMIT = 20         # a page of the runs list: summaries, newest first
TABLES_LIMIT = 100      # a keyset page of the tables list (webapp.tables.listing)
TABLES_MAX = 1000


def _table(name: str) -> RegisteredTable:
    table = RegisteredTable.objects.filter(name=name).first()
    if table is None:
        raise NotFound(f"no table named {name!r} is registered")
    return table


def _run(run_id: int) -> Run:
    run = Run.objects.select_related("table", "requested_by").filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"no run {run_id}")
    return run


def _channel(channel_id: int) -> AlertChannel:
    channel = AlertChannel.objects.filter(pk=channel_id).first()
    if channel is None:
        raise NotFound(f"no alert channel {channel_id}")
    return channel


def _bad_input(handler: Callable[P, HttpResponse]) -> Callable[P, HttpResponse]:
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        try:
            return handler(*args, **kwargs)
        except services.Conflict as exc:
            return error(409, str(exc))
        except inputs.InvalidInput as exc:
            return error(400, str(exc), **({"needs": exc.needs} if exc.needs else {}))
    wrapped.__name__ = handler.__name__
    wrapped.__doc__ = handler.__doc__
    return wrapped


def _accepted(run: Run) -> JsonResponse:
    return JsonResponse({"id": run.pk, "state": run.state, "url": run_dict(run)["url"]}, status=202)


@_bad_input
def list_tables(request: HttpRequest) -> JsonResponse:
    """One keyset page (?limit= ≤ 1000, default 100; ?after= / ?before= cursors from `next` / `previous`),
    filtered by ?q= and ?status=, sorted by ?sort= (webapp.tables.listing); `count` counts every match."""
    limit = inputs.bounded_int(request.GET.get("limit"), "limit", maximum=TABLES_MAX, unit="tables") or TABLES_LIMIT
    page = listing.page(request.GET, limit)
    prefix = reverse("api:tables")
    rows = [table_dict(s, prefix) for s in page.rows]
    return JsonResponse({"count": listing.select(request.GET).count(), "tables": rows,
                         "next": _page_url(request, prefix, "after", page.next_cursor),
                         "previous": _page_url(request, prefix, "before", page.prev_cursor)})


def _page_url(request: HttpRequest, prefix: str, name: str, cursor: str | None) -> str | None:
    if cursor is None:
        return None
    params = request.GET.copy()
    params.pop("after", None)
    params.pop("before", None)
    params[name] = cursor
    return f"{prefix}?{params.urlencode()}"


@_bad_input
def create_table(request: HttpRequest, body: dict[str, Any]) -> JsonResponse:
    table = services.register_table(request.user, body)
    return JsonResponse(table_dict(statuses(RegisteredTable.objects.filter(pk=table.pk))[0]), status=201)


def get_table(request: HttpRequest, name: str) -> JsonResponse:
    table = _table(name)
    body = table_dict(statuses(RegisteredTable.objects.filter(pk=table.pk))[0])
    active = table.runs.filter(state__in=(Run.State.QUEUED, Run.State.RUNNING)).order_by("queued_at").first()
    body["active_run"] = run_dict(active) if active else None
    compactions = plans.read(table)
    body["pending_plan"] = compactions.pending.to_dict() if compactions.pending else None
    body["timeline_error"] = compactions.error or None
    body["activity"] = activity.as_json(MetricSample.objects.filter(sampling_latest__table=table).first(),
                                        timezone.now())
    return JsonResponse(body)


@_bad_input
def trigger(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
    table = _table(name)
    execute = body.get("execute", True) is not False   # a boolean: the document's schema checked it
    args = services.trigger_args(table, {k: v for k, v in body.items() if k != "execute"})
    return _accepted(services.trigger_compaction(table, request.user, args, execute=execute))


@_bad_input
def execute(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
    table = _table(name)
    instant = inputs.parse_instant(body.get("instant"))
    return _accepted(services.request_run(table, Run.Kind.EXECUTE, request.user, instant=instant))


@_bad_input
def preview(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
    from engine import TidemarkError

    table = _table(name)
    args = services.trigger_args(table, body)
    try:
        return JsonResponse(services.preview(table, request.user, args))
    except (TidemarkError, ValueError) as exc:
        return error(400, f"cannot plan {table.name}: {exc}", reason=getattr(exc, "reason", None),
                     blocking_instant=getattr(exc, "blocking_instant", None))


def clean(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
    table = _table(name)
    return _accepted(services.request_run(table, Run.Kind.CLEAN, request.user))


@_bad_input
def rollback(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
    table = _table(name)
    instant = inputs.parse_instant(body.get("instant"))
    return _accepted(services.request_run(table, Run.Kind.ROLLBACK, request.user, instant=instant))


def _plan_admin(kind: str) -> Callable[..., HttpResponse]:
    @_bad_input
    def view(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
        table = _table(name)
        return _accepted(services.administer_plan(table, request.user, kind, body))
    view.__name__ = f"{kind}_plan"
    return view


def recover(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
    table = _table(name)
    return _accepted(services.request_run(table, Run.Kind.RECOVER, request.user))


@_bad_input
def list_runs(request: HttpRequest) -> JsonResponse:
    """One page of runs, newest first, as summaries (a run's plan and result are at its own URL)."""
    runs = filter_runs(Run.objects.select_related("table", "requested_by"), request.GET)
    limit = inputs.bounded_int(request.GET.get("limit"), "limit", maximum=inputs.MAX_LIMIT, unit="runs") or RUNS_LIMIT
    page = inputs.bounded_int(request.GET.get("page"), "page", maximum=10**9, unit="pages") or 1
    total = runs.count()
    rows = [run_dict(r, summary=True) for r in runs[(page - 1) * limit:page * limit]]
    more = page * limit < total
    query = request.GET.copy()
    query["page"] = str(page + 1)
    return JsonResponse({"count": total, "page": page, "limit": limit, "runs": rows,
                         "next": f"{request.path}?{query.urlencode()}" if more else None})


def get_run(request: HttpRequest, run_id: int) -> JsonResponse:
    run = _run(run_id)
    return JsonResponse(run_dict(run))


def schema(request: HttpRequest) -> HttpResponse | FileResponse:
    """The OpenAPI document: YAML, or JSON for `?format=json` or `Accept: application/json`."""
    wants_json = request.GET.get("format") == "json" or \
        "application/json" in request.headers.get("Accept", "") and "yaml" not in request.headers.get("Accept", "")
    if wants_json:
        return JsonResponse(request_schema.document())
    return FileResponse(SCHEMA.open("rb"), content_type="application/yaml")


@_bad_input
def list_alert_channels(request: HttpRequest) -> JsonResponse:
    rows = [channel_dict(c) for c in AlertChannel.objects.all()]
    return JsonResponse({"count": len(rows), "channels": rows})


@_bad_input
def create_alert_channel(request: HttpRequest, body: dict[str, Any]) -> JsonResponse:
    return JsonResponse(channel_dict(channels.create_channel(request.user, body)), status=201)


def get_alert_channel(request: HttpRequest, channel_id: int) -> JsonResponse:
    """The channel with its latest deliveries (status, attempts, response code)."""
    return JsonResponse(channel_dict(_channel(channel_id), deliveries=100))


def delete_alert_channel(request: HttpRequest, channel_id: int, body: dict[str, Any]) -> HttpResponse:
    channels.delete_channel(request.user, _channel(channel_id))
    return HttpResponse(status=204)


@_bad_input
def cancel_run(request: HttpRequest, run_id: int, body: dict[str, Any]) -> JsonResponse:
    run = services.cancel_run(request.user, _run(run_id))
    return JsonResponse({"id": run.pk, "state": run.state, "cancel_requested": run.cancel_requested,
                         "url": run_dict(run)["url"]}, status=202)


@_bad_input
def edit_table(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
    table = services.update_settings(request.user, _table(name), body)
    return JsonResponse(table_dict(statuses(RegisteredTable.objects.filter(pk=table.pk))[0]))


@_bad_input
def delete_table(request: HttpRequest, name: str, body: dict[str, Any]) -> HttpResponse:
    services.unregister(request.user, _table(name))
    return HttpResponse(status=204)


def _pause(paused: bool) -> Callable[..., JsonResponse]:
    def view(request: HttpRequest, name: str, body: dict[str, Any]) -> JsonResponse:
        table = services.set_paused(request.user, _table(name), paused)
        return JsonResponse(table_dict(statuses(RegisteredTable.objects.filter(pk=table.pk))[0]))
    return view


tables = api_view({"GET": list_tables, "POST": create_table}, "/api/tables")
table = api_view({"GET": get_table, "PATCH": edit_table, "DELETE": delete_table}, "/api/tables/{name}")
pause_view = api_view({"POST": _pause(True)}, "/api/tables/{name}/pause")
resume_view = api_view({"POST": _pause(False)}, "/api/tables/{name}/resume")
cancel_view = api_view({"POST": cancel_run}, "/api/runs/{id}/cancel")
compactions = api_view({"POST": trigger}, "/api/tables/{name}/compactions")
execute_view = api_view({"POST": execute}, "/api/tables/{name}/execute")
preview_view = api_view({"POST": preview}, "/api/tables/{name}/preview")
clean_view = api_view({"POST": clean}, "/api/tables/{name}/clean")
rollback_view = api_view({"POST": rollback}, "/api/tables/{name}/rollback")
recover_view = api_view({"POST": recover}, "/api/tables/{name}/recover")
validate_view = api_view({"POST": _plan_admin(Run.Kind.VALIDATE)}, "/api/tables/{name}/validate")
unschedule_view = api_view({"POST": _plan_admin(Run.Kind.UNSCHEDULE)}, "/api/tables/{name}/unschedule")
repair_view = api_view({"POST": _plan_admin(Run.Kind.REPAIR)}, "/api/tables/{name}/repair")
runs = api_view({"GET": list_runs}, "/api/runs")
run = api_view({"GET": get_run}, "/api/runs/{id}")
schema_view = api_view({"GET": schema}, "/api/schema")
alert_channels = api_view({"GET": list_alert_channels, "POST": create_alert_channel}, "/api/alert-channels")
alert_channel = api_view({"GET": get_alert_channel, "DELETE": delete_alert_channel}, "/api/alert-channels/{id}")
