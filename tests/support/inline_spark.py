"""Spark's scheduler replaced by an in-process loop, for tests that start many short-lived processes.

The engine's drivers only use `sparkContext.parallelize(...).map/flatMap/mapPartitions(...).collect()` and
`defaultParallelism` on the Parquet write path and in compaction; executing those closures in the calling
process runs the same executor code without a JVM per process (the Spark path is covered elsewhere).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


class InlineRDD:
    def __init__(self, items: Iterable[Any]) -> None:
        self._items = list(items)

    def map(self, f: Callable[[Any], Any]) -> InlineRDD:
        return InlineRDD(f(x) for x in self._items)

    def flatMap(self, f: Callable[[Any], Iterable[Any]]) -> InlineRDD:  # noqa: N802 - Spark's name
        return InlineRDD(y for x in self._items for y in f(x))

    def mapPartitions(self, f: Callable[[Iterator[Any]], Iterable[Any]]) -> InlineRDD:  # noqa: N802
        return InlineRDD(f(iter(self._items)))

    def collect(self) -> list[Any]:
        return list(self._items)


class InlineAccumulator:
    """Spark's Accumulator as the engine's progress counting uses it (`add`, `+=`, `value`)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def add(self, term: int) -> None:
        self.value += term

    def __iadd__(self, term: int) -> InlineAccumulator:
        self.add(term)
        return self


class InlineContext:
    defaultParallelism = 1

    def accumulator(self, value: int) -> InlineAccumulator:
        return InlineAccumulator(value)

    def parallelize(self, items: Iterable[Any], num_slices: int | None = None) -> InlineRDD:
        return InlineRDD(items)


class InlineSpark:
    sparkContext = InlineContext()
