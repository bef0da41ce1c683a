"""The per-partition backlog heatmap of a sample: uncompacted log bytes per partition × event-time bucket.

Read through the engine (`Table.tide(by_partition=True)`: headers and write stats, nothing decoded) with a
bucket wide enough that the backlog's event-time span fits in at most `COLUMNS` columns, and bounded for the
page: the `ROWS` partitions with the most backlog get a row each, the rest share one "other partitions" row.
Stored compactly on the sample (only the latest keeps it, like the tide):

    {"bucket_ms": 86400000, "rows": ["origin=JFK", ...], "cells": [[row, start_ms | None, files, bytes], ...]}

`start_ms` None is the bucket of logs whose event time is unknown without decoding.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from engine import Table

ROWS = 40
COLUMNS = 48
BUCKETS_S = (3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400)
OTHERS = "(other partitions)"


def bucket_seconds(tide: list[dict[str, Any]]) -> int:
    """The narrowest bucket (1h, 6h, 1d, 7d, 30d, 1y) putting the table's logged event-time span in ≤ COLUMNS."""
    starts = [_ms(b["start"]) for b in tide if b.get("start")]
    ends = [_ms(b["end"]) for b in tide if b.get("end")]
    if not starts:
        return BUCKETS_S[0]
    span_s = (max(ends) - min(starts)) / 1000
    return next((b for b in BUCKETS_S if span_s / b <= COLUMNS), BUCKETS_S[-1])


def read(engine_table: Table, tide: list[dict[str, Any]]) -> dict[str, Any]:
    """The heatmap of `engine_table`, its bucket chosen from the table-wide `tide` (1h buckets)."""
    bucket_s = bucket_seconds(tide)
    cells = engine_table.tide(bucket=dt.timedelta(seconds=bucket_s), by_partition=True)
    by_partition: dict[str, int] = {}
    for c in cells:
        name = getattr(c, "partition", "")
        by_partition[name] = by_partition.get(name, 0) + c.log_bytes
    ranked = sorted(by_partition, key=lambda p: (-by_partition[p], p))
    rows = ranked[:ROWS] + ([OTHERS] if len(ranked) > ROWS else [])
    index = {p: i for i, p in enumerate(ranked[:ROWS])}
    merged: dict[tuple[int, int | None], list[int]] = {}
    for c in cells:
        row = index.get(getattr(c, "partition", ""), ROWS)
        start = _ms(c.start) if c.start else None
        cell = merged.setdefault((row, start), [0, 0])
        cell[0] += c.log_files
        cell[1] += c.log_bytes
    return {"bucket_ms": bucket_s * 1000, "rows": rows,
            "cells": [[row, start, files, size] for (row, start), (files, size) in sorted(
                merged.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or 0))]}


def _ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1000)
    return int(dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
