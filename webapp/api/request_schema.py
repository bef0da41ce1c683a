"""Every API request body checked against the OpenAPI document itself (`openapi.yaml`) before a handler reads it.

The document is the one request schema: what it declares for an operation is what the operation accepts. A key
it does not declare, a value of the wrong JSON type, an enum value outside its list or a missing required key is
refused with a 400 that names the key (and, for a near-miss like `confirm_futur`, the key that was meant). An
operation the document gives no body accepts none (or `{}`).

The document checks the shape; the value checks with domain words (an instant's 14 or 17 digits, a threshold
not in the future, a name's pattern, a range) stay with the parsers in `webapp.tables.inputs`, shared with the
pages, so a bad value reads the same whether it came from a form or from JSON. A body nested deeper than any
request needs is refused before it is looked at (a `[` × 100,000 body would otherwise exhaust the stack).
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, ValidationError, validators

from webapp.tables.inputs import InvalidInput

DOCUMENT = Path(__file__).with_name("openapi.yaml")
MAX_DEPTH = 16            # the deepest body the API takes is 3 levels (an object holding a list of strings)
NO_BODY: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}
# Value checks the document states for readers, enforced by the parsers with their own wording (see above).
VALUE_KEYWORDS = ("pattern", "minimum", "maximum", "minLength", "maxLength", "format")
SHOWN = 60                # characters of a refused value quoted back

_JSON_TYPES = {"object": "an object", "array": "a list", "string": "a string", "integer": "a whole number",
               "number": "a number", "boolean": "true or false", "null": "null"}


@cache
def document() -> dict[str, Any]:
    """The OpenAPI document, parsed once per process."""
    loaded: dict[str, Any] = yaml.safe_load(DOCUMENT.read_text())
    return loaded


def body_schema(path: str, method: str) -> dict[str, Any]:
    """The JSON Schema of the body of `method path` (e.g. "post", "/api/tables/{name}/compactions"), its
    `$ref`s inlined; the empty-object schema for an operation without a request body."""
    operation = document()["paths"][path][method.lower()]
    body = operation.get("requestBody")
    if body is None:
        return NO_BODY
    schema: dict[str, Any] = _inlined(body["content"]["application/json"]["schema"])
    return schema


def _inlined(node: Any) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = document()
            for part in ref[2:].split("/"):
                target = target[part]
            return _inlined(target)
        return {k: _inlined(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_inlined(v) for v in node]
    return node


def _no_check(*_: Any) -> Iterator[ValidationError]:
    return iter(())


_ShapeValidator = validators.extend(Draft202012Validator, {k: _no_check for k in VALUE_KEYWORDS})  # type: ignore[no-untyped-call]


@cache
def _validator(path: str, method: str) -> Any:
    return _ShapeValidator(body_schema(path, method))


def parse_body(raw: bytes, path: str, method: str) -> dict[str, Any]:
    """The request body as a dict, or InvalidInput naming every problem the document finds in it."""
    data = _loaded(raw)
    errors = sorted(_validator(path, method).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise InvalidInput("; ".join(dict.fromkeys(_describe(e) for e in errors)))
    return data


def _loaded(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except RecursionError:
        raise InvalidInput(f"request body is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput("request body must be a JSON object")
    if _depth(data) > MAX_DEPTH:
        raise InvalidInput(f"request body is nested too deeply (at most {MAX_DEPTH} levels)")
    return data


def _depth(value: Any) -> int:
    """How deeply lists and objects nest, counted without recursion (the body is untrusted)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _describe(error: ValidationError) -> str:
    """One problem in the words of the API's reader: the key, what it must be, what it was."""
    where = _key(error)
    instance: Any = error.instance     # jsonschema types these as "Any | Unset"; set on every error it yields
    rule: Any = error.validator_value
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    if error.validator == "additionalProperties":
        return _unknown_keys(instance, schema)
    if error.validator == "required":
        return "; ".join(f"{_join(where, key)} is required" for key in rule if key not in instance)
    if error.validator == "type":
        return f"{where or 'the body'} must be {_expected(rule, schema)}, got {_shown(instance)}"
    if error.validator == "enum":
        return f"{where} must be one of {', '.join(json.dumps(v) for v in rule)}, got {_shown(instance)}"
    return f"{where or 'the body'}: {error.message}"


def _unknown_keys(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    known = sorted(schema.get("properties", {}))
    unknown = sorted(set(instance) - set(known))
    parts = []
    for key in unknown:
        near = difflib.get_close_matches(key, known, n=1)
        parts.append(f"unknown key {key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    takes = f"this request takes {', '.join(known)}" if known else "this request takes no body"
    return f"{'; '.join(parts)}: {takes}"


def _expected(types: Any, schema: Mapping[str, Any]) -> str:
    names = [types] if isinstance(types, str) else list(types)
    words = " or ".join(_JSON_TYPES.get(t, t) for t in names if t != "null")
    if schema.get("format") == "date-time":
        words += " (an ISO-8601 date-time such as 2013-01-20T00:00:00Z)"
    return words + (", or null" if "null" in names else "")


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "the boolean " + json.dumps(value)
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if value is None:
        return "null"
    text = json.dumps(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def _key(error: ValidationError) -> str:
    """The offending key as a reader writes it: `events[0]`, `a.b`."""
    key = ""
    for part in error.absolute_path:
        key += f"[{part}]" if isinstance(part, int) else f"{'.' if key else ''}{part}"
    return key


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key
