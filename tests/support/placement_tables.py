"""A small bucketed table and its batches, written both in-process and on Spark by the placement tests and the
tests that compare the two paths (engine.placement)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from engine import Table

INSTANTS = ("20260101000000000", "20260101000100000", "20260101000200000")


def rows(keys: range | list[int], seq: int) -> pa.Table:
    ks = np.asarray(list(keys))
    return pa.table({
        "id": [f"k{k:05d}" for k in ks],
        "region": ["eu" if k % 3 else "us" for k in ks],
        "seq": pa.array(np.full(len(ks), seq), pa.int64()),
        "ts": pa.array(1_700_000_000_000 + ks * 1000 + seq, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "amount": pa.array(ks * 0.5 + seq),
    })


def new_table(path: Path, block_format: str = "avro") -> Table:
    return Table.create(str(path), name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                        event_time_field="ts", hive_style=True,
                        settings={"hoodie.bucket.index.num.buckets": "4",
                                  "hoodie.logfile.data.block.format": block_format})
