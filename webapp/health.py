"""`/healthz`: is this web process able to serve — its database answers and its broker accepts connections.

For load balancers and compose health checks: no login, no table reads (the engine is never touched), a
short JSON body naming what failed, 200 when both answer and 503 otherwise.
"""
from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse

BROKER_TIMEOUT_S = 3.0


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _broker() -> str:
    from webapp.celery import app  # the Celery app only: its broker settings, no task bodies

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_S)  # type: ignore[arg-type]  # kombu's stub says int; it takes seconds as float
    return "ok"


def healthz(request: HttpRequest) -> JsonResponse:
    checks = {}
    for name, check in (("database", _database), ("broker", _broker)):
        try:
            checks[name] = check()
        except Exception as exc:  # any failure is the answer, named in one line
            checks[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if healthy else "unavailable", **checks}, status=200 if healthy else 503)
