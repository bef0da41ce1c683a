"""Alert channel pages: the list with a form to add one, and each channel's deliveries."""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from webapp.accounts.decorators import operator_action
from webapp.alerts import channels
from webapp.alerts.models import EVENTS, AlertChannel
from webapp.tables.inputs import InvalidInput

PAGE_SIZE = 50


def _list_page(request: HttpRequest, form: dict[str, Any] | None = None, error: InvalidInput | None = None) -> HttpResponse:
    rows = AlertChannel.objects.all()
    return render(request, "alerts/list.html", {"channels": rows, "events": EVENTS, "form": form or {},
                                                "form_events": (form or {}).get("events", list(EVENTS)),
                                                "form_error": error}, status=400 if error else 200)


@login_required
def channel_list(request: HttpRequest) -> HttpResponse:
    return _list_page(request)


@operator_action
def create(request: HttpRequest) -> HttpResponse:
    data = {"kind": request.POST.get("kind"), "target": request.POST.get("target"),
            "events": request.POST.getlist("events")}
    try:
        channel = channels.create_channel(request.user, data)
    except InvalidInput as exc:
        return _list_page(request, form=data, error=exc)
    messages.success(request, f"Alert channel #{channel.pk} ({channel.kind} {channel.target}) added.")
    return redirect("alerts:channel", channel.pk)


@login_required
def channel_detail(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = get_object_or_404(AlertChannel, pk=channel_id)
    deliveries = channel.deliveries.select_related("table", "run")
    page = Paginator(deliveries, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "alerts/channel.html", {"channel": channel, "page": page, "query": ""})


@operator_action
def delete(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = get_object_or_404(AlertChannel, pk=channel_id)
    channels.delete_channel(request.user, channel)
    messages.success(request, f"Alert channel #{channel_id} deleted.")
    return redirect("alerts:list")


@operator_action
def send_test(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = get_object_or_404(AlertChannel, pk=channel_id)
    delivery = channels.test_channel(request.user, channel)
    messages.success(request, f"Test alert queued to {channel.target} (delivery #{delivery.pk}); its outcome shows below.")
    return redirect("alerts:channel", channel.pk)
