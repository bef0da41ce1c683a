"""How failures reach people: JSON under /api/, the site's own pages elsewhere, never a traceback.

- Every error response under `/api/` is `{"error": ...}` with `application/json` — 404 of an unknown URL
  or object, 405, 403, 500 — whatever produced it (a view, the URL resolver, Django's own handlers).
- A crash is logged with its trace under a fresh error id; the page or the JSON shows one line and the id.
- A CSRF failure renders the site's 403 page, and it and every other refused request are audited with the
  user who made them (a viewer's POST, a forged form).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from engine import is_store_client_error

log = logging.getLogger("webapp.errors")

API_PREFIX = "/api/"
STATUS_TEXT = {400: "bad request", 401: "authentication required", 403: "forbidden", 404: "not found",
               405: "method not allowed", 500: "internal error"}


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def new_error_id() -> str:
    return uuid.uuid4().hex[:12]


def audit_refusal(request: HttpRequest, reason: str, status: int) -> None:
    """Note why a request is refused; RefusalAuditMiddleware writes the one audit row (`refused.<status>` or
    `refused.csrf`) with this reason, its user (or "anonymous") and what was asked."""
    request.tidemark_refusal_reason = reason  # type: ignore[attr-defined]


class NotFound(Http404):
    """An object the request names is not there; the message names it ("no table named 'x' is registered"),
    where a bare 404 could only repeat the URL."""


class ErrorResponses:
    """Middleware: JSON errors under /api/, one line + error id for crashes everywhere."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if is_api(request) and response.status_code >= 400 \
                and not response.get("Content-Type", "").startswith("application/json"):
            status = response.status_code
            message = STATUS_TEXT.get(status, response.reason_phrase.lower())
            if status == 404:
                message = f"not found: {request.path}"
            elif status == 405:
                message = f"method {request.method} not allowed on {request.path}"
            replaced = JsonResponse({"error": message}, status=status)
            if response.has_header("Allow"):
                replaced["Allow"] = response["Allow"]
            return replaced
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, Http404):
            message = str(exc) if isinstance(exc, NotFound) else f"not found: {request.path}"
            return JsonResponse({"error": message}, status=404) if is_api(request) else None
        if isinstance(exc, PermissionDenied):
            # Answered here, not re-raised: Django would log a refused POST with its whole traceback, an
            # expected refusal drowning the worker's log; `log_response` still notes it in one line.
            audit_refusal(request, str(exc) or "forbidden", 403)
            if is_api(request):
                return JsonResponse({"error": str(exc) or "forbidden"}, status=403)
            return render(request, "403.html", {"exception": str(exc)}, status=403)
        error_id = new_error_id()
        if is_store_client_error(exc) or isinstance(exc, (PermissionError, ConnectionError, TimeoutError)):
            # the table's storage failed (no credentials, a bucket or endpoint that is not there, a refused path):
            # its own words, as the CLI gives them, not an internal error (the trace is logged all the same)
            log.warning("storage error %s on %s %s", error_id, request.method, request.path, exc_info=exc)
            line = f"the table's storage failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            status, heading = 503, "503 — the table's storage cannot be read"
        else:
            log.error("internal error %s on %s %s", error_id, request.method, request.path, exc_info=exc)
            line = f"internal error ({type(exc).__name__}); error id {error_id}: the trace is in the server log"
            status, heading = 500, None
        if is_api(request):
            return JsonResponse({"error": line, "error_id": error_id}, status=status)
        return render(request, "500.html", {"line": line, "error_id": error_id, "heading": heading}, status=status)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the site's 403 page (not Django's bare one), audited with the user."""
    # Audited by RefusalAuditMiddleware as `refused.csrf`, with this reason.
    request.tidemark_csrf_failure = reason or "CSRF check failed"  # type: ignore[attr-defined]
    message = "This form has expired or did not come from this site (CSRF check failed). Reload the page and try again."
    if is_api(request):
        return JsonResponse({"error": "CSRF check failed; send the csrftoken cookie's value as X-CSRFToken"},
                            status=403)
    return render(request, "403.html", {"exception": message}, status=403)
