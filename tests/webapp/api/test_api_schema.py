"""Every API response in these scenarios matches the OpenAPI document served at /api/schema."""
import json

import jsonschema
import pytest
import yaml

from tests.support.api_schema import DOCUMENT, validate
from webapp.tables.models import Run


def test_schema_is_served_and_is_the_document(viewer_client, db):
    response = viewer_client.get("/api/schema")
    assert response.status_code == 200 and response["Content-Type"] == "application/yaml"
    served = yaml.safe_load(b"".join(response.streaming_content))
    assert served == DOCUMENT and served["openapi"].startswith("3.1")


def test_schema_covers_every_api_route():
    from django.urls import get_resolver

    api = get_resolver().url_patterns
    routes = {"/api/" + str(p.pattern).replace("<slug:name>", "{name}").replace("<int:run_id>", "{id}").replace("<int:channel_id>", "{id}")
              for r in api if str(r.pattern) == "api/" for p in r.url_patterns}
    assert routes <= set(DOCUMENT["paths"])


def test_table_responses_match(operator_client, flights, finished_compaction):
    validate("/api/tables", "get", operator_client.get("/api/tables"))
    validate("/api/tables/{name}", "get", operator_client.get("/api/tables/flights"))


def test_run_responses_match(operator_client, flights, finished_compaction):
    Run.objects.create(table=flights, kind="schedule_execute", state="refused", refusal_reason="pending_compaction",
                       blocking_instant="20130120020000000", error="pending")
    validate("/api/runs", "get", operator_client.get("/api/runs"))
    validate("/api/runs/{id}", "get", operator_client.get(f"/api/runs/{finished_compaction.pk}"))


@pytest.mark.parametrize("path, body", [
    ("compactions", {"data_latency": "2h", "carry_over": "copy", "exact": True}), ("clean", {}), ("recover", {}),
    ("rollback", {"instant": "20130120020000000"}), ("execute", {"instant": "20130120020000000"}),
    ("compactions", {"threshold": "2013-01-20T01:00:00Z", "execute": False})])
def test_action_responses_match(operator_client, flights, path, body):
    response = operator_client.post(f"/api/tables/flights/{path}", json.dumps(body), content_type="application/json")
    assert response.status_code == 202
    validate(f"/api/tables/{{name}}/{path}", "post", response)
    validate("/api/runs/{id}", "get", operator_client.get(response.json()["url"]))


def test_error_responses_match(operator_client, viewer_client, flights):
    validate("/api/tables", "post", operator_client.post("/api/tables", "{}", content_type="application/json"))
    validate("/api/tables/{name}/compactions", "post",
             viewer_client.post("/api/tables/flights/compactions", "{}", content_type="application/json"))


def test_validation_catches_a_wrong_shape(operator_client, flights):
    response = operator_client.get("/api/tables")
    response.json()["tables"][0]["sla_status"] = "green"
    bad = type("R", (), {"status_code": 200, "json": lambda self: {**response.json(), "count": "one"}})()
    with pytest.raises(jsonschema.ValidationError):
        validate("/api/tables", "get", bad)


def _enums_of(node, key=None):
    """(property name, enum list) for every enum in a piece of the document."""
    if isinstance(node, dict):
        if "enum" in node:
            yield key, list(node["enum"])
        for k, v in node.items():
            yield from _enums_of(v, k if k not in ("items", "schema") else key)
    elif isinstance(node, list):
        for v in node:
            yield from _enums_of(v, key)


def test_the_documents_enums_are_the_codes_sets():
    """The document's fixed sets are copies, in YAML, of the code's: each checked here against its source, so a
    kind, state, event or choice added in the code fails this test until the document names it too."""
    from engine import CarryOver, CleanerPolicy
    from engine.errors import RefusalReason
    from tasks import location, operations
    from webapp.alerts.models import EVENTS, AlertChannel, AlertDelivery

    schemas = DOCUMENT["components"]["schemas"]
    assert schemas["RunKind"]["enum"] == list(Run.Kind.values)
    assert schemas["RunState"]["enum"] == list(Run.State.values)
    assert schemas["AlertEvent"]["enum"] == list(EVENTS)
    control_plane = [operations.NOTHING_TO_COMPACT, location.OUTSIDE_ROOTS, location.LOCATION_CHANGED]
    assert schemas["RefusalReason"]["enum"] == [r.value for r in RefusalReason] + control_plane
    expected = {"carry_over": [m.value for m in CarryOver], "clean_policy": [p.value for p in CleanerPolicy],
                "kind": list(AlertChannel.Kind.values), "status": list(AlertDelivery.Status.values)}
    found = [(key, enum) for key, enum in _enums_of(DOCUMENT) if key in expected]
    assert {key for key, _ in found} == set(expected)
    for key, enum in found:
        assert [v for v in enum if v is not None] == expected[key], key   # null: a nullable field
