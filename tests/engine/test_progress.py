"""engine.progress.counted: an accumulator only when someone counts."""
from __future__ import annotations

from engine.progress import counted


class _NoSpark:
    """A SparkContext that must not be asked for anything."""

    def accumulator(self, value: int) -> None:
        raise AssertionError("an accumulator nobody reads: each task's update costs a round trip to the driver")


def test_nobody_counting_gets_no_accumulator() -> None:
    assert counted(_NoSpark(), lambda acc: acc, None, 3, "file groups") is None
