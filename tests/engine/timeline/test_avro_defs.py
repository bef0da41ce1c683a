"""Declaring an Avro record once: the rules that turn annotations and defaults into Java's schema form."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine.timeline.avro_defs import JAVA_STRING, NAMESPACE, Int, Long, avro_field, from_avro, schema, to_avro


@dataclass(frozen=True, kw_only=True)
class Inner:
    n: Long


@dataclass(frozen=True, kw_only=True)
class Outer:
    required: str
    first: Inner | None = None
    again: dict[str, Inner] | None = None
    version: Int | None = 1
    listed: list[str] = avro_field(default=[], default_in_type=True, doc="why")
    ours: bool | None = avro_field(default=None, extension=True)


def test_schema_follows_annotations_and_defaults() -> None:
    fields = {f["name"]: f for f in schema(Outer)["fields"]}
    assert schema(Outer)["namespace"] == NAMESPACE
    assert fields["required"] == {"name": "required", "type": JAVA_STRING}   # no default: none in Avro either
    assert fields["first"]["type"][0] == "null" and fields["first"]["default"] is None
    assert fields["first"]["type"][1] == {"type": "record", "name": "Inner", "fields": [{"name": "n", "type": "long"}]}
    # Avro takes a union's default from its first branch: a non-null default puts null last.
    assert fields["version"] == {"name": "version", "type": ["int", "null"], "default": 1}
    # A record met again in the same schema is named, not defined twice.
    assert fields["again"]["type"][1]["values"] == "Inner"
    assert fields["listed"] == {"name": "listed", "type": {"type": "array", "items": JAVA_STRING, "default": []},
                                "doc": "why", "default": []}


def test_extension_fields_are_left_out_of_javas_schema() -> None:
    assert "ours" in [f["name"] for f in schema(Outer)["fields"]]
    assert "ours" not in [f["name"] for f in schema(Outer, java=True)["fields"]]


def test_list_defaults_are_not_shared() -> None:
    assert Outer(required="a").listed is not Outer(required="b").listed


def test_from_avro_builds_nested_records_and_fills_defaults() -> None:
    value = from_avro(Outer, {"required": "x", "again": {"k": {"n": 3}}, "unknown": 1})
    assert value == Outer(required="x", again={"k": Inner(n=3)})
    assert to_avro(value)["again"] == {"k": {"n": 3}}


def test_undeclarable_types_are_refused() -> None:
    @dataclass(frozen=True)
    class Bare:
        n: int   # Avro has int and long: the declaration must say which

    with pytest.raises(TypeError, match="no Avro type"):
        schema(Bare)
