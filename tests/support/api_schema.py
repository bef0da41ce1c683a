"""Validate API responses against webapp/api/openapi.yaml (OpenAPI 3.1 = JSON Schema 2020-12)."""
from __future__ import annotations

from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

DOCUMENT = yaml.safe_load((Path(__file__).resolve().parents[2] / "webapp/api/openapi.yaml").read_text())
_REGISTRY = Registry().with_resource("urn:tidemark-api", Resource.from_contents(
    DOCUMENT, default_specification=__import__("referencing.jsonschema").jsonschema.DRAFT202012))


def response_schema(path: str, method: str, status: int) -> dict:
    response = DOCUMENT["paths"][path][method.lower()]["responses"][str(status)]
    if "$ref" in response:
        response = DOCUMENT["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    return response["content"]["application/json"]["schema"]


def validate(path: str, method: str, response) -> None:
    """Raise jsonschema.ValidationError unless `response` (a Django test response) matches the document."""
    schema = _absolute(response_schema(path, method, response.status_code))
    Draft202012Validator(schema, registry=_REGISTRY, format_checker=FormatChecker()).validate(response.json())


def _absolute(node):
    """Point local `#/components/...` references at the registered document."""
    if isinstance(node, dict):
        return {k: ("urn:tidemark-api" + v if k == "$ref" and v.startswith("#") else _absolute(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_absolute(v) for v in node]
    return node
