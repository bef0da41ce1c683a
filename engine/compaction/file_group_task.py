"""Compacting one file group of a compaction plan, inside a Spark task (or a thread of an in-process run).

Executors: stream the old base batch by batch against the merged winners of the chosen logs, write the
new base `<fid>_<token>_<C>.parquet` (`.lance` in a Lance table: engine.io.base_format) incrementally (temp
file under `.hoodie/.temp/<C>/`, then rename), and carry the remaining logs into slice C (symlink or byte
copy). Every step is idempotent, so a crashed run is finished by simply running it again.
A log to fold that holds a corrupt block of a committed instant is refused by the task's decode (the only place
flipped bytes deep inside a block show) before anything is written for it. The driver that ships these tasks is
engine.compaction.execute; this module never imports it.
"""
from __future__ import annotations

import contextlib
import contextvars
import filecmp
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import logformat
from engine.compaction import in_process
from engine.compaction.base_stream import stream_base
from engine.compaction.carry_forward import (
    SliceSplit,
    SplitSpec,
    base_ordering_reader,
    base_twice_reader,
    carried_rows,
    split_slice,
)
from engine.config import eventtime
from engine.config.properties import EVENT_TIME_ORDERING
from engine.errors import TidemarkError
from engine.io import base_format, storage
from engine.io.faults import fault_point
from engine.io.naming import CARRY_FORWARD_VERSION, LogFileName, parse_base_file_name, parse_log_file_name
from engine.io.threads import requests_pool, settle
from engine.logformat import integrity
from engine.read.merge import BaseMerge, DataItem, DeleteItem, LogItem, LogWinners, conform_to_schema
from engine.read.slice_reader import read_slice_logs
from engine.timeline.extents import CommittedExtents
from engine.timeline.instants import COMPACTION, Timeline, completed_file
from engine.timeline.metadata import WriteStat

FILE_NAME_COL = "_hoodie_file_name"


@dataclass(frozen=True)
class OpTask:
    """One compaction operation, as shipped to an executor (small, picklable)."""

    base_path: str
    instant: str
    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None                # absolute path of the old base
    log_paths: tuple[str, ...]           # the chosen prefix, in log order
    links: tuple[tuple[str, str], ...]   # (new name in slice C, target name), in log order
    carry_mode: str
    exact: bool
    threshold_ms: int | None
    schema: pa.Schema                    # read schema, meta fields first
    log_avro_schema: str                 # schema_with_meta JSON for the exact-mode spill log
    # The spill log's data blocks are in the table's block format (hoodie.logfile.data.block.format), as its
    # writes' are: readers that take Parquet blocks and not some Avro ones (hudi 0.5.0: nested timestamps) can
    # still read the table after an exact compaction.
    block_format: str
    merge_mode: str
    ordering_field: str | None
    event_field: str | None
    committed: frozenset[str]
    row_group_rows: int
    compression: str
    base_ext: str = base_format.PARQUET   # the table's base file format (hoodie.table.base.file.format)
    delete_bounds: tuple[tuple[str, int | None, int | None], ...] = ()   # (instant, min, max) of its deletes
    extents: CommittedExtents | None = None   # of log_paths, built if one is damaged
    log_sizes: tuple[int, ...] = ()      # of log_paths, from the driver's listing (no HEAD per log on a store)
    # Completed instants when the run started: the carried logs' blocks are all older (the trigger refused
    # plans over pending writes), so only logs written into slice C since make a task reload the timeline.
    completed: frozenset[str] = frozenset()
    base_size: int = 0                   # bytes of the old base, from the listing (task balancing)
    carried_needed: bool = True          # the plan's word on its carried logs (CompactionOperation)
    carried_read: int = 0                # bytes of the carried logs the task will read whole (_logs_read_whole)
    partition_files: int = 0             # files in the partition, by the driver's listing (0: unknown)
    # On an object store, the group's files in its partition (name, size) by the run's listing, taken before the
    # plan went inflight: what a first attempt would find with a LIST of its own (below `_listing_ahead`).
    listed: tuple[tuple[str, int], ...] | None = None

    @property
    def weight(self) -> int:
        """Bytes this operation reads: what its run time follows, to start the longest first (and, summed, what
        decides whether a run fits in this process)."""
        return self.base_size + sum(self.log_sizes) + self.carried_read


def execute_operation(task: OpTask) -> dict[str, Any]:
    """Merge one slice's base with its chosen logs into a new base, then carry over the remaining logs."""
    token = _task_token()
    pdir = storage.join(task.base_path, task.partition_path) if task.partition_path else task.base_path
    temp_dir = storage.join(task.base_path, ".hoodie", ".temp", task.instant)
    storage.make_dirs(temp_dir)
    with storage.prefetched(_logs_read_whole(task, pdir)), _listing_ahead(task, pdir) as listed:
        # the task's one listing of its partition (one LIST on a store) is in flight with the log GETs, and
        # waited for only once the folded logs are decoded: its round trip overlaps theirs and the decode
        logs = read_slice_logs(task.log_paths, task.committed, extents=task.extents)
        if logs.corrupt:  # folding would supersede the log and lose the block's records for good
            raise integrity.corrupt_error(logs.corrupt, f"refusing to fold the logs of file group {task.file_id}",
                                          "Folding them would lose these records for good; nothing was written.")
        listing = listed()
        following, committed_since = _following_items(task, pdir, listing, logs.items)
    name = f"{task.file_id}_{token}_{task.instant}{task.base_ext}"
    with _remote_copies(task, pdir, listing):   # in flight while this task merges and uploads
        split = split_slice(logs.items, following, _split_spec(task),
                            base_ordering_reader(task.base_file, task.ordering_field), base_twice_reader(task.base_file))
        counts, size = _write_base_file(task, split, pdir, temp_dir, name, listing)
        spill = _write_carry_forward(task, split, pdir, temp_dir, token, listing)
        fault_point("carry_over", "base_written")
    carry = _carry_over(task, pdir, temp_dir, listing)
    fault_point("carry_over", "linked")
    stat = _stat(task, name, size, logs.items, counts)
    return {"stat": stat, "carry": carry, "spill": spill, "carry_min": split.carry_min_event_ms,
            "written": _written_logs(task, listing), "committed": sorted(committed_since),
            "replays": _replays(task, logs.items)}


def _logs_read_whole(task: OpTask, pdir: str) -> list[str]:
    """The logs this task reads whole, in the order it reads them: its folded logs, then the carried ones when
    they are likely to be needed (`_following_items`)."""
    carried = [storage.join(pdir, target) for _, target in task.links] \
        if task.merge_mode == EVENT_TIME_ORDERING and task.carried_needed else []
    return [*task.log_paths, *carried]


def _first_attempt() -> bool:
    """Whether this is the first try of the task in the run: always in this process (a failed task fails the run,
    never runs again), on Spark attempt 0 (the run's stage reads no shuffle, so Spark never resubmits it: a
    retry is a later attempt of the same task set); a caller of its own (neither) may be running it again, so
    it is not."""
    if in_process.write_token() is not None:
        return True
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx is not None and ctx.attemptNumber() == 0


# The file group's place in the run's start order (`balanced_order`), in a Spark task: several groups may share one.
_SLOT: contextvars.ContextVar[int | None] = contextvars.ContextVar("tidemark_group_slot", default=None)


def _execute_in_slot(slot: int, task: OpTask) -> dict[str, Any]:
    """`execute_operation` of the group that has place `slot` in the run's start order, in a Spark task."""
    reset = _SLOT.set(slot)
    try:
        return execute_operation(task)
    finally:
        _SLOT.reset(reset)


def _task_token() -> str:
    """The write token of the group's files: `<slot>-<stage>-<attempt>` on Spark, slot being the group's place in
    the start order (Hudi's `<partition>-<stage>-<attempt>`, with a task's groups told apart as an in-process run
    tells them: `<slot>-0-0`); unique per group and attempt of the run."""
    own = in_process.write_token()
    if own is not None:
        return own
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return "0-0-0"
    slot = _SLOT.get()
    return f"{ctx.partitionId() if slot is None else slot}-{ctx.stageId()}-{ctx.attemptNumber()}"


def _split_spec(task: OpTask) -> SplitSpec:
    bounds = {inst: (lo, hi) for inst, lo, hi in task.delete_bounds}
    return SplitSpec(task.merge_mode, task.ordering_field, task.event_field, task.schema,
                     task.threshold_ms if task.exact else None, bounds)


# Keys one S3 LIST returns: a partition holding more files than this takes several pages per task.
LIST_PAGE = 1000


def _list_partition(task: OpTask, pdir: str) -> dict[str, int]:
    """name -> size of the files of the task's group in its partition, listed once per task and shared by every
    step that asks (stale attempts, logs written into slice C, copies already made); local sizes are not needed
    (-1). Only this task writes the names it later looks for (the plan's), so the listing cannot go stale for them.

    Every name a step asks about is the group's own: its base files (`<fid>_...`) and logs (`.<fid>_...`). On a
    store, a partition of more than a listing page is listed by those two prefixes instead (two LISTs of a few
    keys each, not pages of every group's files in every task); a smaller one in one LIST."""
    if not storage.is_remote(pdir):
        return dict.fromkeys(storage.list_names(pdir), -1)
    if task.partition_files > LIST_PAGE:
        return {e.name: e.size for e in storage.list_starting_with(pdir, (f"{task.file_id}_", f".{task.file_id}_"))}
    return {e.name: e.size for e in storage.list_entries(pdir) if not e.is_dir}


@contextlib.contextmanager
def _listing_ahead(task: OpTask, pdir: str) -> Iterator[Callable[[], dict[str, int]]]:
    """`_list_partition`, started now on an object store (in the request pool) and answered when asked; locally
    it is made when asked (a directory read). Leaving the block waits for a listing still in flight.

    A first attempt on an object store asks the run's listing instead (`OpTask.listed`: no LIST at all). It was
    taken before the plan went inflight, under the compaction lock, so it holds every leftover of an earlier run
    of the plan, and nothing but this task writes the group's names of C since; what it may lack — logs writers
    put into slice C in between — a task's own LIST could miss as well, written a moment after it. A retried
    attempt lists: an earlier attempt of this run may have left files the run's listing never saw."""
    if not storage.is_remote(pdir):
        yield lambda: _list_partition(task, pdir)
        return
    if task.listed is not None and _first_attempt():
        listed = dict(task.listed)
        yield lambda: listed
        return
    ahead = requests_pool().submit(_list_partition, task, pdir)
    try:
        yield ahead.result
    finally:
        settle([ahead])


def _following_items(task: OpTask, pdir: str, listing: dict[str, int],
                     folded: Sequence[LogItem]) -> tuple[list[LogItem], frozenset[str]]:
    """Items of the logs that follow the carry-forward log in slice C: the carried logs, then logs written
    into slice C while the plan was pending. Only event-time ordering needs them (commit time: logs win), and
    only when a delete is involved: a following record changes what the base must hold only after a delete
    among the folded records or among its own logs (carry_forward._carry_decisions). So when the plan
    recorded that no log of the operation holds a delete and none was written into slice C, they are not read
    at all — on a store, the carried logs' GETs are saved. (A folded delete the plan did not know of still
    makes them read.) Partial updates make them matter under commit time too (carry_forward.split_slice).
    Also the instants read as committed beyond those of the run's start (the commit's check)."""
    carried = [storage.join(pdir, target) for _, target in task.links]
    written = [storage.join(pdir, n) for n in _written_logs(task, listing)]
    if not _following_matters(task, folded, written):
        return [], frozenset()
    # Logs written into slice C may hold instants completed after the run started: only then read the timeline.
    committed = (frozenset(i.timestamp for i in Timeline.load(task.base_path).completed())
                 if written or not task.completed else task.completed)
    return read_slice_logs(carried + written, committed).items, committed - task.completed


def _following_matters(task: OpTask, folded: Sequence[LogItem], written: Sequence[str]) -> bool:
    """Whether the logs following the carry-forward log can change what this task writes."""
    if task.merge_mode == EVENT_TIME_ORDERING:
        return bool(written) or _replays(task, folded)
    # Commit time: logs win, so what follows never changes the base, unless partial updates are involved (a partial
    # record after a folded delete takes the old base row's other columns). The plan carries no log of a group
    # holding partial blocks (strategy.CompactionStrategy.plan), so only writes into slice C can follow.
    return bool(written) and (any(isinstance(i, DataItem) and i.partial for i in folded) or _hold_partial(written))


def _hold_partial(paths: Sequence[str]) -> bool:
    """A partial-update block among the logs' blocks, from their headers."""
    scans = logformat.scan_log_files((p, None) for p in paths)
    return any(b.is_partial for scan in scans.values() for b in scan.blocks)


def _replays(task: OpTask, folded: Sequence[LogItem]) -> bool:
    """Whether records following the folded ones can change what this task's base holds (and what its
    carry-forward log replays): under event-time ordering, after a delete among the folded records or one the
    plan recorded in a carried log (carry_forward._carry_decisions), or after a folded partial-update record."""
    return task.merge_mode == EVENT_TIME_ORDERING and (
        task.carried_needed or any(isinstance(i, DeleteItem) or isinstance(i, DataItem) and i.partial for i in folded))


def _written_logs(task: OpTask, names: Iterable[str]) -> list[str]:
    """The logs among `names` (the group's partition) written into slice C, not the plan's carried names, in the
    order readers merge them."""
    planned = {link for link, _ in task.links}
    found = []
    for n in names:
        parsed = parse_log_file_name(n)
        if parsed is not None and n not in planned and _written_into_slice_c(task, parsed):
            found.append((parsed.base_instant, parsed.version, parsed.write_token, n))
    return [n for *_, n in sorted(found)]


def _written_into_slice_c(task: OpTask, log: LogFileName) -> bool:
    """A log of the task's group written into slice C while the plan was pending. Version 6 names it by C (the
    carry-forward log and the carried links, also named by C, are not writes); version 8 names it by its own
    write, one requested after C (writes requested before C had committed when it was planned: the trigger
    refuses to plan while one is pending). In name order they follow the carried logs, as readers merge them."""
    if log.file_id != task.file_id:
        return False
    if log.base_instant == task.instant:
        return log.version != CARRY_FORWARD_VERSION
    return log.base_instant > task.instant and log.base_instant not in task.committed


@dataclass
class _Counts:
    rows: int = 0
    base_rows: int = 0
    base_kept: int = 0
    from_logs: int = 0
    min_et: int | None = None
    max_et: int | None = None


def _merged(task: OpTask, winners: LogWinners, counts: _Counts) -> Iterator[pa.Table]:
    """merge_with_winners, unrolled so the stats can count superseded base rows."""
    merge = BaseMerge(winners, task.merge_mode, task.ordering_field, task.schema)
    for batch in stream_base(task.base_file, task.schema, winners.size):
        res = merge.resolve(batch)
        counts.base_rows += batch.num_rows
        counts.base_kept += res.kept.num_rows
        # Drop our references before the next row group is read, so only one is ever alive.
        del batch
        for part in (res.kept, res.overlaid):
            if part is not None and part.num_rows:
                yield part
        counts.from_logs += 0 if res.overlaid is None else res.overlaid.num_rows
        del res
    rest = merge.rest()
    counts.from_logs += rest.num_rows
    if rest.num_rows:
        yield conform_to_schema(rest, task.schema)


def _write_base_file(task: OpTask, split: SliceSplit, pdir: str, temp_dir: str, name: str,
                     listing: dict[str, int]) -> tuple[_Counts, int]:
    """The new base file of slice C, made visible whole and only where no file is: local, written under
    `.hoodie/.temp` and linked into the partition; object stores, one PutObject (a multipart upload when large)
    with `If-None-Match: *`, that appears only complete. A run that was taken over (another run committed C since
    this one listed the partition) is refused there rather than overwrite a committed base file."""
    _remove_stale(task, pdir, listing, lambda n: _is_base_of(n, task.file_id, task.instant))
    dest = storage.join(pdir, name)
    try:
        if storage.is_remote(dest):
            with storage.open_output(dest, exclusive=True) as sink:
                counts = _write_base(task, split.base_winners, sink, name)
                size = sink.tell()   # what was uploaded: no HEAD afterwards
            return counts, size
        tmp = os.path.join(temp_dir, name)
        counts = _write_base(task, split.base_winners, tmp, name)
        _link_new(tmp, dest)
    except storage.PublishConflict:
        raise _taken_over(task, dest) from None
    return counts, os.path.getsize(dest)


def _link_new(tmp: str, dest: str) -> None:
    """Local: move `tmp` into place only where no file is (a hard link refuses an existing name)."""
    try:
        storage.link_no_clobber(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class CompactionTakenOver(TidemarkError):
    """A file this run would write is already there: another run of the same plan wrote it (and may have
    committed it) after this one started — this run is a zombie and writes nothing more."""


def _taken_over(task: OpTask, dest: str) -> CompactionTakenOver:
    return CompactionTakenOver(f"{dest} was written by another run of compaction {task.instant} while this one "
                               "ran (this run's lock was taken over); this run changed no file")


def _write_base(task: OpTask, winners: LogWinners, tmp: str | pa.NativeFile, name: str) -> _Counts:
    """Stream the merged rows into `tmp` batch by batch (Parquet row groups ≤ `row_group_rows`), never the slice;
    the format is `name`'s (engine.io.base_format)."""
    counts = _Counts()
    keys: list[str | None] = [None, None]   # min and max record key written
    opts = base_format.WriteOptions(task.compression, task.row_group_rows, like=task.base_file)
    with base_format.open_writer(tmp, name, task.schema, opts) as writer:
        for t in _merged(task, winners, counts):
            t = _with_file_name(t, name)
            _track(t, task, counts, keys)
            writer.write(t)
            del t  # not alive while the generator reads the next row group
        if keys[0] is not None and keys[1] is not None:
            writer.add_footer({"hoodie_min_record_key": keys[0], "hoodie_max_record_key": keys[1]})
    return counts


def _with_file_name(t: pa.Table, name: str) -> pa.Table:
    i = t.schema.get_field_index(FILE_NAME_COL)
    return t.set_column(i, t.schema.field(i), pa.repeat(pa.scalar(name), t.num_rows)) if i >= 0 else t


def _track(t: pa.Table, task: OpTask, counts: _Counts, keys: list[str | None]) -> None:
    counts.rows += t.num_rows
    if task.event_field and task.event_field in t.column_names:
        lo, hi = eventtime.known_bounds(t.column(task.event_field))
        counts.min_et = lo if counts.min_et is None else (counts.min_et if lo is None else min(counts.min_et, lo))
        counts.max_et = hi if counts.max_et is None else (counts.max_et if hi is None else max(counts.max_et, hi))
    mm = pc.min_max(t.column("_hoodie_record_key"))
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo is not None:
        keys[0] = lo if keys[0] is None else min(keys[0], lo)
        keys[1] = hi if keys[1] is None else max(keys[1], hi)


def _write_carry_forward(task: OpTask, split: SliceSplit, pdir: str, temp_dir: str, token: str,
                         listing: dict[str, int]) -> str | None:
    """The carry-forward items as log version 1 of slice C, one block per item in replay order; the blocks'
    instant is C, so readers take them once C completes."""
    _remove_stale(task, pdir, listing,
                  lambda n: _is_log_of(n, task.file_id, task.instant, CARRY_FORWARD_VERSION))
    if not split.carry:
        return None
    blocks = [_carry_block(task, item) for item in split.carry]
    name = LogFileName(task.file_id, task.instant, CARRY_FORWARD_VERSION, token).name
    dest = storage.join(pdir, name)
    try:
        if storage.is_remote(dest):   # one conditional PUT: whole or absent, and never over another run's
            storage.create_exclusive(dest, b"".join(b for pair in blocks for b in pair))
        else:
            tmp = os.path.join(temp_dir, name)
            if os.path.exists(tmp):
                os.unlink(tmp)
            logformat.append_blocks(tmp, [b for pair in blocks for b in pair])
            _link_new(tmp, dest)
    except storage.PublishConflict:
        raise _taken_over(task, dest) from None
    return f"{task.partition_path}/{name}" if task.partition_path else name


def _carry_block(task: OpTask, item: LogItem) -> list[bytes]:
    if isinstance(item, DataItem):
        rows = carried_rows(item, task.schema)
        lo, hi = (eventtime.known_bounds(rows.column(task.event_field)) if task.event_field in rows.column_names
                  else (None, None))
        avro = json.loads(task.log_avro_schema)
        if item.partial:   # a partial item's block declares only its columns, as Java's partial blocks do
            avro = {**avro, "fields": [f for f in avro["fields"] if f["name"] in rows.column_names]}
        # Java writes partial-update blocks as Avro blocks; a full item takes the table's block format.
        block_format = "avro" if item.partial else task.block_format
        return [logformat.encode_data_block(rows, avro, task.instant, block_format, lo, hi, partial=item.partial)]
    # Processing-time deletes and deletes with an ordering value need blocks of their own (one union branch
    # per block).
    hard = np.asarray(item.always_wins.to_numpy(zero_copy_only=False), bool)
    out = []
    for mask in (hard, ~hard):
        if mask.any():
            keep = pa.array(mask)
            keys = item.keys.filter(keep).to_pylist()
            ordering = None if mask is hard else _ordering_values(item.ordering.filter(keep))
            # Each delete keeps its event time: the next exact compaction may cut at another T.
            times = None if item.event_ms is None else item.event_ms.filter(keep)
            out.append(logformat.encode_delete_block(keys, [task.partition_path] * len(keys), task.instant, ordering,
                                                     avro_schema=json.loads(task.log_avro_schema), event_times=times))
    return out


def _ordering_values(values: pa.Array) -> list[int | float | str | None]:
    """Ordering values as the delete encoder takes them (int, float or str), keeping the raw Avro value."""
    t = values.type
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_integer(t):
        target = pa.int64()
    elif pa.types.is_date(t):
        values, target = values.cast(pa.int32()), pa.int64()
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        target = pa.float64()
    else:
        target = pa.string()
    out: list[int | float | str | None] = values.cast(target).to_pylist()
    return out


@contextlib.contextmanager
def _remote_copies(task: OpTask, pdir: str, listing: dict[str, int]) -> Iterator[None]:
    """On an object store, the carried logs' server-side copies run while the block does (the task's merge and
    base upload): they depend on nothing the merge makes, each appears whole, and all are named by the still
    pending C, so no reader sees them before the commit. They start only after the folded logs were read and
    found sound (a refused fold writes nothing); leaving the block waits for every copy (and raises its error).
    Elsewhere the block just runs: `_carry_over` links or copies afterwards."""
    if task.carry_mode == "symlink" or not storage.is_remote(pdir) or not task.links:
        yield
        return
    pool = requests_pool()
    # sizes from the task's listing, read now (the block's stale-file cleanup edits the listing)
    copies = [pool.submit(_ensure_remote_copy, storage.join(pdir, target), storage.join(pdir, link),
                          listing.get(target), listing.get(link)) for link, target in task.links]
    try:
        yield
    except BaseException:
        settle(copies)   # the task failed: copies not yet started are dropped, running ones finish
        raise
    try:
        for done, (link, _) in zip(copies, task.links, strict=True):
            try:
                done.result()
            except storage.PublishConflict:
                raise _taken_over(task, storage.join(pdir, link)) from None
    finally:
        settle(copies)   # one copy failed: the others are not left running past the task's end


def _carry_over(task: OpTask, pdir: str, temp_dir: str, listing: dict[str, int]) -> list[dict[str, Any]]:
    """Re-home the remaining logs in slice C, in order; an existing identical link or copy is kept (on an object
    store the copies were made by `_remote_copies`)."""
    out = []
    for link, target in task.links:
        dest = storage.join(pdir, link)
        if task.carry_mode == "symlink":
            _ensure_symlink(dest, target)
        elif storage.is_remote(dest):
            pass   # copied while the task merged (_remote_copies)
        else:
            _ensure_copy(os.path.join(pdir, target), dest, os.path.join(temp_dir, link))
        out.append({"partitionPath": task.partition_path, "fileId": task.file_id, "symlink": link,
                    "target": target, "mode": task.carry_mode})
    return out


def _ensure_symlink(dest: str, target: str) -> None:
    if os.path.islink(dest):
        if os.readlink(dest) == target:
            return
        raise TidemarkError(f"{dest}: exists and links to {os.readlink(dest)!r}, not {target!r}")
    if os.path.exists(dest):
        raise TidemarkError(f"{dest}: exists and is not the planned symlink to {target!r}")
    os.symlink(target, dest)  # relative: the link keeps working if the table directory moves


def _ensure_copy(src: str, dest: str, tmp: str) -> None:
    if os.path.lexists(dest):
        if not os.path.islink(dest) and filecmp.cmp(src, dest, shallow=False):
            return
        raise TidemarkError(f"{dest}: exists and differs from {src}, the log it should copy")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)  # readers never see a half-copied log


def _ensure_remote_copy(src: str, dest: str, src_size: int | None, dest_size: int | None) -> None:
    """A server-side copy (S3 CopyObject: no byte passes through this process; the object appears whole).
    An object already at `dest` is an earlier attempt's copy of the same planned log (the name is the plan's,
    so nothing else writes it) when its size matches; anything else is refused as locally. Both sizes come
    from the task's listing (None: not listed), so a copy costs the CopyObject alone — no HEAD, no LIST."""
    if dest_size is not None:
        if src_size is None:
            src_size = storage.size(src)
        if dest_size == src_size:
            return
        raise TidemarkError(f"{dest}: exists and differs from {src}, the log it should copy")
    storage.copy_new(src, dest, src_size)   # never over a copy another run of the plan made (and committed)


def _remove_stale(task: OpTask, pdir: str, listing: dict[str, int], predicate: Callable[[str], bool]) -> None:
    """Delete leftovers of a crashed earlier attempt (named with the still-pending C, so never visible). Only
    while C is pending: a file named by a completed C is committed data, which a run taken over while it was
    paused (a zombie) must never delete. The check costs a request only when there is something to delete."""
    stale = [n for n in listing if predicate(n)]
    if not stale:
        return
    if completed_file(task.base_path, task.instant, COMPACTION) is not None:
        raise _taken_over(task, storage.join(pdir, stale[0]))
    for n in stale:
        storage.remove(storage.join(pdir, n))
        del listing[n]


def _is_base_of(name: str, file_id: str, instant: str) -> bool:
    parsed = parse_base_file_name(name)
    return parsed is not None and parsed.file_id == file_id and parsed.instant == instant


def _is_log_of(name: str, file_id: str, instant: str, version: int) -> bool:
    parsed = parse_log_file_name(name)
    return (parsed is not None and parsed.file_id == file_id and parsed.base_instant == instant
            and parsed.version == version)


def _stat(task: OpTask, name: str, size: int, items: list[LogItem], counts: _Counts) -> dict[str, Any]:
    log_records = sum(i.records.num_rows if isinstance(i, DataItem) else len(i.keys) for i in items)
    log_size = sum(task.log_sizes) if task.log_sizes else sum(storage.size(p) for p in task.log_paths)
    rel = f"{task.partition_path}/{name}" if task.partition_path else name
    superseded = counts.base_rows - counts.base_kept
    return WriteStat(
        file_id=task.file_id, path=rel, partition_path=task.partition_path,
        prev_commit=task.base_instant or "null", num_writes=counts.rows, num_update_writes=superseded,
        num_inserts=counts.from_logs, total_write_bytes=size, file_size=size,
        total_log_records=log_records, total_log_files_compacted=len(task.log_paths),
        total_log_size_compacted=log_size, total_updated_records_compacted=superseded,
        min_event_time=counts.min_et, max_event_time=counts.max_et,
        prev_base_file=storage.name_of(task.base_file) if task.base_file else None, base_file=name).to_json()
