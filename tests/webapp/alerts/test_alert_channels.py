"""Alert channels through the API and the pages: created (201) with validated kind, target and events,
listed with their deliveries; bad input is a 400 naming the problem; viewers cannot add channels."""
from __future__ import annotations

import json

import pytest

from tests.support.api_schema import validate
from webapp.alerts.models import AlertChannel, AlertDelivery
from webapp.tables.models import AuditEvent


def post_json(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_create_list_and_show_channels_through_the_api(operator_client, flights):
    created = post_json(operator_client, "/api/alert-channels",
                        {"kind": "webhook", "target": "https://hooks.example/T0/B0", "events": ["run_failed", "sla_breached"]})
    assert created.status_code == 201, created.content
    validate("/api/alert-channels", "post", created)
    body = created.json()
    assert body["kind"] == "webhook" and body["events"] == ["run_failed", "sla_breached"]
    channel = AlertChannel.objects.get(pk=body["id"])
    AlertDelivery.objects.create(channel=channel, event="run_failed", table=flights, status="failed", attempts=4,
                                 response_code=500, last_error="webhook answered 500")
    listed = operator_client.get("/api/alert-channels").json()
    assert listed["count"] == 1 and listed["channels"][0]["id"] == channel.pk
    validate("/api/alert-channels/{id}", "get", operator_client.get(body["url"]))
    shown = operator_client.get(body["url"]).json()
    assert shown["deliveries"][0] | {"created_at": None} == {
        "id": shown["deliveries"][0]["id"], "event": "run_failed", "table": "flights", "run": None, "status": "failed",
        "attempts": 4, "response_code": 500, "error": "webhook answered 500", "created_at": None, "sent_at": None}
    assert AuditEvent.objects.get(action="alert_channel.create").actor == "olivia"
    assert operator_client.delete(body["url"]).status_code == 204
    assert not AlertChannel.objects.exists()


@pytest.mark.parametrize("body, message", [
    ({"kind": "pager", "target": "x", "events": ["run_failed"]}, "kind must be"),
    ({"kind": "webhook", "target": "ftp://x", "events": ["run_failed"]}, "is not an http(s) URL"),
    ({"kind": "email", "target": "not-an-address", "events": ["run_failed"]}, "is not an email address"),
    ({"kind": "email", "target": "a@example.com", "events": []}, "events must be a non-empty list"),
    ({"kind": "email", "target": "a@example.com", "events": ["everything"]}, 'events[0] must be one of'),
])
def test_bad_channels_are_400(operator_client, body, message):
    response = post_json(operator_client, "/api/alert-channels", body)
    assert response.status_code == 400 and message in response.json()["error"]
    assert not AlertChannel.objects.exists()


def test_the_channel_pages(operator_client, viewer_client, flights):
    page = operator_client.post("/alerts/new", {"kind": "email", "target": "oncall@example.com",
                                                "events": ["run_refused", "worker_lost"]})
    channel = AlertChannel.objects.get()
    assert page.status_code == 302 and page["Location"] == f"/alerts/{channel.pk}/"
    assert channel.events == ["run_refused", "worker_lost"]
    detail = operator_client.get(page["Location"]).content.decode()
    assert "oncall@example.com" in detail and "Nothing sent to this channel yet" in detail
    bad = operator_client.post("/alerts/new", {"kind": "webhook", "target": "nope", "events": ["run_failed"]})
    assert bad.status_code == 400 and "is not an http(s) URL" in bad.content.decode()
    assert 'value="nope"' in bad.content.decode()
    assert viewer_client.post("/alerts/new", {"kind": "email", "target": "v@example.com",
                                              "events": ["run_failed"]}).status_code == 403
    assert "Add a channel" not in viewer_client.get("/alerts/").content.decode()
