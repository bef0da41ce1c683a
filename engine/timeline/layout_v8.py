"""Timeline layout 2 (Hudi 1.x, table version 8): where instants live and how their files are named.

docs/HUDI-FORMAT.md §3.1 and §4.1a (fixture `v8_trips_8i3u1d`):
- the active timeline is `.hoodie/<hoodie.timeline.path>/` (default `timeline`), not `.hoodie/` itself;
- pending instants keep layout 1's names: `<requested>.<action>.requested` / `<requested>.<action>.inflight`;
- a completed instant is `<requested>_<completion>.<action>` (a compaction completes as `commit`), and every
  completed file is an Avro container (commit metadata included: a JSON file is refused by hudi 0.5.0);
- archived instants live in the LSM history `<timeline>/<hoodie.timeline.history.path>/` (default `history`):
  `_version_` names the current `manifest_<n>`, whose JSON lists Parquet files of archived instants
  (columns `instantTime`, `completionTime`, `action`, ...). Only their completion times matter to readers: a log
  file of an archived deltacommit still needs its completion time to find its slice.

This module knows names and folders only; `engine.timeline.instants.Timeline` is the one timeline type and
asks this module when the table's layout is 2.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import TidemarkError
from engine.io import storage

LAYOUT_VERSION = 2
DEFAULT_TIMELINE_DIR = "timeline"
DEFAULT_HISTORY_DIR = "history"

# <requested>_<completion>.<action> (completed) or <requested>.<action>[.requested|.inflight] (pending).
_COMPLETED_RE = re.compile(r"^(?P<ts>\d{14}|\d{17})_(?P<done>\d{14}|\d{17})\.(?P<action>[a-z]+)$")


@dataclass(frozen=True)
class CompletedName:
    """A parsed completed-instant file name of layout 2."""

    timestamp: str
    completion_time: str
    action: str


def parse_completed_name(name: str) -> CompletedName | None:
    """`<requested>_<completion>.<action>`, or None for any other name (pending files, history, temp files)."""
    m = _COMPLETED_RE.match(name)
    if m is None:
        return None
    return CompletedName(m.group("ts"), m.group("done"), m.group("action"))


def completed_name(ts: str, completion_time: str, action: str) -> str:
    return f"{ts}_{completion_time}.{action}"


def timeline_dir(hoodie_path: str, props: dict[str, str]) -> str:
    return storage.join(hoodie_path, props.get("hoodie.timeline.path") or DEFAULT_TIMELINE_DIR)


def history_dir(timeline_path: str, props: dict[str, str]) -> str:
    return storage.join(timeline_path, props.get("hoodie.timeline.history.path") or DEFAULT_HISTORY_DIR)


class HistoryError(TidemarkError):
    """The LSM history of a v8 timeline is unreadable."""


def has_history(history_path: str) -> bool:
    """Whether any instant was archived into the LSM history (a snapshot version: `_version_`, or a manifest)."""
    return snapshot_version(history_path) is not None


_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")


def snapshot_version(history_path: str) -> int | None:
    """The history's current snapshot version, as Java's LSMTimeline.latestSnapshotVersion finds it: the integer in
    `_version_`; when that file is missing or unreadable (an archiver that died between writing a manifest and
    the version file), the greatest N of the `manifest_<N>` files; None when there is neither."""
    raw = storage.read_optional(storage.join(history_path, "_version_"))
    if raw is not None:
        try:
            return int(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            pass
    versions = [int(m.group(1)) for n in storage.list_names_if_dir(history_path) if (m := _MANIFEST_RE.match(n))]
    return max(versions, default=None)


def history_completion_times(history_path: str) -> dict[str, str]:
    """requested -> completion time of every archived instant in the current manifest's files ({} without
    history)."""
    out: dict[str, str] = {}
    for name in manifest_files(history_path):
        out.update(history_file_completion_times(storage.join(history_path, name)))
    return out


def manifest_files(history_path: str) -> list[str]:
    """The history files the current manifest lists ([] without history). Java writes the manifest as
    {"files": [{"fileName", "fileLen"}]} (HoodieLSMTimelineManifest; an empty file is an empty manifest); hudi-rs's
    model names them {"entries": [{"file_name", ...}]}: both are accepted. A manifest named by `_version_` that is
    missing is an error, as in Java."""
    version = snapshot_version(history_path)
    if version is None:
        return []
    manifest_path = storage.join(history_path, f"manifest_{version}")
    raw = storage.read_optional(manifest_path)
    if raw is None:
        raise HistoryError(f"{manifest_path}: the LSM timeline manifest named by _version_ does not exist")
    if not raw.strip():
        return []
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise HistoryError(f"{manifest_path}: not JSON ({exc})") from None
    entries = doc.get("files") or doc.get("entries") or []
    return [n for e in entries if (n := e.get("fileName") or e.get("file_name"))]


_HISTORY_FILE_RE = re.compile(r"^(?P<min>\d+)_(?P<max>\d+)_(?P<layer>\d+)\.parquet$")


def history_file_range(name: str) -> tuple[str, str, int] | None:
    """(min instant, max instant, layer) of a history file named `<min>_<max>_<layer>.parquet` (Java's LSMTimeline)."""
    m = _HISTORY_FILE_RE.match(name)
    return (m.group("min"), m.group("max"), int(m.group("layer"))) if m else None


def history_files_covering(names: list[str], ts: str) -> list[str]:
    """The history files whose instant range holds `ts` (a file not named by range is always read)."""
    out = []
    for name in names:
        span = history_file_range(name)
        if span is None or span[0] <= ts <= span[1]:
            out.append(name)
    return out


def history_file_completion_times(path: str) -> dict[str, str]:
    try:
        table = pq.read_table(storage.parquet_source(path), columns=["instantTime", "completionTime"])
    except (pa.ArrowInvalid, OSError, KeyError) as exc:
        raise HistoryError(f"{path}: unreadable LSM history file: {exc}") from None
    return {str(r): str(c) for r, c in zip(table.column("instantTime").to_pylist(),
                                           table.column("completionTime").to_pylist())
            if r is not None and c is not None}
