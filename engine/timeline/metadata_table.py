"""Hudi's metadata table (MDT, `.hoodie/metadata`) on tables Tidemark writes into: switched off first.

Hudi 1.x tables (version 8) enable the MDT by default, and hudi 0.5.0 then lists files from its `files`
partition instead of storage (docs/HUDI-FORMAT.md §4.1a, measured: new base and log files we add are invisible to it
while the MDT is in place). Tidemark does not maintain the MDT, so before its first instant on such a table it
does what Java's "disable the metadata table" does: `hoodie.table.metadata.partitions` (and `.inflight`) emptied
in hoodie.properties, then `.hoodie/metadata` deleted. The MDT holds only derived data (listings, column stats,
record and secondary indexes): nothing committed is lost, every reader falls back to listing storage, and a Java
writer with the MDT enabled rebuilds it on its next commit.
"""
from __future__ import annotations

from engine.config.properties import load_table_config, save_table_config
from engine.io import storage

PARTITIONS_KEY = "hoodie.table.metadata.partitions"
INFLIGHT_KEY = "hoodie.table.metadata.partitions.inflight"
METADATA_DIR = "metadata"


def is_enabled(props: dict[str, str], metadata_exists: bool) -> bool:
    return metadata_exists or bool(props.get(PARTITIONS_KEY) or props.get(INFLIGHT_KEY))


def disable(base_path: str) -> bool:
    """Switch the MDT off (properties first: from then on no reader uses it); True when there was one."""
    cfg = load_table_config(base_path)
    folder = storage.join(cfg.hoodie_dir(), METADATA_DIR)
    exists = storage.exists(folder) or bool(storage.list_names_if_dir(folder))
    if not is_enabled(cfg.props, exists):
        return False
    if cfg.props.get(PARTITIONS_KEY) or cfg.props.get(INFLIGHT_KEY):
        cfg.props[PARTITIONS_KEY] = ""
        cfg.props[INFLIGHT_KEY] = ""
        save_table_config(cfg)
    if exists:
        storage.remove_tree(folder)
    return True
