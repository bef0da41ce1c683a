"""Page-side role checks: every page needs a login; actions need the operator role and a POST."""
from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.views.decorators.http import require_POST

from webapp.accounts.roles import is_operator


def operator_action(view):
    """POST-only (CSRF by middleware), logged in, operator role; a viewer's forged POST gets 403."""

    @wraps(view)
    def checked(request, *args, **kwargs):
        if not is_operator(request.user):
            raise PermissionDenied("the operator role is required for this action")
        return view(request, *args, **kwargs)

    return login_required(require_POST(checked))
