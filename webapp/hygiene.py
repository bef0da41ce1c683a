"""Input no database can store is refused up front: a NUL byte anywhere in the path, query or form
fields (or a JSON body's `\\u0000`) gets 400 naming the problem, on PostgreSQL and SQLite alike, instead
of reaching a query and failing there with 500."""
from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

MESSAGE = "the request contains a NUL byte (\\0), which no name, path or value may hold"


def _has_nul(request: HttpRequest) -> bool:
    if "\x00" in request.path or "\x00" in request.META.get("QUERY_STRING", "") or "%00" in request.META.get(
            "QUERY_STRING", ""):
        return True
    if request.method in ("POST", "PUT", "PATCH"):
        body = request.body
        return b"\x00" in body or b"%00" in body or b"\\u0000" in body
    return False


class RejectNulBytesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _has_nul(request):
            if request.path.startswith("/api/"):
                return JsonResponse({"error": MESSAGE}, status=400)
            return HttpResponse(MESSAGE + "\n", status=400, content_type="text/plain")
        return self.get_response(request)
