"""One declaration per Avro record: a frozen dataclass whose fields are the record's, from which both its
Avro schema (`schema`) and its typed value (`from_avro` / `to_avro`) come.

Hudi's readers resolve our instant files against their generated classes, so the schema must stay exactly
what Java writes: field order is the dataclass's field order, names are the Avro names (camelCase, as
Hudi's generated classes spell them), and the Avro type follows from the annotation:

- `str` is a Java string (`"avro.java.string": "String"`), `bool` is `boolean`, `Int` / `Long` / `Double`
  say which Avro number (Python has one int and one float);
- `list[X]` is an array, `dict[str, X]` a map (Java string keys), a dataclass a nested record (inlined where
  a schema first meets it, by name after that, as Avro requires);
- `X | None` is a union with null: null first, unless the field's default is not null (Avro takes a union's
  default from its first branch, hence Hudi's `["int", "null"]` for `version` with default 1);
- the dataclass default is the Avro default; a field without one has no Avro default either.

`avro_field` adds what an annotation cannot say: a doc, an RFC extension field (left out of Java's schema),
and the array default Hudi's .avsc repeats inside the type. Records are `kw_only`, so a required field may
follow one with a default, as in Hudi's schemas.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, Union, get_args, get_origin, get_type_hints

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

NAMESPACE = "org.apache.hudi.avro.model"

Int = Annotated[int, "int"]
Long = Annotated[int, "long"]
Double = Annotated[float, "double"]

JAVA_STRING: dict[str, Any] = {"type": "string", "avro.java.string": "String"}

R = TypeVar("R", bound="DataclassInstance")

_DOC = "avro.doc"
_EXTENSION = "avro.extension"
_DEFAULT_IN_TYPE = "avro.default_in_type"


def avro_field(*, default: Any = dataclasses.MISSING, doc: str | None = None, extension: bool = False,
               default_in_type: bool = False) -> Any:
    """A record field with what its annotation cannot say. A list or dict default is copied per instance.

    extension: Tidemark's RFC addition, declared last with a null default; `schema(..., java=True)` leaves it
    out, which is the schema Java's own class has. default_in_type: the array type repeats the field's default
    (`{"type": "array", ..., "default": []}`), as Hudi's .avsc does for a few fields and Java keeps."""
    metadata = {_DOC: doc, _EXTENSION: extension, _DEFAULT_IN_TYPE: default_in_type}
    if isinstance(default, list | dict):
        empty = type(default)
        return dataclasses.field(default_factory=lambda: empty(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _default(f: dataclasses.Field[Any]) -> Any:
    """The field's default, or MISSING."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _optional_of(tp: Any) -> Any | None:
    """X for `X | None`, else None."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0]
        raise TypeError(f"only `X | None` unions are declared, not {tp}")
    return None


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    """The record's resolved annotations (strings under `from __future__ import annotations`), once per class."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = get_type_hints(cls, include_extras=True)
    return hints


def _avro_type(tp: Any, named: set[str], java: bool) -> Any:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _record(tp, named, java, namespace=None)
    if tp is str:
        return dict(JAVA_STRING)
    if tp is bool:
        return "boolean"
    origin = get_origin(tp)
    if origin is Annotated:
        return get_args(tp)[1]
    if origin is list:
        return {"type": "array", "items": _avro_type(get_args(tp)[0], named, java)}
    if origin is dict:
        key, values = get_args(tp)
        if key is not str:
            raise TypeError(f"Avro map keys are strings, not {key}")
        return {"type": "map", "values": _avro_type(values, named, java), "avro.java.string": "String"}
    raise TypeError(f"no Avro type for {tp!r}: declare Int, Long, Double, str, bool, list, dict or a record")


def _record(cls: type[Any], named: set[str], java: bool, namespace: str | None) -> Any:
    if cls.__name__ in named:
        return cls.__name__   # defined earlier in this schema: Avro refers to it by name
    named.add(cls.__name__)
    hints = _hints(cls)
    fields: list[dict[str, Any]] = []
    for f in dataclasses.fields(cls):
        if java and f.metadata.get(_EXTENSION):
            continue
        default = _default(f)
        inner = _optional_of(hints[f.name])
        if inner is None:
            avro_type = _avro_type(hints[f.name], named, java)
        else:
            branch = _avro_type(inner, named, java)
            avro_type = ["null", branch] if default in (None, dataclasses.MISSING) else [branch, "null"]
        if f.metadata.get(_DEFAULT_IN_TYPE):
            avro_type["default"] = default
        entry: dict[str, Any] = {"name": f.name, "type": avro_type}
        if f.metadata.get(_DOC) is not None:
            entry["doc"] = f.metadata[_DOC]
        if default is not dataclasses.MISSING:
            entry["default"] = default
        fields.append(entry)
    out: dict[str, Any] = {"type": "record", "name": cls.__name__}
    if namespace is not None:
        out["namespace"] = namespace
    out["fields"] = fields
    return out


def schema(cls: type[DataclassInstance], *, java: bool = False) -> dict[str, Any]:
    """The Avro schema of a top-level record (in NAMESPACE, as Java's Schema.toString() writes it). java: without
    Tidemark's extension fields, i.e. the schema of Hudi's own class."""
    out = _record(cls, set(), java, NAMESPACE)
    assert isinstance(out, dict)
    return out


def to_avro(record: DataclassInstance) -> dict[str, Any]:
    """The record as the dict fastavro writes (nested records as dicts, field names as in the schema)."""
    return dataclasses.asdict(record)


def from_avro(cls: type[R], data: Mapping[str, Any]) -> R:
    """The typed record of a dict fastavro read; absent fields take their defaults (a reader schema fills them
    already, a dict built by hand may leave them out), keys the record does not declare are ignored."""
    hints = _hints(cls)
    kwargs = {f.name: _value(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data}
    return cls(**kwargs)


def _value(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    inner = _optional_of(tp)
    if inner is not None:
        tp = inner
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_avro(typing.cast(type[Any], tp), value)
    origin = get_origin(tp)
    if origin is list:
        return [_value(get_args(tp)[0], v) for v in value]
    if origin is dict:
        return {k: _value(get_args(tp)[1], v) for k, v in value.items()}
    return value
