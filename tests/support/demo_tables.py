"""The flights demo at either Hudi table version (engine.demo.run_demo writes version 6, the default)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine import Table
from engine.demo import (
    DEFAULT_BATCH_HOURS,
    DEMO_SETTINGS,
    EVENT_TIME,
    KEY,
    ORDERING,
    PARTITION,
    demo_batches,
    load_flights,
    write_batch,
)


def demo_table(path: Path, spark: Any, *, batches: int, table_version: int) -> Path:
    """Stream `batches` windows of the 2013 flights into a new table at `path` of `table_version` (6 or 8): the
    same table, settings and writes as `tidemark demo`, only the on-disk version differs."""
    table = Table.create(str(path), name="flights", record_keys=[KEY], partition_fields=[PARTITION],
                         ordering_field=ORDERING, event_time_field=EVENT_TIME, merge_mode="event_time",
                         hive_style=True, settings=dict(DEMO_SETTINGS), table_version=table_version)
    for _, rows, operation in demo_batches(load_flights(None), DEFAULT_BATCH_HOURS, batches):
        write_batch(table, spark, rows, operation)
    return path
