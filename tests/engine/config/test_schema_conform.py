"""`schema.conform_column`: the one conversion of input values to the table's type (issue 9, case 4)."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine.config.schema import conform_column
from engine.errors import InputError

T = dt.datetime(2024, 1, 1, 0, 10, tzinfo=dt.UTC)
T_MS = 1704067800000


@pytest.mark.parametrize("values", [
    pa.array([T], pa.timestamp("s", tz="UTC")),
    pa.array([T], pa.timestamp("ms", tz="UTC")),
    pa.array([T], pa.timestamp("us", tz="UTC")),
    pa.array([T], pa.timestamp("ns", tz="UTC")),
    pa.array([T.replace(tzinfo=None)], pa.timestamp("us")),         # naive = UTC
    pa.array(["2024-01-01T00:10:00Z"]),
    pa.array(["2024-01-01T00:10:00"]),
    pa.array(["2024-01-01T01:10:00+01:00"]),
], ids=["s", "ms", "us", "ns", "naive", "iso_z", "iso_naive", "iso_offset"])
@pytest.mark.parametrize("unit", ["ms", "us"])
def test_every_time_input_lands_in_the_table_unit(values, unit):
    out = conform_column(values, pa.timestamp(unit, tz="UTC"), "updated_at")
    assert out.type == pa.timestamp(unit, tz="UTC")
    assert out.cast(pa.int64()).to_pylist() == [T_MS * (1000 if unit == "us" else 1)]


def test_dates_are_midnight_utc():
    out = conform_column(pa.array([dt.date(2024, 1, 2)]), pa.timestamp("us", tz="UTC"), "d")
    assert out.cast(pa.int64()).to_pylist() == [1704153600000000]


@pytest.mark.parametrize("values,target,message", [
    (pa.array([1704067800000]), pa.timestamp("ms", tz="UTC"), "unit of a number would be a guess"),
    (pa.array([T], pa.timestamp("us", tz="UTC")), pa.int64(), "unit would be a guess"),
    (pa.array(["7", "seven"]), pa.int64(), "'seven'"),
    (pa.array(["yesterday"]), pa.timestamp("us", tz="UTC"), "'yesterday'"),
    (pa.array([2 ** 40]), pa.int32(), "1099511627776"),
])
def test_values_that_do_not_convert_are_named(values, target, message):
    with pytest.raises(InputError, match=message):
        conform_column(values, target, "col")


def test_same_type_and_safe_casts_pass_through():
    assert conform_column(pa.array([1, 2], pa.int32()), pa.int64(), "seq").to_pylist() == [1, 2]
    assert conform_column(pa.array(["7"]), pa.int64(), "seq").to_pylist() == [7]
    assert conform_column(pa.nulls(2), pa.string(), "s").to_pylist() == [None, None]


def test_new_second_and_nanosecond_timestamps_are_stored_in_microseconds():
    from engine.config.schema import table_avro_schema

    schema = pa.schema([("a", pa.timestamp("s")), ("b", pa.timestamp("ns", tz="UTC")), ("c", pa.timestamp("ms"))])
    types = {f["name"]: f["type"][1]["logicalType"] for f in table_avro_schema("t", schema)["fields"]}
    assert types == {"a": "timestamp-micros", "b": "timestamp-micros", "c": "timestamp-millis"}


MAP = pa.map_(pa.string(), pa.int32())


@pytest.mark.parametrize("values,target", [
    (pa.array([[("a", 1)], [("y", 2), ("y", 3)]], MAP), MAP),
    (pa.array([[[("a", 1)]], None, [[("x", 1)], [("y", 1), ("y", 2)]]], pa.list_(MAP)), pa.list_(MAP)),
    (pa.array([{"m": [("y", 1), ("y", None)]}], pa.struct([("m", MAP)])), pa.struct([("m", MAP)])),
    (pa.array([[("o", [("y", 1), ("y", 2)])]], pa.map_(pa.string(), MAP)), pa.map_(pa.string(), MAP)),
    (pa.array([[("b", 1), ("y", 1), ("y", 2)]], pa.map_(pa.large_string(), pa.int64())), MAP),
    (pa.array([None, [(f"k{i}", i) for i in range(500)] + [("y", 0)] + [(f"j{i}", i) for i in range(500)] + [("y", 1)]],
              MAP), MAP),
], ids=["top", "list_of_maps", "in_struct", "map_value", "converted", "far_apart"])
def test_a_map_holding_a_key_twice_is_refused(values, target):
    """Avro blocks would keep the last entry and Parquet ones both: the write is refused instead."""
    with pytest.raises(InputError, match="column 'm' holds a map with key 'y' twice"):
        conform_column(values, target, "m")


def test_maps_with_distinct_keys_pass_and_nulls_hide_nothing():
    values = pa.array([[("a", 1), ("b", None)], None, [], [("a", 2)]], MAP)
    assert conform_column(values, MAP, "m").equals(values)
    assert conform_column(values.slice(1), MAP, "m").to_pylist() == [None, [], [("a", 2)]]
    strict = pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))
    assert conform_column(pa.array([[("k", 1)]], strict), MAP, "m").to_pylist() == [[("k", 1)]]
