"""Corrupt log blocks: damage to committed data is always reported and never compacted away; a torn tail is not.

A corrupt region of a log file is one of two kinds (docs/ARCHITECTURE.md, "Corrupt log blocks (and why)"):
- **committed**: it overlaps the log's committed extent — the bytes a completed write instant says it wrote there
  (its write stat's `logOffset` .. `logOffset + fileSizeInBytes`; a carried link or copy has the extents of the
  log it carries; a completed compaction's carry-forward log is committed whole) — whatever its header says; or
  its INSTANT_TIME header names a completed write instant; or — its header unreadable — a data or delete block
  follows it in the file (a failed write's tail is the last thing it wrote). Its records are missing
  from every result, so every read warns naming the file and offset (a full read into a file fails unless the
  caller asks to skip), `show` and metrics count it, and no compaction folds its log: planning refuses, and an
  execution that finds one while decoding fails with CorruptLogBlockError before it writes anything.
- **torn tail**: outside every committed extent, and its instant is not committed (a failed, in-flight or
  rolled-back write), or — header unreadable — nothing but a rollback command block follows it (Java's log
  scanner drops a corrupt block on top of its stack when a rollback block comes). Java skips it and so does
  every reader here, silently; a compaction may fold its log, which removes nothing any reader could see.
Found three ways, cheapest first: header scans (framing), content prefixes (logformat.content_check, one small
pread per block) and the decode a read or compaction does anyway — never an extra decode pass.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol

from engine import logformat
from engine.errors import CorruptLogBlockError, TidemarkWarning
from engine.logformat import BlockInfo, BlockType, CorruptBlock

# [start, end) of a log's bytes that a completed instant wrote, and that instant.
Extent = tuple[int, int, str]


class Extents(Protocol):
    """Where completed instants wrote in each log (`engine.timeline.extents.CommittedExtents` reads them from
    the timeline; this module only needs to ask)."""

    def of(self, path: str) -> tuple[Extent, ...]: ...


class CorruptLogBlockWarning(TidemarkWarning):
    """A query skipped a corrupt block of a committed instant; its records are not in the result."""


@dataclass
class Corruption:
    committed: list[CorruptBlock] = field(default_factory=list)  # data loss risk: reported, never compacted
    torn: list[CorruptBlock] = field(default_factory=list)       # a failed write's tail: skipped silently

    def extend(self, other: Corruption) -> None:
        self.committed.extend(other.committed)
        self.torn.extend(other.torn)


def classify(corrupt: Sequence[CorruptBlock], framed: Sequence[BlockInfo], committed: AbstractSet[str],
             extents: Sequence[Extent] = ()) -> Corruption:
    """Split one log file's corrupt regions; `framed` are its blocks whose framing is intact, in any order;
    `extents` the file's committed extents (`Extents.of`)."""
    rolled_back = {b.target_instant_time for b in framed if b.block_type is BlockType.COMMAND}
    live = [e for e in extents if e[2] in committed and e[2] not in rolled_back]
    # What can follow a region whose header is gone: every block with a readable header, and whether it is a
    # rollback command block.
    marks = sorted([(b.offset, b.block_type is BlockType.COMMAND) for b in framed]
                   + [(c.offset, False) for c in corrupt if c.instant is not None])
    out = Corruption()
    for c in corrupt:
        owner = _extent_owner(c, live)
        if owner is not None:
            # Inside bytes a completed instant wrote: damage to committed data, whatever the header says (a
            # header overwritten at the block's start looks exactly like a torn tail otherwise).
            out.committed.append(c if c.instant == owner else dataclasses.replace(c, instant=owner))
            continue
        if c.instant is not None:
            bad = c.instant in committed and c.instant not in rolled_back
        else:
            after = next((is_command for offset, is_command in marks if offset > c.offset), None)
            bad = after is False
        (out.committed if bad else out.torn).append(c)
    return out


def _extent_owner(c: CorruptBlock, extents: Sequence[Extent]) -> str | None:
    """The instant whose committed bytes the region [offset, next_offset) overlaps (its own, when it is one)."""
    end = max(c.next_offset, c.offset + 1)
    owners = [inst for lo, hi, inst in extents if c.offset < hi and lo < end]
    if not owners:
        return None
    return c.instant if c.instant in owners else owners[0]


def file_corruption(scan: logformat.LogFileScan, committed: AbstractSet[str],
                    extents: Extents | None = None) -> Corruption:
    """Corrupt regions of one scanned log: its framing failures plus its blocks' content-prefix faults."""
    faults = logformat.content_faults(scan.path, scan.blocks, scan.content_heads)
    bad = {f.offset for f in faults}
    regions = scan.corrupt + faults
    known = extents.of(scan.path) if regions and extents is not None else ()
    return classify(regions, [b for b in scan.blocks if b.offset not in bad], committed, known)


def scan_corruption(paths: Iterable[str], committed: AbstractSet[str],
                    extents: Extents | None = None,
                    sizes: Mapping[str, int] | None = None) -> Corruption:
    """Corrupt regions of `paths` from header scans and content prefixes (no content decoded). `sizes` from a
    listing spare an object store one HEAD per file."""
    out = Corruption()
    paths = list(paths)
    scans = logformat.scan_log_files((p, (sizes or {}).get(p)) for p in paths)   # in parallel on a store
    for path in paths:
        out.extend(file_corruption(scans[path], committed, extents))
    return out


def describe(block: CorruptBlock) -> str:
    """`<path> at offset <n> (instant <i>): <reason>`, the reason without its own copy of path and offset."""
    instant = f" (instant {block.instant})" if block.instant else ""
    reason = block.reason.replace(f" (block at offset {block.offset} of {block.path})", "")
    reason = reason.replace(f" at offset {block.offset} of {block.path}", "")
    return f"{block.path} at offset {block.offset}{instant}: {reason}"


def warn_skipped(blocks: Iterable[CorruptBlock]) -> None:
    caller = sys._getframe(2)
    for block in blocks:
        # A fresh registry per warning: Python's default filter shows a warning once per call site and text,
        # and every read that skips committed records must say so, not only the first.
        warnings.warn_explicit(
            CorruptLogBlockWarning(f"corrupt log block of a committed instant skipped, its records are missing "
                                   f"from this result: {describe(block)}"),
            CorruptLogBlockWarning, caller.f_code.co_filename, caller.f_lineno, registry={})


def relay(blocks: Sequence[CorruptBlock], directory: str) -> None:
    """An executor's findings for the driver to warn about (a Spark read into a file): one small JSON file each
    call, written whole (temp name, then rename), in a directory the driver made and reads after the job."""
    name = os.path.join(directory, f"corrupt-{uuid.uuid4().hex}.json")
    with open(name + ".tmp", "w") as fh:
        json.dump([dataclasses.asdict(b) for b in blocks], fh)
    os.replace(name + ".tmp", name)


def relayed(directory: str) -> list[CorruptBlock]:
    """What executors relayed into `directory`, each block once, in file and offset order."""
    found: dict[tuple[str, int], CorruptBlock] = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("corrupt-") and name.endswith(".json"):
            with open(os.path.join(directory, name)) as fh:
                for item in json.load(fh):
                    block = CorruptBlock(**item)
                    found[(block.path, block.offset)] = block
    return [found[k] for k in sorted(found)]


def corrupt_error(blocks: Sequence[CorruptBlock], doing: str, remedy: str) -> CorruptLogBlockError:
    return CorruptLogBlockError(f"{doing}: {len(blocks)} corrupt log block(s) of committed instants: "
                                f"{'; '.join(describe(b) for b in blocks)}. {remedy}")


def refuse_to_compact(paths: Iterable[str], committed: AbstractSet[str],
                      extents: Extents | None = None, sizes: Mapping[str, int] | None = None) -> None:
    bad = scan_corruption(paths, committed, extents, sizes).committed
    if bad:
        raise corrupt_error(bad, "refusing to compact", "Folding their logs would lose their records for good; "
                            "repair or remove the blocks, then schedule again.")


_REMOTE = re.compile(r"CorruptLogBlockError: (.+)")


def found_in(exc: BaseException) -> CorruptLogBlockError | None:
    """The CorruptLogBlockError behind `exc`: chained, or raised on a Spark executor (then only its text is left)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, CorruptLogBlockError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    hits = _REMOTE.findall(str(exc))
    return CorruptLogBlockError(hits[-1].strip()) if hits else None
