"""Rows of a partitioned, event-time table a day at a time: keys, day, sequence number (the ordering field)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

DAY_MS = 86_400_000
DAY0 = 1_767_225_600_000   # 2026-01-01T00:00:00Z


def day_rows(keys: range, day: int, seq: int):
    ks = np.asarray(list(keys))
    return pa.table({"id": [f"k{k:04d}" for k in ks], "region": ["eu" if k % 2 else "us" for k in ks],
                     "seq": pa.array(np.full(len(ks), seq), pa.int64()),
                     "ts": pa.array(DAY0 + day * DAY_MS + ks * 1000, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                     "v": pa.array(ks * 0.5 + seq)})
