"""The two roles: `viewer` reads everything, `operator` may also act on tables.

Roles are Django groups; superusers count as operators; a user in neither group reads nothing
(webapp.accounts.middleware). Views check `is_operator`, never group names.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest

# Whoever a request carries, as Django types `request.user` (views in front of an action require a login).
AnyUser = User | AnonymousUser

VIEWER = "viewer"
OPERATOR = "operator"
GROUPS = (VIEWER, OPERATOR)


def _roles(user: AnyUser) -> frozenset[str]:
    """The user's role groups, read once per user object (one query per request, however often asked)."""
    cached: frozenset[str] | None = getattr(user, "_tidemark_roles", None)
    if cached is None:
        cached = frozenset(user.groups.filter(name__in=GROUPS).values_list("name", flat=True))
        setattr(user, "_tidemark_roles", cached)   # noqa: B010  (an attribute of our own on Django's user)
    return cached


def is_operator(user: AnyUser) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_superuser or OPERATOR in _roles(user)


def has_role(user: AnyUser) -> bool:
    """A viewer or an operator (superusers count as operators): anyone else reads nothing."""
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_superuser or bool(_roles(user))


def role_context(request: HttpRequest) -> dict[str, Any]:
    """Template context: `can_operate` decides whether action buttons are rendered at all."""
    user = getattr(request, "user", None)
    return {"can_operate": is_operator(user) if user is not None else False}
