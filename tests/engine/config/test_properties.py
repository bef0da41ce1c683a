"""hoodie.properties round trip, Java compatibility, and config validation with clear errors."""
from __future__ import annotations

import pytest

from engine.config.layout import create_table
from engine.config.properties import load_table_config, parse_config_args, parse_duration_ms, parse_properties, table_checksum
from engine.errors import ConfigError, TableNotFoundError


def test_checksum_matches_java_fixtures():
    assert table_checksum("default", "v6_trips_8i1u") == "3843273058"
    assert table_checksum("", "trips") == "3761586722"


def test_java_properties_escapes_round_trip(tmp_path):
    cfg = create_table(str(tmp_path / "t"), name="t", record_keys=["id", "k2"], partition_fields=["p"],
                       ordering_field="seq", event_time_field="ts", merge_mode="commit_time", hive_style=True,
                       settings={"hoodie.logfile.max.size": "1000"})
    text = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=6" in text and "hoodie.timeline.layout.version=1" in text
    assert cfg.record_key_fields == ["id", "k2"] and cfg.partition_fields == ["p"]
    assert cfg.merge_mode == "COMMIT_TIME_ORDERING" and cfg.hive_style
    assert cfg.props["hoodie.table.keygenerator.class"].endswith("ComplexKeyGenerator")
    assert cfg.setting("hoodie.logfile.max.size") == 1000
    assert parse_properties("a\\:b=c\\=d\n# comment\nx = y\n") == {"a:b": "c=d", "x": "y"}


def test_java_fixture_properties(fixture_table):
    cfg = load_table_config(str(fixture_table("v6_trips_8i1u")))
    assert cfg.name == "v6_trips_8i1u" and cfg.ordering_field == "ts" and cfg.partition_fields == ["city"]
    assert cfg.merge_mode == "COMMIT_TIME_ORDERING"  # OverwriteWithLatestAvroPayload


@pytest.mark.parametrize("pairs,message", [
    (["hoodie.logfile.max.sise=10"], "unknown config key 'hoodie.logfile.max.sise'"),
    (["hoodie.logfile.max.size=-1"], "malformed value '-1' for hoodie.logfile.max.size"),
    (["hoodie.logfile.data.block.format=orc"], "must be one of avro, parquet"),
    (["novalue"], "expected KEY=VALUE"),
])
def test_bad_config_is_refused(pairs, message):
    with pytest.raises(ConfigError, match=message):
        parse_config_args(pairs)


def test_durations():
    assert parse_duration_ms("2h") == 7_200_000 and parse_duration_ms("90") == 90_000
    with pytest.raises(ValueError, match="malformed duration"):
        parse_duration_ms("two hours")


def test_missing_table_and_duplicate_create(tmp_path):
    with pytest.raises(TableNotFoundError, match="no Hudi table"):
        load_table_config(str(tmp_path / "nothing"))
    create_table(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="s", event_time_field="e")
    with pytest.raises(ConfigError, match="already exists"):
        create_table(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="s", event_time_field="e")
