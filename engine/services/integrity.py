"""Corrupt log blocks, found by header scans: reported on every read, and never compacted away.

A reader skips a corrupt block (as Java does) so the rest of the table stays readable, but the records
in it are then hidden. Tidemark says so on every read, and refuses to compact a log holding one: the new
base file would supersede the log and the block's records would be gone for good.
"""
from __future__ import annotations

import warnings
from typing import Iterable

from engine import logformat
from engine.errors import CorruptLogBlockError


class CorruptLogBlockWarning(UserWarning):
    """A query skipped a corrupt log block; its records are not in the result."""


def corrupt_blocks(paths: Iterable[str]) -> list[logformat.CorruptBlock]:
    found: list[logformat.CorruptBlock] = []
    for path in paths:
        found.extend(logformat.scan_log_file(path).corrupt)
    return found


def describe(block: logformat.CorruptBlock) -> str:
    return f"{block.path} at offset {block.offset}: {block.reason}"


def warn_skipped(blocks: Iterable[logformat.CorruptBlock]) -> None:
    for block in blocks:
        warnings.warn(CorruptLogBlockWarning(f"corrupt log block skipped, its records are missing from this "
                                             f"result: {describe(block)}"), stacklevel=3)


def refuse_to_compact(paths: Iterable[str]) -> None:
    bad = corrupt_blocks(paths)
    if bad:
        raise CorruptLogBlockError(
            "refusing to compact logs with corrupt blocks (their records would be lost for good): "
            + "; ".join(describe(b) for b in bad) + ". Repair or remove the blocks, then schedule again.")
