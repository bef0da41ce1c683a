"""A table's streaming writer, from the timeline: last batch, query, watermark and how long ago it wrote."""
from __future__ import annotations

import datetime as dt
import time

from engine.results import StreamStatus, from_ms, utc
from engine.timeline.instants import Timeline
from engine.timeline.stream_checkpoint import checkpoints


def stream_status(base_path: str, now_ms: int | None = None) -> StreamStatus | None:
    """The newest streaming commit on the active timeline as a status; None when there is none (no stream ever
    wrote, or its commits were archived)."""
    latest = next(checkpoints(Timeline.load(base_path)), None)
    if latest is None:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    lag_ms = max(now - latest.completed_ms, 0)
    return StreamStatus(query_id=latest.query_id, identifier=latest.identifier, last_batch_id=latest.batch_id,
                        last_instant=latest.instant, last_write=utc(latest.completed_ms),
                        watermark=from_ms(latest.watermark_ms), lag=dt.timedelta(milliseconds=lag_ms), lag_ms=lag_ms)
