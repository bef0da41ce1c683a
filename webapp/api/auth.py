"""Authentication of API requests: a session (browser, CSRF-checked on writes) or a bearer token.

`Authorization: Bearer <token>` (or `Token <token>`) authenticates as the token's user and needs no CSRF
token, as a script has no cookie to forge. Unauthenticated → 401; a viewer writing → 403.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from webapp.accounts.models import ApiToken, digest
from webapp.accounts.roles import is_operator
from webapp.api import request_schema
from webapp.tables.inputs import InvalidInput

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
# A view function: the request, then the URL's arguments.
Handler = Callable[..., HttpResponseBase]


def error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def _token_user(request: HttpRequest) -> User | None:
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() not in ("bearer", "token") or not raw.strip():
        return None
    token = ApiToken.usable().select_related("user").filter(key_digest=digest(raw.strip())).first()
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user


def _csrf_failure(request: HttpRequest) -> HttpResponse | None:
    check = CsrfViewMiddleware(lambda r: HttpResponse())
    check.process_request(request)
    return check.process_view(request, lambda r: HttpResponse(), (), {})   # a view not marked csrf_exempt


def _refused(request: HttpRequest, message: str) -> JsonResponse:
    from webapp.errors import audit_refusal

    audit_refusal(request, message, 403)
    return error(403, message)


def api_view(methods: dict[str, Handler], path: str) -> Handler:
    """One URL (`path` as the OpenAPI document spells it), a handler per HTTP method; authentication, CSRF
    and roles checked before any handler.

    Handlers named in `methods` for unsafe methods require the operator role, and get the request body,
    checked against the document's schema for the operation, as `body` (a 400 naming each problem otherwise).
    """
    for method in methods:   # a view the document does not describe fails at import, not on a request
        request_schema.document()["paths"][path][method.lower()]

    @csrf_exempt
    @wraps(next(iter(methods.values())))
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        handler = methods.get(request.method or "")
        if handler is None:
            response = error(405, f"method {request.method} not allowed; use {', '.join(methods)}")
            response["Allow"] = ", ".join(methods)
            return response
        user = _token_user(request)
        if user is not None:
            request.user = user
        elif not request.user.is_authenticated:
            return error(401, "authentication required (log in, or send Authorization: Bearer <token>)")
        elif request.method not in SAFE_METHODS:
            rejected = _csrf_failure(request)
            if rejected is not None:  # CSRF_FAILURE_VIEW (webapp.errors.csrf_failure) audited it already
                return error(403, "CSRF check failed; send the csrftoken cookie's value as X-CSRFToken")
        if request.method in SAFE_METHODS:
            return handler(request, *args, **kwargs)
        if not is_operator(request.user):
            return _refused(request, "the operator role is required for this action")
        try:
            body = request_schema.parse_body(request.body, path, request.method or "")
        except InvalidInput as exc:
            return error(400, str(exc))
        return handler(request, *args, body=body, **kwargs)

    return view
