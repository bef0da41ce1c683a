"""Input validation: every bad value gets a message naming the problem."""
import datetime as dt

import pytest

from webapp.tables import inputs
from webapp.tables.inputs import InvalidInput


def test_threshold_accepts_iso_and_assumes_utc():
    assert inputs.parse_threshold("2013-01-20T00:00:00Z") == dt.datetime(2013, 1, 20, tzinfo=dt.UTC)
    assert inputs.parse_threshold("2013-01-20 05:00") == dt.datetime(2013, 1, 20, 5, tzinfo=dt.UTC)
    assert inputs.parse_threshold("") is None


@pytest.mark.parametrize("data, message", [
    ({"threshold": "yesterday"}, "malformed threshold 'yesterday'"),
    ({"threshold": True}, "must be an ISO-8601 date-time string"),
    ({"threshold": "1969-12-31T00:00:00Z"}, "out of range"),
    ({"data_latency": "-2h"}, "^data_latency: malformed duration '-2h': expected"),
    ({"data_latency": "30000d"}, "out of range: now minus it falls before 1970"),
    ({"data_latency": "2 hours"}, "malformed duration"),
    ({"carry_over": "hardlink"}, "carry_over must be"),
    ({"exact": "maybe"}, "exact must be true or false"),
    ({"threshold": "2013-01-20T00:00:00Z", "data_latency": "2h"}, "not both"),
])
def test_trigger_args_errors_name_the_problem(data, message):
    with pytest.raises(InvalidInput, match=message):
        inputs.trigger_args(data)


def test_instant_must_be_a_hudi_instant_time():
    assert inputs.parse_instant("20130120020000000") == "20130120020000000"
    with pytest.raises(InvalidInput, match="not a Hudi instant time"):
        inputs.parse_instant("2013-01-20")
    with pytest.raises(InvalidInput, match="instant is required"):
        inputs.parse_instant(None)


def test_table_path_must_stay_inside_the_roots(tmp_path, settings):
    root = tmp_path / "root"
    (root / "t").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    settings.TIDEMARK_TABLE_ROOTS = [str(root)]
    assert inputs.table_path(str(root / "t")) == str(root / "t")
    with pytest.raises(InvalidInput, match="outside the allowed table roots"):
        inputs.table_path(str(tmp_path / "outside"))
    with pytest.raises(InvalidInput, match="outside the allowed table roots"):
        inputs.table_path(str(root / "escape"))  # a symlink cannot leave the allow-list
    with pytest.raises(InvalidInput, match="does not exist"):
        inputs.table_path(str(root / "missing"))
    with pytest.raises(InvalidInput, match="must be absolute"):
        inputs.table_path("relative/path")


def test_table_roots_and_paths_on_object_storage(tmp_path, settings):
    from engine import split_locations

    roots = split_locations(f"{tmp_path}:s3://lake/prod,s3://other")
    assert roots == [str(tmp_path), "s3://lake/prod", "s3://other"]
    settings.TIDEMARK_TABLE_ROOTS = roots
    assert inputs.table_path("s3://lake/prod/flights/") == "s3://lake/prod/flights"
    assert inputs.table_path("s3://other/t") == "s3://other/t"
    for outside in ("s3://lake/production/t", "s3://lake/prod/../secret/t", "s3://elsewhere/t"):
        with pytest.raises(inputs.InvalidInput, match="outside the allowed table roots"):
            inputs.table_path(outside)
    with pytest.raises(inputs.InvalidInput, match="missing slash"):
        inputs.table_path("s3:/lake/prod/t")
