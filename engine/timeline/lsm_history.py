"""Writing layout 2's LSM history (`.hoodie/timeline/history/`) as Java 1.x's LSMTimelineWriter does.

Archived instants go into a Parquet file `<min>_<max>_0.parquet` of HoodieLSMTimelineInstant records (instantTime,
completionTime, action, metadata = the completed instant file's bytes, plan = its requested file's bytes,
version), then a new manifest `manifest_<n+1>` (JSON `{"files": [{"fileName", "fileLen"}]}` listing every live
file) and last `_version_` (n+1): a reader takes `_version_`, or the greatest manifest when a crash left the
version file behind, so a half-written snapshot is never read. Once a layer holds `hoodie.timeline.compaction.
batch.size` (10) files, they are merged into one file of the next layer (Java's compaction of the LSM tree), so
the history stays a few dozen files however many instants it holds. Files and manifests no current snapshot
needs are removed after the new snapshot is published. Reading is engine.timeline.layout_v8's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from engine.io import storage
from engine.timeline import layout_v8
from engine.timeline.instants import Instant, State

COMPACTION_BATCH = 10   # hoodie.timeline.compaction.batch.size
_KEEP_MANIFESTS = 2

SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()),
    pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()),
    pa.field("plan", pa.binary()),
    pa.field("version", pa.int32(), nullable=False),
])


@dataclass(frozen=True)
class LsmInstant:
    """One archived instant as a HoodieLSMTimelineInstant record."""

    instant_time: str
    completion_time: str | None
    action: str
    metadata: bytes | None
    plan: bytes | None


def append(history: str, instants: list[LsmInstant]) -> list[str]:
    """Add `instants` to the history as a new layer-0 file and publish the next snapshot; returns the files
    written (data file, manifest, version file, and any compacted file)."""
    storage.make_dirs(history)
    files = layout_v8.manifest_files(history)
    version = layout_v8.snapshot_version(history) or 0
    name = _write_file(history, instants, 0)
    files = [*files, name]
    written = [name]
    files, merged = _compact(history, files)
    written += merged
    written += _publish(history, files, version + 1)
    _drop_unreferenced(history, files, version + 1)
    return written


def _write_file(history: str, instants: list[LsmInstant], layer: int) -> str:
    rows = sorted(instants, key=lambda i: i.instant_time)
    table = pa.table({
        "instantTime": [i.instant_time for i in rows], "completionTime": [i.completion_time for i in rows],
        "action": [i.action for i in rows], "metadata": [i.metadata for i in rows], "plan": [i.plan for i in rows],
        "version": pa.array([1] * len(rows), pa.int32()),
    }, schema=SCHEMA)
    name = f"{rows[0].instant_time}_{rows[-1].instant_time}_{layer}.parquet"
    with storage.open_output(storage.join(history, name)) as out:
        pq.write_table(table, out)
    return name


def _compact(history: str, files: list[str]) -> tuple[list[str], list[str]]:
    """Merge a layer's files into one of the next layer once it holds COMPACTION_BATCH of them, layer by layer."""
    written: list[str] = []
    layer = 0
    while any(_layer(f) >= layer for f in files):
        at = [f for f in files if _layer(f) == layer]
        if len(at) >= COMPACTION_BATCH:
            merged = pa.concat_tables([pq.read_table(storage.parquet_source(storage.join(history, f))) for f in at])
            columns = [merged.column(c).to_pylist() for c in ("instantTime", "completionTime", "action", "metadata",
                                                               "plan")]
            name = _write_file(history, [LsmInstant(*row) for row in zip(*columns)], layer + 1)
            files = [f for f in files if f not in at] + [name]
            written.append(name)
        layer += 1
    return files, written


def _layer(name: str) -> int:
    span = layout_v8.history_file_range(name)
    return span[2] if span is not None else -1


def _publish(history: str, files: list[str], version: int) -> list[str]:
    entries = [{"fileName": f, "fileLen": storage.size(storage.join(history, f))} for f in files]
    manifest = storage.join(history, f"manifest_{version}")
    storage.write_bytes(manifest, json.dumps({"files": entries}).encode())
    marker = storage.join(history, "_version_")
    storage.write_bytes(marker, str(version).encode())
    return [manifest, marker]


def _drop_unreferenced(history: str, live: list[str], version: int) -> None:
    """Remove data files no kept manifest lists and manifests older than the last _KEEP_MANIFESTS."""
    keep = set(live)
    for older in range(version - _KEEP_MANIFESTS + 1, version):
        keep.update(_listed(history, older))
    for name in storage.list_names_if_dir(history):
        span = layout_v8.history_file_range(name)
        if span is not None and name not in keep:
            storage.remove_if_exists(storage.join(history, name))
        elif name.startswith("manifest_") and name[9:].isdigit() and int(name[9:]) <= version - _KEEP_MANIFESTS:
            storage.remove_if_exists(storage.join(history, name))


def _listed(history: str, version: int) -> list[str]:
    raw = storage.read_optional(storage.join(history, f"manifest_{version}"))
    if not raw:
        return []
    try:
        return [e["fileName"] for e in json.loads(raw).get("files", [])]
    except (ValueError, KeyError, TypeError):
        return []


def instants(history: str) -> list[Instant]:
    """Every instant the current snapshot of the history holds (completed), in file order."""
    out: list[Instant] = []
    for name in layout_v8.manifest_files(history):
        try:
            table = pq.read_table(storage.parquet_source(storage.join(history, name)),
                                  columns=["instantTime", "completionTime", "action"])
        except (pa.ArrowInvalid, OSError, KeyError) as exc:
            raise layout_v8.HistoryError(f"{storage.join(history, name)}: unreadable LSM history file: {exc}") from None
        for ts, done, action in zip(*(table.column(c).to_pylist() for c in ("instantTime", "completionTime", "action"))):
            if ts and action:
                out.append(Instant(ts, action, State.COMPLETED, completion_time=done))
    return out
