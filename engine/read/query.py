"""Queries over a table: snapshot (base + logs merged), read-optimized (base files only), time travel (the
snapshot as of an instant) and incremental (what changed in a range of instants; engine.read.incremental).

`plan_read` turns the table into picklable per-slice work (`SliceRef`s + one `ReadContext`) that the
Spark data source distributes to executors; `read_arrow` runs the same work in-process (CLI, tests,
freshness checks) without starting Spark.
"""
from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from engine.config.properties import load_table_config, refuse_logs_without_meta_fields
from engine.config.schema import table_read_schema
from engine.errors import ConfigError
from engine.io import base_format
from engine.logformat import CorruptBlock, integrity
from engine.progress import Progress, Reporter
from engine.read import incremental, ro_scan
from engine.read.slice_reader import READ_REMEDY, ReadContext, SliceRef, read_slice
from engine.read.window import InstantWindow
from engine.slices.fsview import FileSystemView
from engine.slices.groups import FileSlice
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import Timeline

QUERIES = ("snapshot", "read_optimized", "incremental", "time_travel")


@dataclass(frozen=True)
class QuerySpec:
    """A query and its instants: `begin`/`end` for incremental, `as_of` for time travel."""

    query: str = "snapshot"
    begin: str | None = None
    end: str | None = None
    as_of: str | None = None

    def __post_init__(self) -> None:
        if self.query not in QUERIES:
            raise ConfigError(f"unknown query type {self.query!r}; use {', '.join(QUERIES)}")
        if self.query != "incremental" and (self.begin is not None or self.end is not None):
            raise ConfigError(f"begin/end instants belong to an incremental query, not {self.query}")
        if self.query != "time_travel" and self.as_of is not None:
            raise ConfigError(f"an as-of instant belongs to a time_travel query, not {self.query}")
        if self.query == "time_travel" and self.as_of is None:
            raise ConfigError("a time_travel query needs the as-of instant")


def as_spec(query: str | QuerySpec) -> QuerySpec:
    return query if isinstance(query, QuerySpec) else QuerySpec(query)


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


def plan_read(base_path: str, query: str | QuerySpec = "snapshot", *, fail_on_corrupt: bool = False,
              warn: bool = True, report_dir: str | None = None) -> ReadPlan:
    """The read's work per slice. Corrupt blocks of committed instants that header scans and content prefixes
    find are reported here, on the driver: a warning each (unless `warn` is False: the caller already did),
    or CorruptLogBlockError with `fail_on_corrupt` before any task runs. Executors report only what their
    decode finds beyond these (`report_corrupt`), or relay it into `report_dir` for the driver to warn about."""
    spec = as_spec(query)
    query = spec.query
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    view = FileSystemView(base_path, timeline)
    committed = view.committed_instants
    window, slices = _slices(view, spec)   # refuses bad instants first
    if query != "read_optimized":
        refuse_logs_without_meta_fields(cfg, any(s.log_files for s in slices), f"a {query} read")
    view.check_links(as_of=window.end if window is not None else None)
    check_base_files(s.base_file.path for s in slices if s.base_file is not None)
    corrupt: list[CorruptBlock] = []
    extents = CommittedExtents(base_path, timeline)
    if query == "read_optimized":
        slices = [s for s in slices if s.base_file is not None]
    else:
        logs = {lf.path: lf.size for s in slices for lf in s.log_files}
        corrupt = integrity.scan_corruption(logs, committed, extents, logs).committed
        # Damage to blocks outside a time-travel / incremental window hides nothing this read returns.
        corrupt = [b for b in corrupt if window is None or b.instant is None or window.in_range(b.instant)]
        if corrupt and fail_on_corrupt:
            raise integrity.corrupt_error(corrupt, "read stopped", READ_REMEDY)
        if warn:
            integrity.warn_skipped(corrupt)
    ctx = ReadContext(schema=table_read_schema(cfg, timeline.latest_schema()), merge_mode=cfg.merge_mode,
                      ordering_field=cfg.ordering_field, committed=committed, window=window,
                      fail_on_corrupt=fail_on_corrupt, reported=frozenset((b.path, b.offset) for b in corrupt),
                      report_dir=report_dir, extents=extents)
    return ReadPlan(query, ctx, tuple(slice_ref(s) for s in slices))


def _slices(view: FileSystemView, spec: QuerySpec) -> tuple[InstantWindow | None, list[FileSlice]]:
    if spec.query == "time_travel" and spec.as_of is not None:
        versioned = incremental.time_travel(view, spec.as_of)
    elif spec.query == "incremental":
        versioned = incremental.incremental(view, spec.begin, spec.end)
    else:
        return None, view.latest_slices()
    return versioned.window, versioned.slices


def check_base_files(paths: Iterable[str]) -> None:
    """Every base file a query will read has a readable footer (a truncated file fails here, by name, before any
    task starts or any output is written)."""
    for path in paths:
        base_format.check_readable(path)


# Slices up to this size are read ahead on other threads (each held whole in memory until its turn); a plan
# with a bigger one reads one slice at a time, streaming its base file.
READ_AHEAD_MAX_BYTES = 256 * 2**20


def iter_arrow(plan: ReadPlan, on_progress: Progress | None = None) -> Generator[pa.Table, None, None]:
    """The plan's rows slice by slice, in plan order; slices are decoded and merged on one thread per core
    (pyarrow and numpy release the GIL) when every slice is small enough to hold whole. A read-optimized
    plan is its base files alone, read by one Arrow dataset scan (engine.read.ro_scan)."""
    progress = Reporter(on_progress, len(plan.slices), "file slices")
    threads = min(os.cpu_count() or 1, len(plan.slices))
    if plan.query == "read_optimized":
        # Base files alone, nothing to merge: one Arrow dataset scan reads them all on Arrow's threads.
        yield from ro_scan.iter_base_files([ref.base_path for ref in plan.slices if ref.base_path],
                                           plan.context.schema, progress)
    elif threads <= 1 or any(ref.size > READ_AHEAD_MAX_BYTES for ref in plan.slices):
        for done, ref in enumerate(plan.slices, 1):
            yield from read_slice(ref, plan.context, plan.query)
            progress.update(done)
    else:
        yield from _read_ahead(plan, threads, progress)
    progress.finish()


def _read_ahead(plan: ReadPlan, threads: int, progress: Reporter) -> Iterator[pa.Table]:
    def whole(ref: SliceRef) -> list[pa.Table]:
        return list(read_slice(ref, plan.context, plan.query))

    refs = iter(plan.slices)
    with ThreadPoolExecutor(threads, thread_name_prefix="tidemark-read") as pool:
        running = deque(pool.submit(whole, ref) for ref in itertools.islice(refs, threads))
        done = 0
        while running:
            tables = running.popleft().result()
            following = next(refs, None)
            if following is not None:
                running.append(pool.submit(whole, following))
            yield from tables
            done += 1
            progress.update(done)


def head_arrow(base_path: str, query: str | QuerySpec = "snapshot", limit: int = 20, *,
               fail_on_corrupt: bool = True) -> tuple[pa.Table, bool]:
    """The query's first `limit` rows (in slice order) and whether more follow. Slices are read in turn and the
    reading stops once more than `limit` rows are in hand, so a look at a big table reads a slice or two of it.
    A corrupt committed block fails it, as an export (`fail_on_corrupt=False`: warned, its records left out)."""
    if limit < 0:
        raise ConfigError(f"limit {limit} is negative: expected 0 or more rows")
    plan = plan_read(base_path, query, fail_on_corrupt=fail_on_corrupt)
    parts, rows = [], 0
    slices = iter_arrow(plan)
    try:
        for part in slices:
            parts.append(part)
            rows += part.num_rows
            if rows > limit:
                break
    finally:
        slices.close()   # the read-ahead stops: the slices already started finish, no further one starts
    table = pa.concat_tables(parts) if parts else plan.context.schema.empty_table()
    return table.slice(0, limit), rows > limit


def read_arrow(base_path: str, query: str | QuerySpec = "snapshot", on_progress: Progress | None = None, *,
               fail_on_corrupt: bool = False) -> pa.Table:
    """The whole query result as one Arrow table, read in-process; corrupt committed blocks warn (or fail)."""
    plan = plan_read(base_path, query, fail_on_corrupt=fail_on_corrupt)
    parts = list(iter_arrow(plan, on_progress))
    return pa.concat_tables(parts) if parts else plan.context.schema.empty_table()
