"""Page-side role checks: every page needs a login; actions need the operator role and a POST.

An action's address opened with GET — a reload after a refused form, a bookmarked or pasted link — leads back
to the page that holds its form, with a line saying why, instead of the browser's blank "HTTP ERROR 405"."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import redirect
from django.urls import reverse

from webapp.accounts.roles import is_operator

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def operator_action(view: View) -> View:
    """POST-only (CSRF by middleware), logged in, operator role; a viewer's forged POST gets 403."""

    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            messages.info(request, "That address carries out an action when its form is sent; here is the page "
                                   "the form is on.")
            return redirect(form_page(request, kwargs))
        if not is_operator(request.user):
            raise PermissionDenied("the operator role is required for this action")
        return view(request, *args, **kwargs)

    return cast(View, login_required(checked))   # the same view, behind the checks


def form_page(request: HttpRequest, kwargs: dict[str, Any]) -> str:
    """The page whose form posts to an action with these URL arguments: its table, run or alert channel, else the
    list of its app (alert channels; tables for registering and discovering)."""
    if "name" in kwargs:
        return reverse("tables:detail", args=[kwargs["name"]])
    if "run_id" in kwargs:
        return reverse("tables:run", args=[kwargs["run_id"]])
    if "channel_id" in kwargs:
        return reverse("alerts:channel", args=[kwargs["channel_id"]])
    match = request.resolver_match
    return reverse("alerts:list" if match is not None and match.namespace == "alerts" else "tables:list")
