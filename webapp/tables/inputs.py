"""Validation of what users send (forms and JSON alike), with errors that name the problem.

Both the pages and the API turn raw input into these typed values, so a bad threshold reads the same
everywhere. Nothing here touches a table.
"""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from django.conf import settings
from django.utils.dateparse import parse_datetime

from engine import TidemarkError, latency_ms


PATH_MAX = 1000   # RegisteredTable.path's column


class InvalidInput(ValueError):
    """User input that cannot be used; the message is shown to the user as is."""


@dataclass(frozen=True)
class TriggerArgs:
    """Arguments of a compaction trigger or preview; None means "the table's own setting"."""

    threshold: dt.datetime | None = None
    data_latency: str = ""
    carry_over: str = ""
    exact: bool | None = None

    def engine_kwargs(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "data_latency": self.data_latency or None,
                "carry_over": self.carry_over or None, "exact": self.exact}


def parse_threshold(raw: Any) -> dt.datetime | None:
    """ISO-8601 date-time; a value without a zone is taken as UTC (the UI shows UTC everywhere)."""
    if raw in (None, ""):
        return None
    if not isinstance(raw, str):
        raise InvalidInput(f"threshold must be an ISO-8601 date-time string, got {raw!r}")
    parsed = parse_datetime(raw.strip().replace(" ", "T"))
    if parsed is None:
        raise InvalidInput(f"threshold {raw!r} is not an ISO-8601 date-time (e.g. 2013-01-20T00:00:00Z)")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def parse_latency(raw: Any) -> str:
    if raw in (None, ""):
        return ""
    if not isinstance(raw, str):
        raise InvalidInput(f"data_latency must be a string like \"2h\", got {raw!r}")
    try:
        latency_ms(raw)   # the engine's own parser: what it accepts, the form accepts
    except TidemarkError as exc:
        raise InvalidInput(f"data_latency: {exc}") from None
    return raw.strip()


def parse_carry_over(raw: Any) -> str:
    if raw in (None, ""):
        return ""
    if raw not in ("symlink", "copy"):
        raise InvalidInput(f"carry_over must be \"symlink\" or \"copy\", got {raw!r}")
    return raw


def parse_exact(raw: Any) -> bool | None:
    """JSON booleans, or the form values "true"/"false"/"on"; empty means the table's setting."""
    if raw in (None, ""):
        return None
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "on", "1", "false", "0"):
        return raw.lower() in ("true", "on", "1")
    raise InvalidInput(f"exact must be true or false, got {raw!r}")


def trigger_args(data: Mapping[str, Any]) -> TriggerArgs:
    args = TriggerArgs(threshold=parse_threshold(data.get("threshold")),
                       data_latency=parse_latency(data.get("data_latency")),
                       carry_over=parse_carry_over(data.get("carry_over")),
                       exact=parse_exact(data.get("exact")))
    if args.threshold and args.data_latency:
        raise InvalidInput("give either threshold or data_latency, not both")
    return args


def parse_instant(raw: Any) -> str:
    """A Hudi instant time: 14 or 17 digits (yyyyMMddHHmmss[SSS])."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("instant is required (the instant time to roll back, e.g. 20260101120000000)")
    value = raw.strip()
    if not value.isdigit() or len(value) not in (14, 17):
        raise InvalidInput(f"instant {value!r} is not a Hudi instant time (14 or 17 digits)")
    return value


def table_path(raw: Any) -> str:
    """An absolute, resolved path inside one of TIDEMARK_TABLE_ROOTS (symlinks resolved first, so a link
    cannot smuggle a path out of the allow-list)."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("path is required (the table's base path)")
    if "\x00" in raw:
        raise InvalidInput("path contains a NUL byte")
    if len(raw) > PATH_MAX:
        raise InvalidInput(f"path is {len(raw)} characters long; at most {PATH_MAX} are allowed")
    path = Path(raw.strip()).expanduser()
    if not path.is_absolute():
        raise InvalidInput(f"path {raw!r} must be absolute")
    resolved = Path(os.path.realpath(path))
    roots = [Path(r) for r in settings.TIDEMARK_TABLE_ROOTS]
    if not any(resolved == root or root in resolved.parents for root in roots):
        raise InvalidInput(f"path {resolved} is outside the allowed table roots "
                           f"({os.pathsep.join(map(str, roots))}; set TIDEMARK_TABLE_ROOTS)")
    if not resolved.exists():
        raise InvalidInput(f"path {resolved} does not exist")
    if not resolved.is_dir():
        raise InvalidInput(f"path {resolved} is not a directory")
    return str(resolved)


def optional_positive_int(raw: Any, name: str) -> int | None:
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} must be a whole number of minutes, got {raw!r}") from None
    if value <= 0:
        raise InvalidInput(f"{name} must be positive, got {value}")
    return value
