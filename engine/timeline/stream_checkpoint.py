"""A streaming sink's checkpoints on the timeline: which micro-batch each query last committed, and its watermark.

Each micro-batch the `tidemark` streaming sink commits is one deltacommit whose extraMetadata carries Hudi's
streaming sink checkpoint (HoodieStreamingSink / CommitUtils.getCheckpointValueAsString in Java):

    "_hudi_streaming_sink_checkpoint": "{\"<identifier>\":\"<batchId>\"}"

keyed by `hoodie.datasource.write.streaming.checkpoint.identifier` (Java's default `default_single_writer`), so
Java's sink resuming on the table reads it; and Tidemark's own keys `tidemark.stream.queryId` (Spark's query id,
which survives restarts on the same checkpoint location), `tidemark.stream.batchId` and `tidemark.stream.watermark`
(the greatest event time, epoch millis, the query has written so far).

Only the active timeline is searched: once archived, a query's checkpoints are "not found" (None), and the
caller decides what that means (the sink also keeps its last commit next to Spark's checkpoint).
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from engine.io.naming import instant_to_millis
from engine.timeline.instants import DELTACOMMIT, Instant, Timeline, TimelineError

SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"
IDENTIFIER_OPTION = "hoodie.datasource.write.streaming.checkpoint.identifier"
DEFAULT_IDENTIFIER = "default_single_writer"
QUERY_ID_KEY = "tidemark.stream.queryId"
BATCH_ID_KEY = "tidemark.stream.batchId"
WATERMARK_KEY = "tidemark.stream.watermark"


@dataclass(frozen=True)
class StreamCheckpoint:
    """One committed micro-batch as its deltacommit records it."""

    instant: str
    identifier: str
    batch_id: int
    query_id: str | None          # None: a commit of Java's sink (no query id recorded)
    watermark_ms: int | None
    completed_ms: int             # when the deltacommit completed (epoch millis)


def checkpoint_value(identifier: str, batch_id: int) -> str:
    """The value of `_hudi_streaming_sink_checkpoint`: a JSON map of the identifier to the batch id (a string)."""
    return json.dumps({identifier: str(batch_id)}, separators=(",", ":"))


def checkpoints(timeline: Timeline) -> Iterator[StreamCheckpoint]:
    """Every streaming checkpoint on the active timeline, newest first (one per identifier a commit names)."""
    for inst in reversed(timeline.completed()):
        if inst.action != DELTACOMMIT:
            continue
        try:
            extra = timeline.commit_metadata(inst).extra
        except (TimelineError, FileNotFoundError):   # archived or rolled back since the listing
            continue
        yield from _parsed(timeline, inst, extra)


def _parsed(timeline: Timeline, inst: Instant, extra: Mapping[str, str]) -> Iterator[StreamCheckpoint]:
    batches = sink_batches(extra)
    if not batches:
        return
    # A completed file that vanished since the listing (archived, rolled back) has no time: its requested time
    # is the nearest one known.
    done = timeline.completed_at_ms(inst) or instant_to_millis(inst.timestamp)
    for identifier, batch in batches.items():
        yield StreamCheckpoint(inst.timestamp, identifier, batch, extra.get(QUERY_ID_KEY) or None,
                               watermark_of(extra), done)


def sink_batches(extra: Mapping[str, str]) -> dict[str, int]:
    """identifier -> batch id of the sink checkpoint a commit's extraMetadata holds ({} when none or malformed)."""
    raw = extra.get(SINK_CHECKPOINT_KEY)
    if not raw:
        return {}
    try:
        ids = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(ids, dict):
        return {}
    return {str(k): int(v) for k, v in ids.items() if str(v).lstrip("-").isdigit()}


def watermark_of(extra: Mapping[str, str]) -> int | None:
    """The stream's watermark (epoch millis) a commit's extraMetadata records; None when absent or malformed."""
    value = extra.get(WATERMARK_KEY)
    return int(value) if value and value.lstrip("-").isdigit() else None


def last_checkpoint(timeline: Timeline, identifier: str, query_id: str | None = None) -> StreamCheckpoint | None:
    """The newest checkpoint of `identifier` (and of `query_id` when given); None when the active timeline has
    none (never written, or archived)."""
    for cp in checkpoints(timeline):
        if cp.identifier == identifier and (query_id is None or cp.query_id == query_id):
            return cp
    return None


def latest_watermark(timeline: Timeline) -> int | None:
    """The watermark of the newest streaming commit that records one (each is its query's running maximum)."""
    return next((cp.watermark_ms for cp in checkpoints(timeline) if cp.watermark_ms is not None), None)
