"""Switching Hudi's metadata table off before Tidemark's first instant on a table that has one, as a Java 1.x writer
with `hoodie.metadata.enable=false` does (HoodieTable.maybeDeleteMetadataTable → HoodieTableMetadataUtil.
deleteMetadataTable → HoodieTableConfig.clearMetadataPartitions): both partition keys emptied in hoodie.properties
first, then `.hoodie/metadata` deleted, no backup; every other property kept."""
from __future__ import annotations

import os
from pathlib import Path

from engine.config.layout import create_table
from engine.config.properties import load_table_config, parse_properties
from engine.timeline import metadata_table
from tests.support.fixtures import unzip_fixture
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.table_model import E, write


def _props(path: str) -> dict[str, str]:
    return parse_properties((Path(path) / ".hoodie" / "hoodie.properties").read_text())


def test_java_tables_metadata_table_is_switched_off_as_java_does(tmp_path):
    path = str(unzip_fixture("v8_trips_8i3u1d", tmp_path / "v8"))
    before = _props(path)
    assert "files" in before[metadata_table.PARTITIONS_KEY].split(",")
    snap = rows_by_key(hudi_read(path))
    assert metadata_table.disable(path)
    after = _props(path)
    # Both keys stay, emptied (Java's setValue(..., "") of each); nothing else changes (index definitions included).
    assert after[metadata_table.PARTITIONS_KEY] == "" and after[metadata_table.INFLIGHT_KEY] == ""
    assert {k: v for k, v in after.items() if "metadata.partitions" not in k} == \
        {k: v for k, v in before.items() if "metadata.partitions" not in k}
    assert not os.path.exists(os.path.join(path, ".hoodie", "metadata"))
    assert not [n for n in os.listdir(os.path.join(path, ".hoodie")) if n.startswith(".metadata_")]   # no backup
    assert load_table_config(path).version == 8
    assert rows_by_key(hudi_read(path)) == snap            # hudi 0.5.0 now lists storage, and reads the same
    assert not metadata_table.disable(path)                 # nothing left to switch off: nothing is written


def test_a_table_without_metadata_table_is_left_alone(tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="ts", event_time_field="ts", table_version=8,
                 settings={"hoodie.bucket.index.num.buckets": "1"})
    write(path, "upsert", [(1, E)])
    raw = (Path(path) / ".hoodie" / "hoodie.properties").read_bytes()
    assert not metadata_table.disable(path)
    assert (Path(path) / ".hoodie" / "hoodie.properties").read_bytes() == raw


def test_a_half_built_metadata_table_is_removed_too(tmp_path):
    """Java's disabled writer acts only when `hoodie.table.metadata.partitions` is non-empty; a metadata table whose
    bootstrap died (only `.inflight` set, a partial folder) it leaves for an enabled writer to rebuild. We remove it
    as well: it is derived data, no reader uses it, and left in place it would miss every file we add should a Java
    indexer later mark it complete."""
    path = str(unzip_fixture("v8_trips_8i3u1d", tmp_path / "v8"))
    cfg = load_table_config(path)
    cfg.props[metadata_table.PARTITIONS_KEY] = ""
    cfg.props[metadata_table.INFLIGHT_KEY] = "files"
    from engine.config.properties import save_table_config

    save_table_config(cfg)
    assert metadata_table.disable(path)
    assert _props(path)[metadata_table.INFLIGHT_KEY] == ""
    assert not os.path.exists(os.path.join(path, ".hoodie", "metadata"))
