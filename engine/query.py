"""Queries over a table: snapshot (base + logs merged) and read-optimized (base files only).

`plan_read` turns the table into picklable per-slice work (`SliceRef`s + one `ReadContext`) that the
Spark data source distributes to executors; `read_arrow` runs the same work in-process (CLI, tests,
freshness checks) without starting Spark.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa

from engine import integrity
from engine.errors import ConfigError
from engine.fsview import FileSlice, FileSystemView
from engine.properties import load_table_config
from engine.schema import table_read_schema
from engine.slice_reader import ReadContext, SliceRef, read_slice
from engine.timeline import Timeline

QUERIES = ("snapshot", "read_optimized")


@dataclass(frozen=True)
class ReadPlan:
    query: str
    context: ReadContext
    slices: tuple[SliceRef, ...]


def slice_ref(sl: FileSlice) -> SliceRef:
    size = (sl.base_file.size if sl.base_file else 0) + sum(lf.size for lf in sl.log_files)
    return SliceRef(sl.partition_path, sl.file_id, sl.base_instant,
                    sl.base_file.path if sl.base_file else None, tuple(lf.path for lf in sl.log_files), size)


def balance(refs: Sequence[SliceRef], tasks: int) -> list[list[SliceRef]]:
    """Greedy largest-first packing of slices into at most `tasks` groups of similar byte size.

    Each Spark task of a Python data source has a fixed cost, so small slices share a task while a
    large slice still gets one of its own.
    """
    groups: list[list[SliceRef]] = [[] for _ in range(max(1, min(tasks, len(refs))))]
    loads = [0] * len(groups)
    for ref in sorted(refs, key=lambda r: -r.size):
        i = loads.index(min(loads))
        groups[i].append(ref)
        loads[i] += ref.size
    return [g for g in groups if g]


def plan_read(base_path: str, query: str = "snapshot") -> ReadPlan:
    if query not in QUERIES:
        raise ConfigError(f"unknown query type {query!r}; use snapshot or read_optimized")
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    view = FileSystemView(base_path, timeline)
    view.check_links()
    ctx = ReadContext(schema=table_read_schema(cfg, timeline), merge_mode=cfg.merge_mode,
                      ordering_field=cfg.ordering_field, committed=frozenset(view.committed_instants))
    slices = view.latest_slices()
    if query == "read_optimized":
        slices = [s for s in slices if s.base_file is not None]
    else:
        integrity.warn_skipped(integrity.corrupt_blocks(lf.path for s in slices for lf in s.log_files))
    return ReadPlan(query, ctx, tuple(slice_ref(s) for s in slices))


def iter_arrow(plan: ReadPlan) -> Iterator[pa.Table]:
    for ref in plan.slices:
        yield from read_slice(ref, plan.context, plan.query)


def read_arrow(base_path: str, query: str = "snapshot") -> pa.Table:
    """The whole query result as one Arrow table, read in-process."""
    plan = plan_read(base_path, query)
    parts = list(iter_arrow(plan))
    return pa.concat_tables(parts) if parts else plan.context.schema.empty_table()
