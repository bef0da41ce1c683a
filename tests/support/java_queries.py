"""Our reads of a table against hudi 0.5.0's in every query: snapshot, read-optimized, time travel at every completed
instant, incremental between every two requested or completion times. Rows are compared as multisets (a file group
holding a key twice cannot be indexed by key), each value normalised as `tests.support.oracle` does."""
from __future__ import annotations

import pyarrow as pa

from engine.read.query import QuerySpec, read_arrow
from engine.timeline.instants import Timeline
from tests.support.oracle import _norm, hudi_read


def rows(table: pa.Table, skip: tuple[str, ...] = ("_hoodie_file_name",)) -> list[str]:
    columns = [c for c in table.column_names if c not in skip]
    return sorted(repr([_norm(v) for v in r.values()]) for r in table.select(columns).to_pylist())


def assert_same(ours: pa.Table, theirs: pa.Table, what: str) -> None:
    """Our rows equal hudi's over hudi's columns (its file names aside: ours may name a row's file otherwise)."""
    if theirs.num_columns == 0:   # hudi answers an empty read with no schema at all
        assert ours.num_rows == 0, what
        return
    skip = tuple(c for c in ours.column_names if c not in theirs.column_names) + ("_hoodie_file_name",)
    assert rows(ours, skip) == rows(theirs, skip), what


def assert_every_query_like_hudi(path: str) -> None:
    for query in ("snapshot", "read_optimized"):
        assert_same(read_arrow(path, query), hudi_read(path, query), query)
    timeline = Timeline.load(path)
    for ts in (i.timestamp for i in timeline.completed()):
        assert_same(read_arrow(path, QuerySpec("time_travel", as_of=ts)), hudi_read(path, "time_travel", as_of=ts),
                    f"as of {ts}")
    times = sorted({t for i in timeline.completed() for t in (i.timestamp, i.completion_time) if t})
    points = ["0", *times]
    for i, begin in enumerate(points[:-1]):
        for end in points[i + 1:]:
            assert_same(read_arrow(path, QuerySpec("incremental", begin=begin, end=end)),
                        hudi_read(path, "incremental", begin=begin, end=end), f"({begin}, {end}]")
