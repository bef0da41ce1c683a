"""One validation for the trigger form, the API trigger and the preview (the engine's own parsers), with
bounds on every numeric field, a confirmation for a far-future threshold, errors said once, forms that keep
what the user typed — and one registration per physical table."""
from __future__ import annotations

import html
import json
import os

import pytest

from engine import Table
from webapp.tables.models import AuditEvent, RegisteredTable, Run


def post_json(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def bare(db, settings, tmp_path):
    """A real (empty) Hudi table with no data latency configured anywhere, registered without one."""
    root = tmp_path / "tables"
    root.mkdir(exist_ok=True)
    settings.TIDEMARK_TABLE_ROOTS = [str(root)]
    Table.create(str(root / "bare"), name="bare", record_keys=["id"], ordering_field="ts", event_time_field="ts")
    return RegisteredTable.objects.create(name="bare", path=os.path.realpath(root / "bare"))


def form_error(response) -> str:
    body = response.content.decode()
    start = body.index('id="trigger-error"')
    return html.unescape(body[body.index(">", start) + 1:body.index("</p>", start)])


def three_ways(client, table: str, body: dict) -> list[tuple[int, str]]:
    """(status, error) of the same input through the form, the API trigger and the API preview."""
    form = client.post(f"/tables/{table}/trigger", body)
    api = post_json(client, f"/api/tables/{table}/compactions", body)
    preview = post_json(client, f"/api/tables/{table}/preview", body)
    return [(form.status_code, form_error(form)), (api.status_code, api.json()["error"]),
            (preview.status_code, preview.json()["error"])]


@pytest.mark.parametrize("body, message", [
    ({"threshold": "1969-12-31T00:00:00Z"}, "threshold '1969-12-31T00:00:00Z' is out of range"),
    ({"threshold": "next tuesday"}, "malformed threshold 'next tuesday'"),
    ({"data_latency": "-2h"}, "data_latency: malformed duration '-2h': expected e.g. 30s, 15m, 2h, 1d"),
    ({"data_latency": "99999999d"}, "data_latency: duration '99999999d' is out of range"),
    ({"data_latency": "40000d"}, "data_latency '40000d' is out of range"),
    ({"threshold": "2013-01-20T00:00:00Z", "data_latency": "2h"}, "give either threshold or data_latency"),
])
def test_form_api_and_preview_refuse_bad_input_with_the_same_one_message(operator_client, flights, body, message):
    answers = three_ways(operator_client, "flights", body)
    assert {status for status, _ in answers} == {400}, answers
    assert len({error for _, error in answers}) == 1, answers   # the same words everywhere
    assert answers[0][1].startswith(message), answers[0][1]
    assert answers[0][1].count("malformed") <= 1 and answers[0][1].count("out of range") <= 1
    assert not Run.objects.exists()


def test_no_threshold_and_no_latency_on_a_table_without_a_default_is_refused(operator_client, bare):
    answers = three_ways(operator_client, "bare", {})
    assert {status for status, _ in answers} == {400}
    assert {error for _, error in answers} == {
        "give a threshold T or a data latency: this table has no default data latency"}
    assert not Run.objects.exists()


def test_a_far_future_threshold_needs_a_confirmation(operator_client, flights):
    body = {"threshold": "9999-01-01T00:00:00Z"}
    refused = post_json(operator_client, "/api/tables/flights/compactions", body)
    assert refused.status_code == 400 and refused.json()["needs"] == "confirm_future"
    assert "in the future" in refused.json()["error"]
    form = operator_client.post("/tables/flights/trigger", {**body, "mode": "schedule", "carry_over": "copy"})
    page = form.content.decode()
    assert form.status_code == 400 and "in the future" in form_error(form)
    # The form keeps what the user typed and now offers the confirmation box.
    assert 'value="9999-01-01T00:00:00Z"' in page
    assert '<option value="copy" selected>' in page and '<option value="schedule" selected>' in page
    assert 'id="confirm-future-label" hidden' not in page
    assert not Run.objects.exists()

    accepted = post_json(operator_client, "/api/tables/flights/compactions", {**body, "confirm_future": True})
    assert accepted.status_code == 202, accepted.content
    # one compaction at a time: the form's trigger waits for the API's run
    busy = operator_client.post("/tables/flights/trigger", {**body, "confirm_future": "true"})
    assert busy.status_code == 400 and "one compaction at a time" in form_error(busy)
    Run.objects.filter(pk=accepted.json()["id"]).update(state="succeeded")
    assert operator_client.post("/tables/flights/trigger", {**body, "confirm_future": "true"}).status_code == 302
    assert Run.objects.count() == 2


@pytest.mark.parametrize("field", ["freshness_sla_minutes", "schedule_minutes"])
@pytest.mark.parametrize("value", ["99999999999999999999", "0", "-5", "1.5", "often"])
def test_numeric_settings_are_bounded(operator_client, bare, field, value):
    Table.create(os.path.join(os.path.dirname(bare.path), "other"), name="other", record_keys=["id"],
                 ordering_field="ts", event_time_field="ts")
    body = {"name": "other", "path": os.path.join(os.path.dirname(bare.path), "other"), "data_latency": "2h",
            field: value}
    api = post_json(operator_client, "/api/tables", body)
    assert api.status_code == 400 and api.json()["error"].startswith(field), api.content
    page = operator_client.post("/tables/register", body)
    assert page.status_code == 400 and field in page.content.decode()
    assert 'value="other"' in page.content.decode(), "the register form keeps what was typed"
    assert not RegisteredTable.objects.filter(name="other").exists()


def test_api_runs_limit_is_bounded(viewer_client, flights):
    response = viewer_client.get("/api/runs?limit=99999999999999999999")
    assert response.status_code == 400 and response.json()["error"].startswith("limit must be from 1 to 1000")


def test_an_sla_without_a_way_to_trigger_is_refused(operator_client, bare):
    other = os.path.join(os.path.dirname(bare.path), "sla")
    Table.create(other, name="sla", record_keys=["id"], ordering_field="ts", event_time_field="ts")
    refused = post_json(operator_client, "/api/tables", {"name": "sla", "path": other, "freshness_sla_minutes": 60})
    assert refused.status_code == 400
    assert refused.json()["error"].startswith("a freshness SLA needs a data latency")
    accepted = post_json(operator_client, "/api/tables", {"name": "sla", "path": other, "freshness_sla_minutes": 60,
                                                          "data_latency": "30m"})
    assert accepted.status_code == 201, accepted.content


def test_one_registration_per_physical_table(operator_client, bare, tmp_path):
    root = os.path.dirname(bare.path)
    os.symlink(bare.path, os.path.join(root, "alias"))
    for spelling in (bare.path, bare.path + "/", f"{root}/../{os.path.basename(root)}/bare",
                     os.path.join(root, "alias")):
        response = post_json(operator_client, "/api/tables", {"name": "again", "path": spelling})
        assert response.status_code == 400, spelling
        assert response.json()["error"] == f"the table at {bare.path} is already registered as 'bare'"
    assert RegisteredTable.objects.count() == 1
    assert not AuditEvent.objects.filter(action="register").exists()
