"""Validation of what users send (forms and JSON alike), with errors that name the problem.

Both the pages and the API turn raw input into these typed values, so a bad threshold reads the same
everywhere. Nothing here touches a table.
"""
from __future__ import annotations

import datetime as dt
import os
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from django.conf import settings

from engine import (
    THRESHOLD_FUTURE_GRACE,
    CarryOver,
    TidemarkError,
    compaction_threshold,
    is_object_store,
    is_within,
    latency_ms,
    resolve_location,
)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


MAX_MINUTES = 366 * 24 * 60        # the longest schedule or SLA anyone means: a year (and it fits every column)
MAX_LIMIT = 1000                     # rows one API page may ask for
CONFIRM_FUTURE = "confirm_future"


PATH_MAX = 1000   # RegisteredTable.path's column


class InvalidInput(ValueError):
    """User input that cannot be used; the message is shown to the user as is. `needs` names the field
    that would make it acceptable (e.g. "confirm_future"), for the form to offer it."""

    def __init__(self, message: str, needs: str | None = None) -> None:
        super().__init__(message)
        self.needs = needs


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
    """The engine's own threshold parser: ISO-8601 (naive is UTC) or epoch millis, 1970 to year 9999."""
    if raw in (None, ""):
        return None
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise InvalidInput(f"threshold must be an ISO-8601 date-time string (e.g. 2024-01-20T00:00:00Z), got {raw!r}")
    try:
        return compaction_threshold(raw.strip() if isinstance(raw, str) else raw)
    except TidemarkError as exc:
        raise InvalidInput(str(exc)) from None


def parse_latency(raw: Any, now: dt.datetime | None = None) -> str:
    """The engine's own duration parser; a latency reaching back before 1970 is out of range (its
    threshold, now − latency, would be refused by the engine at run time)."""
    if raw in (None, ""):
        return ""
    if not isinstance(raw, str):
        raise InvalidInput(f"data_latency must be a string like \"2h\", got {raw!r}")
    try:
        ms = latency_ms(raw)   # what the engine accepts, the form accepts
    except TidemarkError as exc:
        raise InvalidInput(f"data_latency: {exc}") from None
    now = now or dt.datetime.now(dt.UTC)
    if ms is None or dt.timedelta(milliseconds=ms) > now - EPOCH:
        raise InvalidInput(f"data_latency {raw.strip()!r} is out of range: now minus it falls before 1970")
    return raw.strip()


def parse_carry_over(raw: Any) -> str:
    if raw in (None, ""):
        return ""
    if raw not in tuple(CarryOver):
        choices = " or ".join(f'"{m}"' for m in CarryOver)
        raise InvalidInput(f"carry_over must be {choices}, got {raw!r}")
    return str(raw)


def parse_exact(raw: Any, name: str = "exact") -> bool | None:
    """JSON booleans, or the form values "true"/"false"/"on"; empty means the table's setting."""
    if raw in (None, ""):
        return None
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "on", "1", "false", "0"):
        return raw.lower() in ("true", "on", "1")
    raise InvalidInput(f"{name} must be true or false, got {raw!r}")


def parse_flag(raw: Any, name: str) -> bool:
    """An on/off field (JSON boolean or form value); absent means off."""
    if raw in (None, ""):
        return False
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "on", "1", "false", "0"):
        return raw.lower() in ("true", "on", "1")
    raise InvalidInput(f"{name} must be true or false, got {raw!r}")


FILE_GROUP_MAX = 512


def parse_file_group(raw: Any) -> str:
    """A file group of a pending plan: its file id, or "<partition>/<file id>"; empty means the whole plan."""
    if raw in (None, ""):
        return ""
    if not isinstance(raw, str):
        raise InvalidInput(f"file_group must be a file id or <partition>/<file id>, got {raw!r}")
    value = raw.strip()
    if len(value) > FILE_GROUP_MAX:
        raise InvalidInput(f"file_group is {len(value)} characters long; at most {FILE_GROUP_MAX} are allowed")
    file_id = value.rsplit("/", 1)[-1]
    if not file_id or any(c.isspace() for c in file_id) or ".." in value.split("/") or value.startswith("/"):
        raise InvalidInput(f"file_group {value!r} is not a file id or <partition>/<file id>")
    return value


def trigger_args(data: Mapping[str, Any], now: dt.datetime | None = None) -> TriggerArgs:
    """Each field of a trigger parsed on its own (see `validate_trigger` for the whole check)."""
    args = TriggerArgs(threshold=parse_threshold(data.get("threshold")),
                       data_latency=parse_latency(data.get("data_latency"), now),
                       carry_over=parse_carry_over(data.get("carry_over")),
                       exact=parse_exact(data.get("exact")))
    if args.threshold and args.data_latency:
        raise InvalidInput("give either threshold or data_latency, not both")
    return args


def validate_trigger(data: Mapping[str, Any], *, default_latency: str | None,
                     now: dt.datetime | None = None) -> TriggerArgs:
    """The one validation of a compaction trigger or preview — form, API and preview alike — before any
    run is queued. `default_latency` is the table's own (registered, else configured on the table)."""
    now = now or dt.datetime.now(dt.UTC)
    args = trigger_args(data, now)
    if args.threshold is None and not args.data_latency and not default_latency:
        raise InvalidInput("give a threshold T or a data latency: this table has no default data latency")
    confirmed = parse_exact(data.get(CONFIRM_FUTURE), CONFIRM_FUTURE)
    if args.threshold is not None and args.threshold > now + THRESHOLD_FUTURE_GRACE and not confirmed:
        when = args.threshold.isoformat().replace("+00:00", "Z")
        raise InvalidInput(f"threshold {when} is in the future: the compaction would publish the table as "
                           "complete up to a time whose data cannot have arrived yet; confirm to go ahead "
                           f"({CONFIRM_FUTURE})", needs=CONFIRM_FUTURE)
    return args


@dataclass(frozen=True)
class TableSettings:
    """A registered table's settings, as a user may set them at registration or edit them later."""

    schedule_minutes: int | None
    data_latency: str
    freshness_sla_minutes: int | None
    carry_over: str
    exact: bool

    FIELDS: ClassVar[tuple[str, ...]] = ("schedule_minutes", "data_latency", "freshness_sla_minutes",
                                         "carry_over", "exact")


def table_settings(data: Mapping[str, Any], *, table_latency: Callable[[], str | None]) -> TableSettings:
    """Validate a table's settings; `table_latency()` reads the latency configured on the Hudi table itself.
    An SLA needs a way to trigger: its breach queues a compaction at now − data latency."""
    parsed = TableSettings(
        schedule_minutes=bounded_int(data.get("schedule_minutes"), "schedule_minutes"),
        data_latency=parse_latency(data.get("data_latency")),
        freshness_sla_minutes=bounded_int(data.get("freshness_sla_minutes"), "freshness_sla_minutes"),
        carry_over=parse_carry_over(data.get("carry_over")) or "symlink",
        exact=bool(parse_exact(data.get("exact"))))
    if parsed.freshness_sla_minutes and not (parsed.data_latency or table_latency()):
        raise InvalidInput("a freshness SLA needs a data latency to trigger compactions when it is breached: "
                           "set data_latency (or hoodie.compaction.event.time.data.latency on the table)")
    return parsed


def parse_instant(raw: Any) -> str:
    """A Hudi instant time: 14 or 17 digits (yyyyMMddHHmmss[SSS])."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("instant is required (the instant time to roll back, e.g. 20260101120000000)")
    value = raw.strip()
    if not value.isdigit() or len(value) not in (14, 17):
        raise InvalidInput(f"instant {value!r} is not a Hudi instant time (14 or 17 digits)")
    return value


def canonical_path(path: str) -> str:
    """One spelling per physical table: a local path with `..`, symlinks and trailing slashes resolved; a
    URI (scheme://bucket/key) with its key normalised the same way, bar symlinks."""
    scheme, sep, rest = path.partition("://")
    if sep:
        bucket, _, key = rest.partition("/")
        key = posixpath.normpath("/" + key).lstrip("/") if key else ""
        return f"{scheme.lower()}://{bucket}/{key}".rstrip("/")
    return os.path.realpath(path)


def table_path(raw: Any) -> str:
    """An absolute, resolved path inside one of TIDEMARK_TABLE_ROOTS (symlinks resolved first, so a link
    cannot smuggle a path out of the allow-list)."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("path is required (the table's base path)")
    if "\x00" in raw:
        raise InvalidInput("path contains a NUL byte")
    if len(raw) > PATH_MAX:
        raise InvalidInput(f"path is {len(raw)} characters long; at most {PATH_MAX} are allowed")
    if is_object_store(raw.strip()) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/", raw.strip()):
        return _object_store_path(raw.strip())
    path = Path(raw.strip()).expanduser()
    if not path.is_absolute():
        raise InvalidInput(f"path {raw!r} must be absolute")
    resolved = Path(canonical_path(str(path)))
    roots = [Path(r) for r in settings.TIDEMARK_TABLE_ROOTS if not is_object_store(r)]   # Path would mangle "s3://"
    if not any(resolved == root or root in resolved.parents for root in roots):
        raise InvalidInput(f"path {resolved} is outside the allowed table roots "
                           f"({', '.join(settings.TIDEMARK_TABLE_ROOTS)}; set TIDEMARK_TABLE_ROOTS)")
    if not resolved.exists():
        raise InvalidInput(f"path {resolved} does not exist")
    if not resolved.is_dir():
        raise InvalidInput(f"path {resolved} is not a directory")
    return str(resolved)


def _object_store_path(raw: str) -> str:
    """A table URI (s3://bucket/prefix/t) below one of the object-store roots; whether a table is there is
    checked by opening it (object stores have no folders to test)."""
    try:
        uri = resolve_location(raw)
    except TidemarkError as exc:
        raise InvalidInput(str(exc)) from None
    roots = settings.TIDEMARK_TABLE_ROOTS
    if ".." in uri.split("/") or not any(is_within(uri, root) for root in roots):
        raise InvalidInput(f"path {uri} is outside the allowed table roots ({', '.join(roots)}; "
                           "set TIDEMARK_TABLE_ROOTS)")
    return uri


def bounded_int(raw: Any, name: str, *, minimum: int = 1, maximum: int = MAX_MINUTES,
                unit: str = "minutes") -> int | None:
    """A whole number from `minimum` to `maximum` (every numeric field has bounds: a huge value is a 400,
    never a database overflow); empty is None."""
    if raw in (None, ""):
        return None
    if isinstance(raw, bool) or isinstance(raw, float) and not raw.is_integer():
        raise InvalidInput(f"{name} must be a whole number of {unit}, got {raw!r}")
    try:
        value = int(str(raw).strip()) if not isinstance(raw, (int, float)) else int(raw)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} must be a whole number of {unit}, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise InvalidInput(f"{name} must be from {minimum} to {maximum} {unit}, got {value}")
    return value


def parse_table_version(raw: Any) -> int | None:
    """A Hudi table version to filter on (`hoodie.table.version`, e.g. 6, 8 or 9); empty is None."""
    if raw in (None, ""):
        return None
    text = str(raw).strip().lower().removeprefix("v")
    if not re.fullmatch(r"[0-9]{1,2}", text) or int(text) == 0:
        raise InvalidInput(f"version must be a Hudi table version number such as 6, 8 or 9, got {raw!r}")
    return int(text)
