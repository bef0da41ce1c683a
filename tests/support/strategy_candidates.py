"""Log and slice candidates for compaction-strategy tests: log versions with a min event time and a size, as the
planner hands them to a strategy (engine.compaction.strategy)."""
from __future__ import annotations

from engine.compaction.strategy import LogCandidate, SliceCandidate


def log(version: int, min_et: int | None, size: int = 100) -> LogCandidate:
    return LogCandidate(f".f-0_1.log.{version}_0-0-0", f"/x/.f-0_1.log.{version}_0-0-0", version, "0-0-0", size,
                        min_et, None if min_et is None else min_et + 10, "header" if min_et is not None else "none")


def slice_(fid: str, mins, sizes=None, base_size: int = 0) -> SliceCandidate:
    sizes = sizes or [100] * len(mins)
    return SliceCandidate("p", fid, "1", None, None, base_size,
                          tuple(log(i + 1, m, s) for i, (m, s) in enumerate(zip(mins, sizes))))
