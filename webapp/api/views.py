"""The JSON API (documented in openapi.yaml, served at /api/schema)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec

import yaml
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone

from webapp.alerts import channels
from webapp.alerts.channels import channel_dict
from webapp.alerts.models import AlertChannel
from webapp.api.auth import api_view, error
from webapp.tables import activity, inputs, listing, plans, services
from webapp.tables.filters import filter_runs
from webapp.tables.models import MetricSample, RegisteredTable, Run
from webapp.tables.overview import statuses
from webapp.tables.status import run_dict, table_dict

P = ParamSpec("P")

SCHEMA = Path(__file__).with_name("openapi.yaml")
RUNS_LIMIT = 20         # a page of the runs list: summaries, newest first
TABLES_LIMIT = 100      # a keyset page of the tables list (webapp.tables.listing)
TABLES_MAX = 1000


def _body(request: HttpRequest) -> dict[str, Any]:
    if not request.body:
        return {}
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise inputs.InvalidInput(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise inputs.InvalidInput("request body must be a JSON object")
    return data


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
def create_table(request: HttpRequest) -> JsonResponse:
    table = services.register_table(request.user, _body(request))
    return JsonResponse(table_dict(statuses(RegisteredTable.objects.filter(pk=table.pk))[0]), status=201)


def get_table(request: HttpRequest, name: str) -> JsonResponse:
    table = get_object_or_404(RegisteredTable, name=name)
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
def trigger(request: HttpRequest, name: str) -> JsonResponse:
    table = get_object_or_404(RegisteredTable, name=name)
    body = _body(request)
    execute = inputs.parse_exact(body.get("execute", True)) is not False  # same boolean rules as "exact"
    args = services.trigger_args(table, {k: v for k, v in body.items() if k != "execute"})
    return _accepted(services.trigger_compaction(table, request.user, args, execute=execute))


@_bad_input
def execute(request: HttpRequest, name: str) -> JsonResponse:
    table = get_object_or_404(RegisteredTable, name=name)
    instant = inputs.parse_instant(_body(request).get("instant"))
    return _accepted(services.request_run(table, Run.Kind.EXECUTE, request.user, instant=instant))


@_bad_input
def preview(request: HttpRequest, name: str) -> JsonResponse:
    from engine import TidemarkError

    table = get_object_or_404(RegisteredTable, name=name)
    args = services.trigger_args(table, _body(request))
    try:
        return JsonResponse(services.preview(table, request.user, args))
    except (TidemarkError, ValueError) as exc:
        return error(400, f"cannot plan {table.name}: {exc}", reason=getattr(exc, "reason", None),
                     blocking_instant=getattr(exc, "blocking_instant", None))


def clean(request: HttpRequest, name: str) -> JsonResponse:
    table = get_object_or_404(RegisteredTable, name=name)
    return _accepted(services.request_run(table, Run.Kind.CLEAN, request.user))


@_bad_input
def rollback(request: HttpRequest, name: str) -> JsonResponse:
    table = get_object_or_404(RegisteredTable, name=name)
    instant = inputs.parse_instant(_body(request).get("instant"))
    return _accepted(services.request_run(table, Run.Kind.ROLLBACK, request.user, instant=instant))


def _plan_admin(kind: str) -> Callable[[HttpRequest, str], HttpResponse]:
    @_bad_input
    def view(request: HttpRequest, name: str) -> JsonResponse:
        table = get_object_or_404(RegisteredTable, name=name)
        return _accepted(services.administer_plan(table, request.user, kind, _body(request)))
    view.__name__ = f"{kind}_plan"
    return view


def recover(request: HttpRequest, name: str) -> JsonResponse:
    table = get_object_or_404(RegisteredTable, name=name)
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
    run = get_object_or_404(Run.objects.select_related("table", "requested_by"), pk=run_id)
    return JsonResponse(run_dict(run))


def schema(request: HttpRequest) -> HttpResponse | FileResponse:
    """The OpenAPI document: YAML, or JSON for `?format=json` or `Accept: application/json`."""
    wants_json = request.GET.get("format") == "json" or \
        "application/json" in request.headers.get("Accept", "") and "yaml" not in request.headers.get("Accept", "")
    if wants_json:
        return JsonResponse(yaml.safe_load(SCHEMA.read_text()))
    return FileResponse(SCHEMA.open("rb"), content_type="application/yaml")


@_bad_input
def list_alert_channels(request: HttpRequest) -> JsonResponse:
    rows = [channel_dict(c) for c in AlertChannel.objects.all()]
    return JsonResponse({"count": len(rows), "channels": rows})


@_bad_input
def create_alert_channel(request: HttpRequest) -> JsonResponse:
    return JsonResponse(channel_dict(channels.create_channel(request.user, _body(request))), status=201)


def get_alert_channel(request: HttpRequest, channel_id: int) -> JsonResponse:
    """The channel with its latest deliveries (status, attempts, response code)."""
    return JsonResponse(channel_dict(get_object_or_404(AlertChannel, pk=channel_id), deliveries=100))


def delete_alert_channel(request: HttpRequest, channel_id: int) -> HttpResponse:
    channels.delete_channel(request.user, get_object_or_404(AlertChannel, pk=channel_id))
    return HttpResponse(status=204)


@_bad_input
def cancel_run(request: HttpRequest, run_id: int) -> JsonResponse:
    run = services.cancel_run(request.user, get_object_or_404(Run.objects.select_related("table"), pk=run_id))
    return JsonResponse({"id": run.pk, "state": run.state, "cancel_requested": run.cancel_requested,
                         "url": run_dict(run)["url"]}, status=202)


@_bad_input
def edit_table(request: HttpRequest, name: str) -> JsonResponse:
    table = services.update_settings(request.user, get_object_or_404(RegisteredTable, name=name), _body(request))
    return JsonResponse(table_dict(statuses(RegisteredTable.objects.filter(pk=table.pk))[0]))


@_bad_input
def delete_table(request: HttpRequest, name: str) -> HttpResponse:
    services.unregister(request.user, get_object_or_404(RegisteredTable, name=name))
    return HttpResponse(status=204)


def _pause(paused: bool) -> Callable[[HttpRequest, str], JsonResponse]:
    def view(request: HttpRequest, name: str) -> JsonResponse:
        table = services.set_paused(request.user, get_object_or_404(RegisteredTable, name=name), paused)
        return JsonResponse(table_dict(statuses(RegisteredTable.objects.filter(pk=table.pk))[0]))
    return view


tables = api_view({"GET": list_tables, "POST": create_table})
table = api_view({"GET": get_table, "PATCH": edit_table, "DELETE": delete_table})
pause_view = api_view({"POST": _pause(True)})
resume_view = api_view({"POST": _pause(False)})
cancel_view = api_view({"POST": cancel_run})
compactions = api_view({"POST": trigger})
execute_view = api_view({"POST": execute})
preview_view = api_view({"POST": preview})
clean_view = api_view({"POST": clean})
rollback_view = api_view({"POST": rollback})
recover_view = api_view({"POST": recover})
validate_view = api_view({"POST": _plan_admin(Run.Kind.VALIDATE)})
unschedule_view = api_view({"POST": _plan_admin(Run.Kind.UNSCHEDULE)})
repair_view = api_view({"POST": _plan_admin(Run.Kind.REPAIR)})
runs = api_view({"GET": list_runs})
run = api_view({"GET": get_run})
schema_view = api_view({"GET": schema})
alert_channels = api_view({"GET": list_alert_channels, "POST": create_alert_channel})
alert_channel = api_view({"GET": get_alert_channel, "DELETE": delete_alert_channel})

