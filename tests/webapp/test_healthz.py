"""`/healthz` (load balancers, compose's web health check) answers 200 only when the database and the broker
both answer, on both deployments, and names the failing one with 503 otherwise; it needs no login."""
from __future__ import annotations

from pathlib import Path

import yaml
from django.test import Client

from tests.support.stack import REPO, free_port


def test_healthz_checks_the_database_and_the_broker(stack_env):
    from tasks import app

    client = Client(HTTP_HOST="localhost")
    ok = client.get("/healthz")
    assert ok.status_code == 200 and ok.json() == {"status": "ok", "database": "ok", "broker": "ok"}
    # A broker that does not answer: Redis on a port nobody listens on (either deployment's app).
    keys = ("broker_url", "broker_write_url", "broker_transport")
    saved = {key: app.conf[key] for key in keys}
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    app.conf.update(broker_url=nobody, broker_write_url=nobody, broker_transport="redis")
    try:
        down = client.get("/healthz")
    finally:
        app.conf.update(saved)
    assert down.status_code == 503, down.json()
    body = down.json()
    assert body["status"] == "unavailable" and body["database"] == "ok" and body["broker"] != "ok"


def test_compose_restarts_every_service_and_checks_their_health():
    compose = yaml.safe_load(Path(REPO, "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("postgres", "redis", "web", "worker", "beat"):
        merged = {**compose["x-tidemark"], **services[name]} if name in ("web", "worker", "beat") else services[name]
        assert merged.get("restart") in ("unless-stopped", "always"), name
    assert "/healthz" in " ".join(services["web"]["healthcheck"]["test"])
    assert "inspect ping" in " ".join(services["worker"]["healthcheck"]["test"])
    assert "--reset" not in services["web"]["command"], "a start must not reset the demo passwords"
    assert "gunicorn" in services["web"]["command"] and "--threads" in services["web"]["command"]
