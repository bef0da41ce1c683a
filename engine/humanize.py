"""Values as a person reads them, for the CLI's text output and the control plane's pages alike: `—` for
nothing, yes/no for flags, thousands separated, ISO-8601 UTC for times, and a record's fields as "name value"
pairs — never a Python repr (`{'log_files_compacted': 152}`, `False`, `None`).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

NOTHING = "—"


def human(value: Any) -> str:
    """`value` in words; nested records and lists are flattened into one line."""
    if value is None or value == "" or (isinstance(value, (Mapping, list, tuple)) and not value):
        return NOTHING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value):,}"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if value.tzinfo \
            else value.isoformat(timespec="seconds")
    if isinstance(value, Mapping):
        return " · ".join(f"{label(k)} {human(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)) and not isinstance(value, str) and isinstance(value, Sequence):
        return ", ".join(human(v) for v in value)
    return str(value)


def label(key: object) -> str:
    """A field name in words: `log_files_compacted` → "log files compacted"."""
    return str(key).replace("_", " ")
