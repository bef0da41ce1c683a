"""Small event-time batches as Parquet files, one day apart, for planning tests (which logs hold which days)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Table

DAY = 86_400_000
T0 = 1_767_225_600_000   # 2026-01-01


def day_batch(tmp: Path, i: int, day: int, keys: range = range(0, 40)) -> str:
    """Batch `i` (its ordering value) of `keys`, event times on `day` after T0, partitioned "a"/"b" by key."""
    t = pa.table({"id": [f"k{k:03d}" for k in keys], "p": ["a" if k % 2 else "b" for k in keys],
                  "seq": pa.array([i] * len(keys), pa.int64()),
                  "ts": pa.array([T0 + day * DAY + k for k in keys], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))})
    path = str(tmp / f"b{i}.parquet")
    pq.write_table(t, path)
    return path


def iso_day(day: float) -> str:
    """T0 plus `day` days, as the ISO-8601 threshold a plan takes."""
    return dt.datetime.fromtimestamp((T0 + day * DAY) / 1000, dt.UTC).isoformat()


def day_table(location: str, version: int) -> Table:
    """An event-time table partitioned by "p", two buckets a partition, for `day_batch`es."""
    return Table.create(location, name="t", record_keys=["id"], partition_fields=["p"], ordering_field="seq",
                        event_time_field="ts", table_version=version,
                        settings={"hoodie.bucket.index.num.buckets": "2"})
