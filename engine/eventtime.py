"""Event time: values of the table's event-time field as epoch milliseconds, and ISO-8601 rendering.

All event times inside Tidemark are epoch milliseconds (UTC), the unit Hudi's `HoodieWriteStat.minEventTime`
uses. A field may be a timestamp (any unit), a date, an integer (taken as epoch millis) or an ISO-8601 string.
"""
from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ConfigError

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def to_millis(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Event-time column -> int64 epoch millis (nulls stay null)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    t = arr.type
    if pa.types.is_timestamp(t):
        return arr.cast(pa.timestamp("ms", tz=t.tz), safe=False).cast(pa.int64())
    if pa.types.is_date(t):
        return arr.cast(pa.date32()).cast(pa.int32()).cast(pa.int64()) * 86_400_000
    if pa.types.is_integer(t):
        return arr.cast(pa.int64())
    if pa.types.is_floating(t):
        return pc.round(arr).cast(pa.int64())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pc.cast(pc.cast(arr, pa.string()), pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    raise ConfigError(f"event-time field of type {t} is not supported (use a timestamp, date, integer or ISO string)")


def bounds(values: pa.Array | pa.ChunkedArray) -> tuple[int | None, int | None]:
    """(min, max) epoch millis of an event-time column, ignoring nulls."""
    if len(values) == 0:
        return None, None
    mm = pc.min_max(to_millis(values))
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return lo, hi


def iso(ms: int | None) -> str | None:
    """Epoch millis -> ISO-8601 UTC string with a Z suffix (None stays None)."""
    if ms is None:
        return None
    return (_EPOCH + dt.timedelta(milliseconds=int(ms))).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_DIGITS = re.compile(r"^-?\d+$")


def parse_time(text: str) -> int:
    """ISO-8601 (naive = UTC) or epoch millis -> epoch millis; malformed input raises ConfigError."""
    text = text.strip()
    if _DIGITS.match(text):
        return int(text)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"malformed time {text!r}: expected ISO-8601 (e.g. 2013-06-01T00:00:00Z) or epoch millis") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return int((parsed - _EPOCH) / dt.timedelta(milliseconds=1))


def millis_array(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Epoch millis as a float64 numpy array with NaN for nulls (for vectorised comparisons)."""
    return to_millis(values).to_numpy(zero_copy_only=False).astype("float64")
