from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine.config.eventtime import bounds, iso, parse_time, to_millis
from engine.errors import ConfigError


def test_to_millis_of_each_supported_type():
    ts = pa.array([dt.datetime(2013, 1, 1, 5, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC"))
    assert to_millis(ts).to_pylist() == [1357016400000]
    assert to_millis(pa.array([1, None], pa.int32())).to_pylist() == [1, None]
    assert to_millis(pa.array(["2013-01-01T05:00:00Z"])).to_pylist() == [1357016400000]
    assert to_millis(pa.array([dt.date(1970, 1, 2)])).to_pylist() == [86_400_000]


def test_bounds_iso_and_parse():
    assert bounds(pa.array([5, 3, None, 9])) == (3, 9)
    assert iso(1357016400000) == "2013-01-01T05:00:00.000Z" and iso(None) is None
    assert parse_time("2013-01-01T05:00:00Z") == parse_time("2013-01-01T05:00:00") == 1357016400000
    assert parse_time("1357016400000") == 1357016400000
    # a YYYYMMDD date or epoch seconds would be a time in 1970 as millis: refused, not taken
    for ambiguous in ("20240101", "1700000000"):
        with pytest.raises(ConfigError, match="ambiguous: as epoch millis it is 1970"):
            parse_time(ambiguous, "--threshold")
    for ambiguous in ("202401011200", "20240101120000"):   # yyyyMMddHHmm[ss]: 1976, 2611 as millis
        with pytest.raises(ConfigError, match="ambiguous"):
            parse_time(ambiguous, "--threshold")
    with pytest.raises(ConfigError, match="malformed time 'yesterday'"):
        parse_time("yesterday")


def test_naive_strings_are_utc_and_offsets_are_honoured():
    from engine.config.eventtime import parse_iso_strings

    values = pa.array(["2013-01-01T05:00:00Z", "2013-01-01T05:00:00", "2013-01-01T06:00:00+01:00",
                       "2013-01-01 05:00:00", None])
    assert to_millis(values).to_pylist() == [1357016400000] * 4 + [None]
    assert parse_iso_strings(values, "us").type == pa.timestamp("us", tz="UTC")
    assert parse_time("2013-01-01T06:00:00+01:00") == 1357016400000


def test_unparseable_strings_name_the_value():
    from engine.errors import InputError

    with pytest.raises(InputError, match="cannot parse 'soon' as an ISO-8601 time"):
        to_millis(pa.array(["2013-01-01T05:00:00Z", "soon"]))


@pytest.mark.parametrize("text", ["100000000000000000000", "253402300800000", "-62135596800001", "1e20"])
def test_times_outside_years_1_to_9999_are_refused(text):
    with pytest.raises(ConfigError, match=text.replace("+", r"\+")):
        parse_time(text, "--threshold")


def test_thresholds_start_in_1970_and_rendering_never_overflows():
    from engine.config.eventtime import MAX_MS, check_range, check_threshold
    from engine.errors import InputError

    assert check_threshold(0) == 0 and check_threshold(MAX_MS) == MAX_MS
    with pytest.raises(ConfigError, match="threshold -5 is out of range"):
        check_threshold(-5)
    with pytest.raises(ConfigError, match="event time 253402300800000 is out of range"):
        iso(MAX_MS + 1)
    with pytest.raises(InputError, match="outside years 0001..9999"):
        check_range(pa.array([MAX_MS + 1], pa.int64()), "ts")
