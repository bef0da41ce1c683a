"""Page-side role checks: every page needs a login; actions need the operator role and a POST."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.http import require_POST

from webapp.accounts.roles import is_operator

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def operator_action(view: View) -> View:
    """POST-only (CSRF by middleware), logged in, operator role; a viewer's forged POST gets 403."""

    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not is_operator(request.user):
            raise PermissionDenied("the operator role is required for this action")
        return view(request, *args, **kwargs)

    return cast(View, login_required(require_POST(checked)))   # the same view, behind the checks
