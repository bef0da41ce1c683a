"""The table page's per-partition backlog heatmap, laid out from the latest sample's `backlog_heatmap`
(tasks.heatmap): one row per partition (most backlog first), one column per event-time bucket from the oldest
to the newest logged (empty buckets kept, so gaps in event time show), a last column for logs of unknown event
time; each cell's shade (0-5) grows with the logarithm of its log bytes, its title says what it holds."""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from webapp.tables.templatetags.tidemark import filesize

LEVELS = 5
LABELS = 8     # at most this many column labels under the grid


@dataclass
class Cell:
    level: int
    title: str


@dataclass
class Row:
    name: str
    cells: list[Cell] = field(default_factory=list)


@dataclass
class Grid:
    bucket: str
    columns: list[str]          # a label, or "" where the header stays blank
    rows: list[Row]


def layout(stored: dict[str, Any] | None) -> Grid | None:
    """The grid to draw, None when the sample has no backlog heatmap (old sample, or no log backlog)."""
    if not stored or not stored.get("cells"):
        return None
    bucket_ms = int(stored["bucket_ms"])
    cells = stored["cells"]
    starts = sorted({c[1] for c in cells if c[1] is not None})
    columns: list[int | None] = list(range(starts[0], starts[-1] + 1, bucket_ms)) if starts else []
    if any(c[1] is None for c in cells):
        columns.append(None)
    at = {(row, start): (files, size) for row, start, files, size in cells}
    peak = max(size for *_, size in cells) or 1
    rows = []
    for i, name in enumerate(stored["rows"]):
        row = Row(name or "(unpartitioned)")
        for start in columns:
            files, size = at.get((i, start), (0, 0))
            row.cells.append(Cell(_level(size, peak), _title(row.name, start, bucket_ms, files, size)))
        rows.append(row)
    every = max(1, math.ceil(len(columns) / LABELS))
    labels = ["unknown" if s is None else (_label(s, bucket_ms) if k % every == 0 else "")
              for k, s in enumerate(columns)]
    return Grid(_duration(bucket_ms), labels, rows)


def _level(size: int, peak: int) -> int:
    if size <= 0:
        return 0
    return max(1, min(LEVELS, math.ceil(LEVELS * math.log1p(size) / math.log1p(peak))))


def _when(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _label(ms: int, bucket_ms: int) -> str:
    return _when(ms).strftime("%b %-d %H:%M" if bucket_ms < 86_400_000 else "%b %-d %Y" if bucket_ms >= 30 * 86_400_000
                              else "%b %-d")


def _title(partition: str, start: int | None, bucket_ms: int, files: int, size: int) -> str:
    if start is None:
        when = "unknown event time"
    else:
        when = f"{_when(start):%Y-%m-%d %H:%M} → {_when(start + bucket_ms):%Y-%m-%d %H:%M} UTC"
    return f"{partition} · {when}: {files} log file{'s' if files != 1 else ''}, {filesize(size)}"


def _duration(ms: int) -> str:
    hours = ms // 3_600_000
    return f"{hours // 24} d" if hours % 24 == 0 else f"{hours} h"
