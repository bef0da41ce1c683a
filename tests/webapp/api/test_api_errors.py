"""Under /api/ every error is JSON (`{"error": ...}`, application/json): unknown URLs and objects, wrong
methods, crashes (one line and an error id, the trace only in the log); /api/runs is paginated summaries;
/api/schema serves JSON too; refused requests (viewer writes, CSRF failures) are audited with the user and
the CSRF failure page is the site's own."""
from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from tests.support.api_schema import validate
from webapp.tables.models import AuditEvent, Run


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    body = response.json()
    assert isinstance(body["error"], str) and "\n" not in body["error"] and "Traceback" not in body["error"]
    return body


@pytest.mark.parametrize(("url", "message"), [
    ("/api/tables/nope", "no table named 'nope' is registered"),
    ("/api/nothing-here", "not found: /api/nothing-here"),
    ("/api/runs/999999", "no run 999999"),
    ("/api/tables/nope/compactions", "no table named 'nope' is registered"),
    ("/api/tables/nosuch/clean", "no table named 'nosuch' is registered"),
    ("/api/alert-channels/424242", "no alert channel 424242"),
])
def test_not_found_is_json_and_names_what_is_missing(operator_client, flights, url, message):
    if url.endswith(("compactions", "clean")):
        response = operator_client.post(url, content_type="application/json")
    else:
        response = operator_client.get(url)
    assert assert_json_error(response, 404)["error"] == message


def test_wrong_method_is_json(operator_client, flights):
    body = assert_json_error(operator_client.put("/api/tables/flights"), 405)
    assert "PUT" in body["error"]


def test_a_crash_is_one_json_line_with_an_error_id(operator_client, flights, monkeypatch, caplog):
    from webapp.api import views

    def boom(*_a, **_k):
        raise RuntimeError("secret internals\nmore")

    monkeypatch.setattr(views.listing, "page", boom)
    response = operator_client.get("/api/tables")
    body = assert_json_error(response, 500)
    assert "secret" not in body["error"] and body["error_id"] in body["error"]
    assert any(body["error_id"] in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_page_crash_shows_one_line_and_an_error_id(operator_client, flights, monkeypatch):
    from webapp.tables import views

    monkeypatch.setattr(views.listing, "page", lambda *_a: (_ for _ in ()).throw(KeyError("x")))
    response = operator_client.get("/")
    page = response.content.decode()
    assert response.status_code == 500 and "error id" in page and "Traceback" not in page
    assert '<nav' in page or "Tables" in page, "the site's own template"


def test_a_storage_failure_says_what_the_store_said_not_internal_error(operator_client, flights, monkeypatch):
    from botocore.exceptions import NoCredentialsError

    from webapp.tables import views

    def no_credentials(*_a, **_k):
        raise NoCredentialsError()

    monkeypatch.setattr(views.plans, "read", no_credentials)   # the table page reads the table's timeline
    response = operator_client.get(f"/tables/{flights.name}/")
    page = response.content.decode()
    assert response.status_code == 503 and "storage cannot be read" in page
    assert "Unable to locate credentials" in page and "internal error" not in page
    monkeypatch.setattr("webapp.api.views.listing.page", lambda *_a, **_k: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied", "/data/t/.hoodie")))
    body = assert_json_error(operator_client.get("/api/tables"), 503)
    assert "Permission denied" in body["error"]


def test_runs_are_paginated_summaries(operator_client, flights, finished_compaction):
    now = timezone.now()
    Run.objects.bulk_create([Run(table=flights, kind="clean", state="succeeded", queued_at=now - dt.timedelta(seconds=i),
                                 plan={"operations": [{"x": "y" * 1000}] * 20}) for i in range(45)])
    first = operator_client.get("/api/runs")
    body = first.json()
    assert body["count"] == 46 and len(body["runs"]) == 20 and body["page"] == 1
    assert "plan" not in body["runs"][0] and body["runs"][0]["file_groups"] == 20
    assert len(first.content) < 20_000
    validate("/api/runs", "get", first)
    last = operator_client.get("/api/runs?page=3").json()
    assert len(last["runs"]) == 6 and last["next"] is None
    assert operator_client.get(body["next"]).json()["page"] == 2


def test_schema_is_served_as_json_too(viewer_client):
    response = viewer_client.get("/api/schema?format=json")
    assert response["Content-Type"] == "application/json" and response.json()["openapi"].startswith("3.1")
    assert viewer_client.get("/api/schema", HTTP_ACCEPT="application/json").json()["paths"]


def test_a_viewer_write_is_refused_and_audited(viewer_client, viewer, flights):
    response = viewer_client.post("/api/tables/flights/compactions", json.dumps({}), content_type="application/json")
    assert_json_error(response, 403)
    page = viewer_client.post("/tables/flights/clean")
    assert page.status_code == 403
    events = AuditEvent.objects.filter(action__startswith="refused.")
    assert [(e.user, e.detail["path"]) for e in events.order_by("at")] == [
        (viewer, "/api/tables/flights/compactions"), (viewer, "/tables/flights/clean")]


def test_a_csrf_failure_uses_the_site_template_and_is_audited(csrf_client, operator, flights):
    page = csrf_client.post("/tables/flights/clean")
    text = page.content.decode()
    assert page.status_code == 403 and "CSRF check failed" in text and "Back to tables" in text
    api = csrf_client.post("/api/tables/flights/clean")
    assert_json_error(api, 403)
    assert AuditEvent.objects.filter(action="refused.csrf", user=operator).count() == 2
    assert not Run.objects.exists()
