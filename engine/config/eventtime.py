"""Event time: values of the table's event-time field as epoch milliseconds, and ISO-8601 rendering.

All event times inside Tidemark are epoch milliseconds (UTC), the unit Hudi's `HoodieWriteStat.minEventTime`
uses. A field may be a timestamp (any unit), a date, an integer (taken as epoch millis) or an ISO-8601 string.

One rule for time zones everywhere (input columns, thresholds, stored strings): an ISO-8601 value with `Z` or
an offset (`+02:00`) means that instant; a value without one (a *naive* timestamp) is UTC. Valid event times
lie in years 0001..9999 (what ISO-8601, Spark and Java's `Instant` rendering share); anything else is refused.
"""
from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ConfigError, InputError

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MIN_MS = -62_135_596_800_000      # 0001-01-01T00:00:00Z
MAX_MS = 253_402_300_799_999      # 9999-12-31T23:59:59.999Z
# A zone suffix only after a time of day: a date alone (`2024-01-02`) ends in `-02`, which is no offset.
_OFFSET = r"[T ]\d{2}(:?\d{2}(:?\d{2}([.,]\d+)?)?)?(Z|z|[+-]\d{2}(:?\d{2})?)$"


def parse_iso_strings(values: pa.Array | pa.ChunkedArray, unit: str = "us", what: str = "value") -> pa.Array:
    """ISO-8601 strings -> timestamp[unit, UTC]; naive strings are UTC. A malformed string raises InputError."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    strings = pc.utf8_trim_whitespace(arr.cast(pa.string()))
    target = pa.timestamp(unit, tz="UTC")
    try:
        aware = pc.fill_null(pc.match_substring_regex(strings, _OFFSET), False)
        with_zone = pc.cast(pc.if_else(aware, strings, pa.scalar(None, pa.string())), target)
        naive = pc.cast(pc.if_else(aware, pa.scalar(None, pa.string()), strings), pa.timestamp(unit))
        return pc.if_else(aware, with_zone, naive.cast(target))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = _first_unparseable(strings, unit)
        raise InputError(f"{what}: cannot parse {bad!r} as an ISO-8601 time (e.g. 2024-01-01T00:00:00Z; "
                         "a time without a zone is taken as UTC)") from None


def _first_unparseable(strings: pa.Array, unit: str) -> str | None:
    texts: list[str | None] = strings.to_pylist()
    for text in texts:
        if text is None:
            continue
        zoned = re.search(_OFFSET, text) is not None
        try:
            pc.cast(pa.array([text]), pa.timestamp(unit, tz="UTC" if zoned else None))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return text
    return None


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
        return parse_iso_strings(arr, "ms", "event time").cast(pa.int64())
    raise ConfigError(f"event-time field of type {t} is not supported (use a timestamp, date, integer or ISO string)")


def check_range(values: pa.Array | pa.ChunkedArray, what: str) -> None:
    """Refuse event-time values outside years 0001..9999 (InputError naming the first such value)."""
    millis = to_millis(values)
    if len(millis) == 0 or millis.null_count == len(millis):
        return
    mm = pc.min_max(millis)
    for bound in (mm["min"].as_py(), mm["max"].as_py()):
        if not MIN_MS <= bound <= MAX_MS:
            raise InputError(f"{what}: event time {bound} ms is outside years 0001..9999")


def bounds(values: pa.Array | pa.ChunkedArray) -> tuple[int | None, int | None]:
    """(min, max) epoch millis of an event-time column, ignoring nulls."""
    if len(values) == 0:
        return None, None
    mm = pc.min_max(to_millis(values))
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return lo, hi


def known_bounds(values: pa.Array | pa.ChunkedArray) -> tuple[int | None, int | None]:
    """`bounds`, or (None, None) — unknown — when the values are no times (a Java table's ordering field may be a
    decimal or a free string such as `ord_1`): for statistics of data already committed, where refusing would
    only strand the operation, and an unknown time makes planning compact the log rather than skip it."""
    try:
        return bounds(values)
    except (ConfigError, InputError):
        return None, None


def iso(ms: int | None) -> str | None:
    """Epoch millis -> ISO-8601 UTC string with a Z suffix (None stays None); out-of-range raises ConfigError."""
    if ms is None:
        return None
    return _render(check_millis(int(ms), "event time"))


def check_millis(ms: int, what: str, earliest: int = MIN_MS) -> int:
    """`ms` if it is a time from `earliest` to the end of year 9999, else ConfigError naming `what` and the value."""
    if not earliest <= ms <= MAX_MS:
        raise ConfigError(f"{what} {ms} is out of range: expected epoch millis {earliest}..{MAX_MS} "
                          f"({_render(earliest)} .. 9999-12-31T23:59:59.999Z)")
    return ms


def check_threshold(ms: int, what: str = "threshold") -> int:
    """A compaction threshold: an event time from 1970 to year 9999 (a negative one is a mistake, not a plan)."""
    return check_millis(ms, what, earliest=0)


def _render(ms: int) -> str:
    return (_EPOCH + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_DIGITS = re.compile(r"^-?\d+$")


# A compaction threshold later than this past now publishes "complete up to" a time whose data cannot have
# arrived yet: no data owner should trust it, so every caller asks for an explicit confirmation first.
FUTURE_GRACE = dt.timedelta(days=1)


def in_the_future(threshold_ms: int, now: dt.datetime | None = None) -> bool:
    """Whether a threshold lies past now + FUTURE_GRACE."""
    now = now or dt.datetime.now(dt.UTC)
    return threshold_ms > int(((now + FUTURE_GRACE) - _EPOCH) / dt.timedelta(milliseconds=1))


# Typed epoch millis have 13 digits (2001-09-09 .. 2286-11-20): any other count is far likelier a date or time
# written YYYYMMDD[HHmm[ss]] (8, 12, 14 digits) or epoch seconds (10) than a time in the 1970s-90s or after 2286,
# and taking it for millis would plan against a time decades or centuries off without a word.
_TYPED_MILLIS_DIGITS = 13


def parse_time(text: str, what: str = "time") -> int:
    """ISO-8601 (naive = UTC) or epoch millis (13 digits) -> epoch millis; malformed, ambiguous or out-of-range
    input raises ConfigError."""
    text = text.strip()
    if _DIGITS.match(text):
        ms = int(text)
        if len(text.lstrip("-")) != _TYPED_MILLIS_DIGITS and MIN_MS <= ms <= MAX_MS:
            raise ConfigError(f"{what} {text!r} is ambiguous: as epoch millis it is {_render(ms)}; write a date or "
                              "time as ISO-8601 (e.g. 2024-01-01 or 2024-01-01T00:00:00Z), epoch seconds times "
                              "1000 as millis (13 digits)")
        return check_millis(ms, what)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(f"malformed {what} {text!r}: expected ISO-8601 (e.g. 2013-06-01T00:00:00Z) "
                          "or epoch millis") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return check_millis(int((parsed - _EPOCH) / dt.timedelta(milliseconds=1)), what)


def millis_array(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Epoch millis as a float64 numpy array with NaN for nulls (for vectorised comparisons)."""
    out: np.ndarray = to_millis(values).to_numpy(zero_copy_only=False).astype("float64")
    return out
