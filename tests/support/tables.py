"""Small tables built through the public `Table` API (shared by the API, lock and CLI tests)."""
from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from engine import CompactionPlan, Table

DAYS = ("01", "02", "03")
THRESHOLD = "2024-01-02T12:00:00Z"   # between day 2 and day 3: two logs compacted, one carried


def day_file(tmp: Path, i: int, day: str, keys: int = 3, extra: Mapping[str, str] | None = None) -> str:
    """One JSON-lines batch: keys k0.. with sequence i, the `extra` columns (before `ts`, in order) and event
    times on 2024-01-<day>."""
    src = tmp / f"batch{i}.jsonl"
    rows = ({"id": f"k{k}", "seq": i, **(extra or {}), "ts": f"2024-01-{day}T0{k}:00:00Z"} for k in range(keys))
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(src)


def create_table(path: Path, settings: Mapping[str, str] | None = None) -> Table:
    return Table.create(str(path), name=path.name, record_keys=["id"], ordering_field="seq", event_time_field="ts",
                        settings={"hoodie.bucket.index.num.buckets": "1", **(settings or {})})


def three_day_table(tmp: Path, settings: Mapping[str, str] | None = None, name: str = "t") -> Table:
    """A one-file-group table with one log per day (2024-01-01, -02, -03)."""
    table = create_table(tmp / name, settings)
    for i, day in enumerate(DAYS):
        table.write(day_file(tmp, i, day))
    return table


def table_with_plan(path: str, *, table_version: int = 6, buckets: int = 2) -> tuple[Table, CompactionPlan]:
    """A table at `path` (the folder may exist, empty) with `buckets` file groups, one log per day
    (2024-01-01..03) in each, and a compaction plan pending at THRESHOLD, scheduled through the engine as
    `tidemark compaction schedule` does. Returns the table and its plan."""
    table = Table.create(path, name=Path(path).name, record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={"hoodie.bucket.index.num.buckets": str(buckets)}, table_version=table_version)
    sources = Path(path).parent / f"{Path(path).name}-sources"
    sources.mkdir(exist_ok=True)
    for i, day in enumerate(DAYS):
        table.write(day_file(sources, i, day, keys=8))
    return table, table.schedule_compaction(threshold=THRESHOLD)


def table_copy(src: Path, dest: Path) -> Path:
    """A private copy of a table (symlinks kept as links, so carried-over logs stay carried-over)."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def stream_commit(path: str, extra: Mapping[str, str]) -> str:
    """A completed deltacommit that writes no file and carries `extra` in its extraMetadata, published through the
    engine's timeline helpers as a streaming writer's micro-batch with nothing new would (either layout). Returns
    its instant."""
    from engine.io.naming import new_instant_time
    from engine.timeline import instants

    schema = instants.Timeline.load(path).latest_schema() or ""
    ts = new_instant_time()
    instants.create_requested(path, ts, instants.DELTACOMMIT)
    instants.transition_to_inflight(path, ts, instants.DELTACOMMIT)
    instants.complete(path, ts, instants.DELTACOMMIT,
                      instants.commit_metadata_json({}, schema=schema, operation_type="UPSERT", extra=dict(extra)))
    return ts


STREAM_WATERMARK_MS = 1_704_196_800_000   # 2024-01-02T12:00:00Z: the watermark `living_table`'s stream recorded


def living_table(path: Path, sources: Path) -> Table:
    """A table at `path` (the folder may exist, empty) that lives: three writes, a compaction of all of them, a
    fourth write, a clean keeping one commit (it deletes the three folded logs), then a stream's micro-batch
    (query `orders-q`, batch 12, watermark STREAM_WATERMARK_MS). Batches are written into `sources`."""
    table = create_table(path)
    for i, day in enumerate(DAYS):
        table.write(day_file(sources, i, day))
    table.schedule_compaction(strategy="unbounded")
    table.run_compaction()
    table.write(day_file(sources, 4, "04"))
    assert table.clean(retain_commits=1).instant is not None
    stream_commit(table.path, {"tidemark.stream.queryId": "orders-q", "tidemark.stream.batchId": "12",
                               "tidemark.stream.watermark": str(STREAM_WATERMARK_MS),
                               "_hudi_streaming_sink_checkpoint": json.dumps({"orders-q": "12"})})
    return table
