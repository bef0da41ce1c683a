"""The two roles: `viewer` reads everything, `operator` may also act on tables.

Roles are Django groups; superusers count as operators; a user in neither group reads nothing
(webapp.accounts.middleware). Views check `is_operator`, never group names.
"""
from __future__ import annotations

from django.http import HttpRequest

VIEWER = "viewer"
OPERATOR = "operator"
GROUPS = (VIEWER, OPERATOR)


def is_operator(user) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_superuser or user.groups.filter(name=OPERATOR).exists()


def has_role(user) -> bool:
    """A viewer or an operator (superusers count as operators): anyone else reads nothing."""
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_superuser or user.groups.filter(name__in=GROUPS).exists()


def role_context(request: HttpRequest) -> dict:
    """Template context: `can_operate` decides whether action buttons are rendered at all."""
    user = getattr(request, "user", None)
    return {"can_operate": is_operator(user) if user is not None else False}
