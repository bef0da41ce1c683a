"""Two request-wide rules of access, applied before (and after) any view.

- `RoleRequiredMiddleware`: a logged-in user in neither role group (viewer, operator; superusers count as
  operators) reads nothing — every page and API call answers 403; only logging in/out, `/healthz`,
  `/metrics` (its own token) and static files stay reachable.
- `RefusalAuditMiddleware`: every 401 and 403 answer — an unauthenticated API call, a viewer's POST, a
  failed CSRF check, a role-less user — is written to the audit log (`refused.401`, `refused.403`,
  `refused.csrf`) with the method, path and client address, as docs/CONTROL-PLANE.md promises.
"""
from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from webapp.accounts.roles import has_role
from webapp.tables.models import AuditEvent

OPEN_PREFIXES = ("/accounts/", "/healthz", "/metrics", "/static/")


class RoleRequiredMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if (user is not None and user.is_authenticated and not request.path.startswith(OPEN_PREFIXES)
                and not has_role(user)):
            message = "your account has no role (viewer or operator); ask an administrator to add you to one"
            if request.path.startswith("/api/"):
                return JsonResponse({"error": message}, status=403)
            return render(request, "403.html", {"exception": message}, status=403)
        return self.get_response(request)


class RefusalAuditMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code in (401, 403):
            _audit_refusal(request, response)
        return response


def _audit_refusal(request: HttpRequest, response: HttpResponse) -> None:
    user = getattr(request, "user", None)
    known = user is not None and user.is_authenticated
    csrf = getattr(request, "tidemark_csrf_failure", None)
    reason = getattr(request, "tidemark_refusal_reason", None)   # webapp.errors.audit_refusal
    if csrf is None and b"CSRF" in (response.content[:300] if not response.streaming else b""):
        csrf = "CSRF check failed"   # the API's own CSRF check answers JSON naming it
    AuditEvent.objects.create(
        at=timezone.now(), user=user if known else None,
        actor=user.get_username() if known and user is not None else f"anonymous ({request.META.get('REMOTE_ADDR', '')})",
        action="refused.csrf" if csrf else f"refused.{response.status_code}", outcome=str(response.status_code),
        detail={"method": request.method, "path": request.path[:500], "address": request.META.get("REMOTE_ADDR", ""),
                **({"reason": str(csrf or reason)[:200]} if csrf or reason else {})})
