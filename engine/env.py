"""Settings from the environment: the one way Tidemark reads a variable, in the engine, the workers and the web.

Every reader takes the variable's name and its default, treats an unset or blank variable as the default, and
refuses a malformed value with a `ConfigError` naming the variable and the value (`TIDEMARK_LOCK_TIMEOUT='ten'
must be a number of seconds`), instead of a bare `ValueError` or a silent fallback. docs/SETTINGS.md lists every
variable read here, once (tests/docs/test_settings_doc.py holds the two together).
"""
from __future__ import annotations

import os

from engine.errors import ConfigError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def text(name: str, default: str = "") -> str:
    """The variable's value, stripped; `default` when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or default


def flag(name: str, default: bool) -> bool:
    """An on/off switch: 1/true/yes/on or 0/false/no/off (any case)."""
    value = text(name).lower()
    if not value:
        return default
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise ConfigError(f"{name}={os.environ[name]!r} must be true or false (1/0, yes/no, on/off)")


def number(name: str, default: float, *, unit: str = "", minimum: float = 0.0, exclusive: bool = True) -> float:
    """A number (`_` allowed as a digit separator) above `minimum` (at least it, when not `exclusive`)."""
    value = text(name)
    if not value:
        return default
    try:
        parsed = float(value.replace("_", ""))
    except ValueError:
        raise ConfigError(f"{name}={value!r} must be {_a_number(unit)}") from None
    if parsed < minimum or (exclusive and parsed == minimum) or parsed != parsed:
        bound = f"more than {minimum:g}" if exclusive else f"at least {minimum:g}"
        raise ConfigError(f"{name}={value!r} must be {bound}{f' {unit}' if unit else ''}")
    return parsed


def whole(name: str, default: int, *, unit: str = "", minimum: int = 1) -> int:
    """A whole number, at least `minimum`."""
    value = text(name)
    if not value:
        return default
    try:
        parsed = int(value.replace("_", ""))
    except ValueError:
        raise ConfigError(f"{name}={value!r} must be a whole number{f' of {unit}' if unit else ''}") from None
    if parsed < minimum:
        raise ConfigError(f"{name}={value!r} must be at least {minimum}{f' {unit}' if unit else ''}")
    return parsed


def _a_number(unit: str) -> str:
    return f"a number of {unit}" if unit else "a number"
