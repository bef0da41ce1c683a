"""Committed extents: the byte ranges of each log file that completed instants wrote, read from the timeline.

`engine.logformat.integrity` asks them (through its `Extents` protocol) to tell damage to committed data
from a failed write's torn tail; they live here because they are read from commit metadata.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from engine.io import storage
from engine.io.naming import CARRY_FORWARD_VERSION, parse_log_file_name
from engine.logformat.integrity import Extent
from engine.timeline.instants import COMMIT, COMMIT_ACTIONS, Timeline
from engine.timeline.metadata import CommitMetadata, log_extents


class CommittedExtents:
    """Log path -> the byte ranges of it that completed instants wrote, from the timeline alone.

    A write's extent is its delta write stat's [logOffset, logOffset + fileSizeInBytes) (what Java's append
    handle records, and ours). A carried-over symlink has its target's extents; a carried byte copy has the
    extents of the log it copies (the compactions' carry-over records, followed through copies of copies). A
    completed compaction's carry-forward log (version 1 of its slice) was written whole before the compaction
    completed, so all of it is committed. Instants archived off the active timeline give no extent: their logs
    fall back to the header rules of `classify`.

    Built on first use — only a log with a corrupt region asks — so undamaged tables never read every commit's
    metadata for it. Picklable for executors (the timeline is reloaded there if the index was not built yet).
    """

    def __init__(self, base_path: str, timeline: Timeline | None = None) -> None:
        self.base_path = storage.resolve(base_path)
        self._timeline = timeline
        self._index: tuple[dict[tuple[str, str], list[Extent]], dict[tuple[str, str], str], set[str]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_timeline": None}

    def of(self, path: str) -> tuple[Extent, ...]:
        written, aliases, compactions = self._built()
        partition = storage.relative(storage.parent(storage.resolve(path)), self.base_path)
        return tuple(_extents_of(path, partition, written, aliases, compactions))

    def _built(self) -> tuple[dict[tuple[str, str], list[Extent]], dict[tuple[str, str], str], set[str]]:
        if self._index is None:
            timeline = self._timeline or Timeline.load(self.base_path)
            written: dict[tuple[str, str], list[Extent]] = {}
            aliases: dict[tuple[str, str], str] = {}
            compactions: set[str] = set()
            for inst in timeline.completed():
                if inst.action not in COMMIT_ACTIONS:
                    continue
                doc = timeline.read_commit_metadata(inst)
                if inst.action == COMMIT:
                    compactions.add(inst.timestamp)
                    for entry in CommitMetadata.from_json(doc).carried or ():
                        aliases[(entry.partition_path, entry.symlink)] = storage.name_of(entry.target)
                for partition, name, start, end in log_extents(doc):
                    written.setdefault((partition, name), []).append((start, end, inst.timestamp))
            self._index = (written, aliases, compactions)
        return self._index


def _extents_of(path: str, partition: str, written: Mapping[tuple[str, str], list[Extent]],
                aliases: Mapping[tuple[str, str], str], compactions: AbstractSet[str]) -> list[Extent]:
    names = [storage.name_of(path)]
    if storage.is_link(path):   # a carried-over link: the bytes are its target's
        names.append(os.path.basename(os.path.realpath(path)))
    seen: set[str] = set()
    found: list[Extent] = []
    while names:
        name = names.pop(0)
        if name in seen:
            continue
        seen.add(name)
        found.extend(written.get((partition, name), ()))
        parsed = parse_log_file_name(name)
        if parsed is not None and parsed.version == CARRY_FORWARD_VERSION and parsed.base_instant in compactions:
            found.append((0, _size(path), parsed.base_instant))
        if (partition, name) in aliases:   # a copy (of a copy ...) of a written log
            names.append(aliases[(partition, name)])
    return found


def _size(path: str) -> int:
    try:
        return storage.size(path)
    except OSError:
        return 0
