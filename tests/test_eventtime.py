from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine.errors import ConfigError
from engine.eventtime import bounds, iso, parse_time, to_millis


def test_to_millis_of_each_supported_type():
    ts = pa.array([dt.datetime(2013, 1, 1, 5, tzinfo=dt.timezone.utc)], pa.timestamp("us", tz="UTC"))
    assert to_millis(ts).to_pylist() == [1357016400000]
    assert to_millis(pa.array([1, None], pa.int32())).to_pylist() == [1, None]
    assert to_millis(pa.array(["2013-01-01T05:00:00Z"])).to_pylist() == [1357016400000]
    assert to_millis(pa.array([dt.date(1970, 1, 2)])).to_pylist() == [86_400_000]


def test_bounds_iso_and_parse():
    assert bounds(pa.array([5, 3, None, 9])) == (3, 9)
    assert iso(1357016400000) == "2013-01-01T05:00:00.000Z" and iso(None) is None
    assert parse_time("2013-01-01T05:00:00Z") == parse_time("2013-01-01T05:00:00") == 1357016400000
    assert parse_time("1357016400000") == 1357016400000
    with pytest.raises(ConfigError, match="malformed time 'yesterday'"):
        parse_time("yesterday")
