"""Every API body is checked against the OpenAPI document (webapp.api.request_schema): unknown keys, wrong
JSON types and nesting no request needs are refused with a 400 that names the problem, before anything is
queued; numbers are not thresholds."""
from __future__ import annotations

import json

import pytest

from webapp.api import request_schema
from webapp.tables.models import Run

TRIGGER_KEYS = "carry_over, confirm_future, data_latency, exact, execute, threshold"
NUMBER_HINT = "threshold must be a string (an ISO-8601 date-time such as 2013-01-20T00:00:00Z), got the number"


def post(client, url, body):
    raw = body if isinstance(body, str) else json.dumps(body)
    return client.post(url, raw, content_type="application/json")


@pytest.mark.parametrize("number", [20130106, 1357430400, 12, 0, 1.5])
def test_a_number_is_not_a_threshold(operator_client, flights, number):
    response = post(operator_client, "/api/tables/flights/compactions", {"threshold": number})
    assert response.status_code == 400
    assert response.json()["error"] == f"{NUMBER_HINT} {number}"
    assert not Run.objects.exists()


@pytest.mark.parametrize(("body", "message"), [
    ({"bogus": 1}, f"unknown key 'bogus': this request takes {TRIGGER_KEYS}"),
    ({"threshold": "2013-01-06T00:00:00Z", "confirm_futur": True},
     f"unknown key 'confirm_futur' (did you mean 'confirm_future'?): this request takes {TRIGGER_KEYS}"),
    ({"execute": "maybe"}, 'execute must be true or false, got "maybe"'),
    ({"confirm_future": "maybe"}, 'confirm_future must be true or false, got "maybe"'),
    ({"exact": 1}, "exact must be true or false, got the number 1"),
    ({"carry_over": "hardlink"}, 'carry_over must be one of "symlink", "copy", got "hardlink"'),
    ({"threshold": None}, "threshold must be a string (an ISO-8601 date-time such as 2013-01-20T00:00:00Z), "
                          "got null"),
])
def test_a_trigger_body_is_refused_naming_the_key(operator_client, flights, body, message):
    response = post(operator_client, "/api/tables/flights/compactions", body)
    assert (response.status_code, response.json()) == (400, {"error": message})
    assert not Run.objects.exists()


def test_every_problem_is_named_at_once(operator_client, flights):
    response = post(operator_client, "/api/tables/flights/compactions", {"exact": "x", "zzz": 1})
    assert response.json()["error"] == (f"unknown key 'zzz': this request takes {TRIGGER_KEYS}; "
                                        'exact must be true or false, got "x"')


def _concrete(path: str) -> str:
    return path.replace("{name}", "flights").replace("{id}", "1")


def _writes() -> list[tuple[str, str]]:
    return [(path, method) for path, item in request_schema.document()["paths"].items()
            for method in item if method in ("post", "patch", "put", "delete")]


@pytest.mark.parametrize(("path", "method"), _writes())
def test_every_write_in_the_document_refuses_an_unknown_key(operator_client, flights, path, method):
    response = getattr(operator_client, method)(_concrete(path), json.dumps({"bogus": 1}),
                                                content_type="application/json")
    assert response.status_code == 400, (path, method, response.content)
    assert response.json()["error"].startswith("unknown key 'bogus'")
    assert not Run.objects.exists()


def test_a_view_the_document_does_not_describe_fails_at_import():
    from webapp.api.auth import api_view

    with pytest.raises(KeyError):
        api_view({"POST": lambda request: None}, "/api/not-in-the-document")


@pytest.mark.parametrize("raw", [
    "[" * 100_000 + "]" * 100_000,                      # json.loads itself would exhaust the stack
    '{"events": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"events": ' + "[" * 20 + "]" * 20 + "}",         # parses, and is deeper than any request needs
])
def test_deep_nesting_is_a_400_naming_the_limit(operator_client, flights, raw):
    response = post(operator_client, "/api/alert-channels", raw)
    assert (response.status_code, response.json()) == (
        400, {"error": "request body is nested too deeply (at most 16 levels)"})


def test_a_body_that_is_not_an_object_is_refused(operator_client, flights):
    response = post(operator_client, "/api/tables/flights/clean", "[1]")
    assert response.json() == {"error": "request body must be a JSON object"}


def test_a_body_where_none_is_taken_must_be_empty(operator_client, flights):
    assert post(operator_client, "/api/tables/flights/clean", {}).status_code == 202
    response = post(operator_client, "/api/tables/flights/recover", {"force": True})
    assert response.json() == {"error": "unknown key 'force': this request takes no body"}
