"""Creating a table on storage: `.hoodie/` folders, hoodie.properties, partition metadata."""
from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping

from engine.config.discovery import enclosing_table
from engine.config.properties import (
    DEFAULT_TABLE_VERSION,
    HOODIE_DIR,
    MERGE_MODES,
    PROPERTIES_FILE,
    TableConfig,
    load_table_config,
    new_table_props,
    save_table_config,
)
from engine.config.resolve import refuse_impossible_settings
from engine.errors import ConfigError
from engine.io import storage

# Folders Java Hudi creates with a table; readers tolerate their absence, Java tools expect them.
HOODIE_SUBDIRS = (".aux", ".aux/.bootstrap/.partitions", ".aux/.bootstrap/.fileids", ".temp", ".schema", "archived")
# Version 8 keeps its timeline and the LSM history one folder down, and has no `archived/`.
V8_SUBDIRS = (".aux", ".aux/.bootstrap/.partitions", ".aux/.bootstrap/.fileids", ".temp", ".schema", "timeline",
              "timeline/history")
PARTITION_METAFILE = ".hoodie_partition_metadata"


def create_table(path: str, *, name: str, record_keys: list[str], ordering_field: str, event_time_field: str,
                 partition_fields: list[str] | None = None, merge_mode: str = "event_time",
                 hive_style: bool = False, settings: Mapping[str, str] | None = None,
                 table_version: int = DEFAULT_TABLE_VERSION) -> TableConfig:
    """Create an empty MOR table (version 6, 8: Hudi 1.0, or 9: Hudi 1.1); refuses to overwrite an existing one."""
    if storage.exists(storage.join(path, HOODIE_DIR, PROPERTIES_FILE)):
        raise ConfigError(f"a Hudi table already exists at {path}")
    refuse_impossible_settings(path, settings or {})
    outer = enclosing_table(path)
    if outer is not None:
        # its files would sit in the outer table's partitions, where the outer table's readers and compactions
        # would take them for its own
        raise ConfigError(f"{path} is inside the Hudi table at {outer}; create the table outside it")
    if not record_keys:
        raise ConfigError("at least one record key field is required")
    if merge_mode not in MERGE_MODES:
        raise ConfigError(f"unknown merge mode {merge_mode!r}; use one of {', '.join(MERGE_MODES)}")
    props = new_table_props(name=name, record_keys=record_keys, partition_fields=partition_fields or [],
                            ordering_field=ordering_field, event_time_field=event_time_field,
                            merge_mode=MERGE_MODES[merge_mode], hive_style=hive_style, settings=settings,
                            table_version=table_version)
    for sub in HOODIE_SUBDIRS if table_version == 6 else V8_SUBDIRS:
        storage.make_dirs(storage.join(path, HOODIE_DIR, sub))
    cfg = TableConfig(base_path=path, props=props)
    save_table_config(cfg)
    return load_table_config(path)


def write_partition_metadata(base_path: str, partition: str, instant: str) -> None:
    """Write `<partition>/.hoodie_partition_metadata` once (first writer wins, atomically)."""
    directory = storage.join(base_path, partition) if partition else base_path
    target = storage.join(directory, PARTITION_METAFILE)
    if storage.exists(target):
        return
    storage.make_dirs(directory)
    depth = len([p for p in partition.split("/") if p]) if partition else 0
    now = dt.datetime.now(dt.UTC)
    text = f"#partition metadata\n#{now:%a %b %d %H:%M:%S UTC %Y}\ncommitTime={instant}\npartitionDepth={depth}\n"
    if storage.is_remote(target):
        storage.write_bytes(target, text.encode("utf-8"))   # one PUT: whole or absent; same text either way
        return
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, target)
