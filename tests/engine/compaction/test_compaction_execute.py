"""Event-time partial compaction end to end on Spark: RO guarantee, snapshot unchanged (ours and hudi 0.5.0),
symlink and copy carry-over, exact mode, writes during a pending plan, rollback."""
from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from engine import logformat
from engine.compaction import CompactionResult, resolve_log_event_times, run_compaction, schedule_compaction
from engine.compaction.execute import (
    REMOTE_THREADS_PER_SHARED_TASK,
    RO_COMPLETION_KEY,
    RO_FRESHNESS_KEY,
    SHARED_TASK_BYTES,
    THREADS_PER_SHARED_TASK,
    _tasks,
    balanced_order,
    execute_operation,
    shared_task_threads,
    spark_bundles,
)
from engine.config.layout import create_table
from engine.config.properties import load_table_config, save_table_config
from engine.errors import CompactionRefused, RollbackRefused
from engine.logformat import BlockType
from engine.read.query import read_arrow
from engine.results import to_ms
from engine.services.rollback import rollback
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import COMPACTION, Timeline, transition_to_inflight
from tests.support.day_rows import DAY0, DAY_MS, day_rows
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)
from tests.support.spark_history import HISTORY, E, T, as_of, assert_ro_guarantee, region, ts_by_key, write


def snapshots(path) -> tuple[dict, dict]:
    return rows_by_key(read_arrow(str(path), "snapshot")), rows_by_key(hudi_read(path, "snapshot"))


@pytest.fixture(scope="module")
def templates(spark, tmp_path_factory):
    """One table per (merge mode, partitioned) with HISTORY written; tests work on copies."""
    root = tmp_path_factory.mktemp("templates")
    made = {}
    for mode, partitioned in [("event_time", True), ("commit_time", False), ("event_time", False),
                              ("commit_time", True)]:
        path = root / f"{mode}_{'part' if partitioned else 'flat'}"
        create_table(str(path), name="t", record_keys=["id"], partition_fields=["region"] if partitioned else [],
                     ordering_field="ts", event_time_field="ts", merge_mode=mode)
        for op, rows in HISTORY:
            write(spark, path, op, rows)
        made[(mode, partitioned)] = path
    return made


@pytest.fixture
def table(templates, tmp_path):
    def copy(mode: str, partitioned: bool):
        dest = tmp_path / f"{mode}_{partitioned}"
        shutil.copytree(templates[(mode, partitioned)], dest, symlinks=True)
        return dest
    return copy


def assert_no_log_at_or_before(path, threshold: int) -> None:
    """The strategy's post-condition, by header scan: every log left in the latest slices is after T."""
    view = FileSystemView(str(path))
    slices = view.latest_slices()
    for sl in slices:
        for lf in sl.log_files:
            scan = logformat.scan_log_file(lf.path)
            for block in scan.blocks:
                if block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
                    assert block.min_event_time is not None and block.min_event_time > threshold, lf.name
    for path_, t in resolve_log_event_times(view, view.timeline, slices).items():
        assert t.min_ms is not None and t.min_ms > threshold, (path_, t)


@pytest.mark.parametrize("mode,partitioned,carry", [
    ("event_time", True, "symlink"), ("commit_time", False, "copy"),
    ("event_time", False, "copy"), ("commit_time", True, "symlink"),
])
def test_partial_compaction_keeps_snapshot_and_fills_ro(spark, table, mode, partitioned, carry):
    path = table(mode, partitioned)
    before = snapshots(path)
    assert read_arrow(str(path), "read_optimized").num_rows == 0   # only logs so far: RO starts empty
    plan = schedule_compaction(str(path), threshold_ms=T, carry_over=carry)
    assert plan.written and plan.operations
    assert plan.plan["extraMetadata"]["tidemark.threshold"] == str(T)
    remaining = [s for op in plan.operations for s in op["symlinkOperations"]]
    assert remaining, "the history leaves logs after T, so something must be carried over"
    result = run_compaction(str(path), spark=spark)
    assert isinstance(result, CompactionResult) and result.instant == plan.instant
    # what each Spark task measured comes back with the run: every file group in exactly one task
    assert result.spark_tasks and sum(t.groups for t in result.spark_tasks) == len(result.base_files)
    assert sorted(t.partition for t in result.spark_tasks) == list(range(len(result.spark_tasks)))
    assert all(t.python_cpu_s >= 0 and t.python_wall_s > 0 for t in result.spark_tasks)
    assert result.to_dict()["spark_tasks"][0].keys() == {"partition", "groups", "python_cpu_s", "python_wall_s"}

    assert snapshots(path) == before                           # ours and hudi 0.5.0, unchanged
    assert before[0] == before[1]
    ours_ro, hudi_ro = read_arrow(str(path), "read_optimized"), hudi_read(path, "read_optimized")
    assert rows_by_key(ours_ro) == rows_by_key(hudi_ro)
    assert_ro_guarantee(ts_by_key(ours_ro), HISTORY, T)
    assert_no_log_at_or_before(path, T)

    assert result.logs_carried_over == len(remaining)
    for op in plan.operations:                                 # carried logs exist in the right form
        for entry in op["symlinkOperations"]:
            dest = os.path.join(str(path), op["partitionPath"] or "", entry["symlink"])
            assert os.path.islink(dest) == (carry == "symlink") and os.path.isfile(dest)
    cfg = load_table_config(str(path))
    assert int(cfg.props[RO_COMPLETION_KEY]) >= T
    assert int(cfg.props[RO_FRESHNESS_KEY]) == max(ts_by_key(ours_ro).values())
    meta = Timeline.load(str(path)).read_commit_metadata(Timeline.load(str(path)).last_completed())
    assert meta["operationType"] == "COMPACT" and meta["extraMetadata"]["tidemark.threshold"] == str(T)


@pytest.mark.parametrize("mode,partitioned,carry", [("event_time", True, "symlink"), ("commit_time", False, "copy")])
def test_exact_mode_ro_is_the_as_of_view(spark, table, mode, partitioned, carry):
    path = table(mode, partitioned)
    before = snapshots(path)
    plan = schedule_compaction(str(path), threshold_ms=T, carry_over=carry, exact=True)
    assert all(s["symlink"].split(".log.")[1].split("_")[0] != "1" for op in plan.operations
               for s in op["symlinkOperations"]), "version 1 is reserved for the spill log"
    result = run_compaction(str(path), spark=spark)
    assert result.spill_logs, "W2 mixes records on both sides of T in one log"
    assert snapshots(path) == before
    assert ts_by_key(read_arrow(str(path), "read_optimized")) == as_of(HISTORY, T)
    assert ts_by_key(hudi_read(path, "read_optimized")) == as_of(HISTORY, T)
    assert_no_log_at_or_before(path, T)
    assert not os.path.exists(os.path.join(str(path), ".hoodie", ".temp", plan.instant))


def test_second_plan_refused_and_writes_during_pending_plan_survive(spark, table):
    path = table("commit_time", False)
    plan = schedule_compaction(str(path), threshold_ms=T, carry_over="symlink")
    with pytest.raises(CompactionRefused, match=plan.instant) as refused:
        schedule_compaction(str(path), threshold_ms=T)
    assert refused.value.blocking_instant == plan.instant
    late = [("upsert", [(10, E + 5000), (30, E + 900)]), ("delete", [(11, E + 5000)])]
    for op, rows in late:
        write(spark, path, op, rows)
    result = run_compaction(str(path), spark=spark)
    expected = as_of(HISTORY + late)
    ours, theirs = snapshots(path)
    assert {k: v["ts"] for (_, k), v in ours.items()} == expected
    assert {k: v["ts"] for (_, k), v in theirs.items()} == expected
    # The late record (event time 900 < T) sits in a log of slice C, so the promise cannot grow past T.
    assert to_ms(result.ro_completion_time) == T


def test_rollback_restores_pre_plan_state(spark, table):
    path = table("event_time", True)
    before = snapshots(path)
    files_before = sorted(os.path.relpath(os.path.join(r, f), path) for r, _, fs in os.walk(path) for f in fs
                          if ".hoodie" not in r)
    plan = schedule_compaction(str(path), threshold_ms=T, carry_over="copy")
    # A crashed run: every operation executed, nothing committed.
    transition_to_inflight(str(path), plan.instant, COMPACTION)
    cfg = load_table_config(str(path))
    timeline = Timeline.load(str(path))
    for task in _tasks(cfg, timeline, plan.instant, timeline.compaction_plan(plan.instant)):
        execute_operation(task)
    assert snapshots(path) == before  # an uncommitted compaction is invisible
    result = rollback(str(path), plan.instant)
    assert result.deleted_files and result.removed_instant_files
    files_after = sorted(os.path.relpath(os.path.join(r, f), path) for r, _, fs in os.walk(path) for f in fs
                         if ".hoodie" not in r)
    assert files_after == files_before
    assert snapshots(path) == before
    assert not Timeline.load(str(path)).pending_compactions()

    again = schedule_compaction(str(path), threshold_ms=T, carry_over="symlink")
    write(spark, path, "upsert", [(3, E + 6000)])   # lands in slice C: rolling back would orphan it
    with pytest.raises(RollbackRefused, match="orphaned"):
        rollback(str(path), again.instant)
    run_compaction(str(path), spark=spark)
    with pytest.raises(RollbackRefused, match="written into its slice"):   # the write depends on C
        rollback(str(path), again.instant)
    ours, theirs = snapshots(path)
    assert ours == theirs and ours[(region(3), "k03")]["ts"] == E + 6000


def test_consecutive_compactions_link_to_real_files(spark, table):
    path = table("commit_time", True)
    cfg = load_table_config(str(path))
    cfg.props["hoodie.parquet.max.row.group.rows"] = "2"
    save_table_config(cfg)
    before = snapshots(path)
    first = schedule_compaction(str(path), threshold_ms=T, carry_over="symlink")
    r1 = run_compaction(str(path), spark=spark)
    second = schedule_compaction(str(path), threshold_ms=E + 3500, carry_over="symlink")
    assert second.written
    for op in second.operations:
        pdir = os.path.join(str(path), op["partitionPath"])
        for s in op["symlinkOperations"]:
            target = os.path.join(pdir, s["target"])
            assert os.path.isfile(target) and not os.path.islink(target), "links must not chain"
            assert first.instant not in s["target"]
    r2 = run_compaction(str(path), spark=spark)
    assert snapshots(path) == before
    ro = ts_by_key(read_arrow(str(path), "read_optimized"))
    assert_ro_guarantee(ro, HISTORY, E + 3500)
    assert ts_by_key(hudi_read(path, "read_optimized")) == ro
    assert_no_log_at_or_before(path, E + 3500)
    assert to_ms(r2.ro_freshness_time) >= to_ms(r1.ro_freshness_time) and to_ms(r2.ro_completion_time) >= E + 3500
    run_compaction(str(path), spark=spark) if schedule_compaction(str(path), strategy="unbounded").written else None
    assert snapshots(path) == before
    assert rows_by_key(read_arrow(str(path), "read_optimized")) == before[0]
    groups = []
    for sl in FileSystemView(str(path)).latest_slices():   # streamed writer: row groups ≤ the configured size
        meta = pq.ParquetFile(sl.base_file.path).metadata
        groups += [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert all(meta.row_group(i).num_rows <= 2 for i in range(meta.num_row_groups))
        assert meta.metadata[b"hoodie_min_record_key"] <= meta.metadata[b"hoodie_max_record_key"]
    assert len(groups) > len(FileSystemView(str(path)).latest_slices())   # some file needed several groups


def test_heaviest_operations_start_first_and_outputs_keep_the_plan_order(spark, table):
    path = table("event_time", True)
    run_compaction(str(path), spark=spark, instant=schedule_compaction(str(path), threshold_ms=T).instant)
    write(spark, path, "upsert", [(1, E + 7000), (2, E + 7001)])
    plan = schedule_compaction(str(path), strategy="unbounded")
    timeline = Timeline.load(str(path))
    tasks = _tasks(load_table_config(str(path)), timeline, plan.instant, timeline.compaction_plan(plan.instant))
    assert len(tasks) > 1
    for task in tasks:   # what a task weighs is what it reads: the old base and the logs it folds
        on_disk = sum(os.path.getsize(p) for p in task.log_paths)
        on_disk += os.path.getsize(task.base_file) if task.base_file else 0
        assert task.weight == on_disk > 0
    order = balanced_order(tasks)
    assert sorted(order) == list(range(len(tasks)))
    weights = [tasks[i].weight for i in order]
    assert weights == sorted(weights, reverse=True)
    assert balanced_order([tasks[0], tasks[0]]) == [0, 1]   # ties keep the plan's order
    result = run_compaction(str(path), spark=spark)
    groups = [(t.partition_path, t.file_id) for t in tasks]
    assert [tuple(p.rsplit("/", 1)[0:1]) + (p.rsplit("/", 1)[1].split("_")[0],) for p in result.base_files] == groups
    ours, theirs = snapshots(path)
    assert ours == theirs


def test_small_groups_share_spark_tasks_and_big_ones_run_alone():
    """A Spark task's own cost (~50 ms) is most of a small group's compaction: small groups share tasks — one per
    core at least, more when they read more than SHARED_TASK_BYTES together (a multiple of the cores) — dealt to the
    least loaded; a group bigger than that runs alone, and first."""
    def groups(*weights: int) -> list:
        return [SimpleNamespace(weight=w) for w in weights]

    small = groups(5, 9, 1, 7, 3, 8, 2, 4)
    bundles = spark_bundles(small, cores=2)
    assert len(bundles) == 2
    assert sorted(i for b in bundles for i in b) == list(range(8))
    assert bundles == [[1, 0, 7, 6], [5, 3, 4, 2]]   # heaviest first, each to the lighter task: 9+5+4+2, 8+7+3+1
    assert spark_bundles(groups(5, 9), cores=8) == [[1], [0]]   # never more tasks than groups
    big = SHARED_TASK_BYTES + 1
    assert spark_bundles(groups(1, big, 2, big * 2), cores=2) == [[3], [1], [2], [0]]
    many = spark_bundles(groups(*[SHARED_TASK_BYTES // 4] * 12), cores=2)
    # 3 tasks' worth of bytes: more than 2 tasks, and a multiple of the cores, so no wave leaves a core idle
    assert len(many) == 4 and all(len(b) == 3 for b in many)
    assert len(spark_bundles(groups(*[SHARED_TASK_BYTES // 4] * 28), cores=4)) == 8   # 7 tasks' worth on 4 cores
    assert spark_bundles([], cores=2) == []


def test_a_shared_task_keeps_more_groups_in_flight_on_an_object_store(tmp_path):
    """A group on a store waits round trips (log GETs, the base's upload) that other groups' decode fills."""
    assert shared_task_threads(str(tmp_path)) == THREADS_PER_SHARED_TASK == 2
    assert shared_task_threads("s3://lake/t") == REMOTE_THREADS_PER_SHARED_TASK > THREADS_PER_SHARED_TASK


def test_the_staging_folder_goes_where_files_are_staged(tmp_path, s3_env, monkeypatch):  # noqa: F811
    """Only the local layout stages C's files in `.hoodie/.temp/<C>`: it is removed there; on a store nothing
    was staged and nothing is listed."""
    from engine.compaction import execute
    from engine.io import storage

    local = tmp_path / ".hoodie" / ".temp" / "20240101000000000"
    local.mkdir(parents=True)
    (local / "base.parquet").write_bytes(b"x")
    execute._remove_staging(str(local))
    assert not local.exists()
    asked: list[str] = []
    monkeypatch.setattr(storage, "remove_tree", asked.append)
    execute._remove_staging(f"{s3_env['bucket_uri']}/t/.hoodie/.temp/20240101000000000")
    assert asked == []


def _source(tmp_path, name: str, rows, op: str = "upsert", ordered: bool = True) -> tuple[str, str]:
    """An input file; a delete without `ordered` carries no ordering value (a processing-time delete)."""
    path = tmp_path / f"{name}.parquet"
    pq.write_table(rows.drop(["seq", "v"]) if op == "delete" and not ordered else rows, path)
    return str(path), op


def _twins(tmp_path, early: list[tuple[str, str]]):
    """Two tables with the same writes; the twin is never compacted."""
    from engine import Table

    def build(name: str):
        t = Table.create(str(tmp_path / name), name="t", record_keys=["id"], partition_fields=["region"],
                         ordering_field="seq", event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})
        for path, op in early:
            t.write(path, op, local=True)
        return t

    return build("twin"), build("t")


def _assert_same(twin, t) -> None:
    key = ("_hoodie_record_key",)
    expected = rows_by_key(read_arrow(twin.path, "snapshot"), with_meta=key)
    assert rows_by_key(read_arrow(t.path, "snapshot"), with_meta=key) == expected
    assert rows_by_key(hudi_read(t.path, "snapshot"), with_meta=key) == expected
    assert rows_by_key(hudi_read(twin.path, "snapshot"), with_meta=key) == expected


@pytest.mark.parametrize("folded_delete", [True, False])
def test_a_write_during_the_run_cannot_undo_what_a_delete_decided(tmp_path, monkeypatch, folded_delete):
    """Logs written into slice C while the run executes — after its tasks listed — with a record of lower ordering
    than a delete: the group runs again at the commit (under the table lock), so after C the table reads as it did
    before C. Folded: the run's delete (seq 10) must keep beating the late record (seq 7). Late: a processing-time
    delete, after which a record competes with the slice's old base row (Hudi forgets the delete), not with the
    record the run folded into the new base."""
    from engine.compaction import in_process

    if folded_delete:
        early = [_source(tmp_path, "d1", day_rows(range(0, 6), 1, 5)),
                 _source(tmp_path, "d2", day_rows(range(0, 2), 2, 10), "delete")]
        late = [_source(tmp_path, "late", day_rows(range(0, 4), 3, 7))]
    else:   # the base gets seq 5 over seq 1; after the late delete, seq 3 meets the old row (none), not seq 5
        early = [_source(tmp_path, "d1", day_rows(range(0, 6), 1, 1)), _source(tmp_path, "d2", day_rows(range(0, 6), 2, 5))]
        late = [_source(tmp_path, "late-delete", day_rows(range(2, 4), 3, 1), "delete", ordered=False),
                _source(tmp_path, "late", day_rows(range(0, 4), 3, 3))]
    twin, t = _twins(tmp_path, early)
    for path, op in late:
        twin.write(path, op, local=True)
    plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="symlink")
    real = in_process.run_here

    def then_writes(*args, **kwargs):
        outs = real(*args, **kwargs)
        for path, op in late:   # a writer takes the table lock; the run holds only the compaction lock until its commit
            t.write(path, op, local=True)
        return outs

    monkeypatch.setattr(in_process, "run_here", then_writes)
    t.run_compaction(plan.instant, local=True)
    _assert_same(twin, t)


def test_a_delete_the_tasks_saw_in_slice_c_still_counts_when_a_record_comes_after_them(tmp_path, monkeypatch):
    """A processing-time delete written into slice C before the run (every task reads it), then a record of lower
    ordering after the tasks: that record meets the old base row, so the group runs again although its new log
    holds no delete and it folded none."""
    from engine.compaction import in_process

    early = [_source(tmp_path, "d1", day_rows(range(0, 6), 1, 5)), _source(tmp_path, "d2", day_rows(range(10, 12), 3, 6))]
    seen = _source(tmp_path, "seen-delete", day_rows(range(2, 4), 3, 1), "delete", ordered=False)
    late = _source(tmp_path, "late", day_rows(range(0, 4), 3, 3))
    twin, t = _twins(tmp_path, early)
    twin.write(*seen, local=True)
    twin.write(*late, local=True)
    plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="symlink")
    t.write(*seen, local=True)   # into slice C before the run
    real = in_process.run_here

    def then_write(*args, **kwargs):
        outs = real(*args, **kwargs)
        t.write(*late, local=True)
        return outs

    monkeypatch.setattr(in_process, "run_here", then_write)
    t.run_compaction(plan.instant, local=True)
    _assert_same(twin, t)


def test_a_write_the_tasks_listed_while_it_was_pending_counts_once_it_commits(tmp_path, monkeypatch):
    """A write's log is on storage while the tasks list (the write still pending: its blocks are not read), and
    the write commits before C does: the group runs again, so the folded delete keeps beating its record."""
    import threading

    from engine.compaction import in_process
    from engine.write import pipeline

    early = [_source(tmp_path, "d1", day_rows(range(0, 6), 1, 5)),
             _source(tmp_path, "d2", day_rows(range(0, 2), 2, 10), "delete")]
    late = _source(tmp_path, "late", day_rows(range(0, 4), 3, 7))
    twin, t = _twins(tmp_path, early)
    twin.write(*late, local=True)
    plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="symlink")
    real_complete = pipeline.complete
    logs_written, go = threading.Event(), threading.Event()

    def held_before_completing(*args, **kwargs):
        if threading.current_thread().name == "late-writer":
            logs_written.set()
            go.wait(60)
        return real_complete(*args, **kwargs)

    monkeypatch.setattr(pipeline, "complete", held_before_completing)
    real = in_process.run_here

    def around(*args, **kwargs):
        writer = threading.Thread(target=lambda: t.write(*late, local=True), name="late-writer")
        writer.start()
        assert logs_written.wait(60)   # its log is written, the write still pending
        outs = real(*args, **kwargs)
        go.set()
        writer.join(60)               # it commits, then the run's commit takes the table lock
        return outs

    monkeypatch.setattr(in_process, "run_here", around)
    t.run_compaction(plan.instant, local=True)
    _assert_same(twin, t)


def test_a_commit_that_cannot_get_the_table_lock_says_the_run_is_still_inflight(tmp_path, monkeypatch):
    from engine.compaction import execute
    from engine.errors import Refused
    from engine.lock import FileLock

    twin, t = _twins(tmp_path, [_source(tmp_path, "d1", day_rows(range(0, 6), 1, 5))])
    plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="symlink")
    monkeypatch.setenv("TIDEMARK_LOCK_TIMEOUT", "0.2")
    writer = FileLock(t.path)   # a write of this host holds the table lock the whole time
    assert writer.acquire(1)
    try:
        with pytest.raises(Refused, match=f"compaction {plan.instant} ran but was not committed.*still inflight"):
            t.run_compaction(plan.instant, local=True)
    finally:
        writer.release()
    assert Timeline.load(t.path).pending_compactions()[0].timestamp == plan.instant
    t.run_compaction(plan.instant, local=True)   # run again once the write is done
    assert execute.LOCK_FILE == ".tidemark.lock"
    _assert_same(twin, t)


# --- a zombie run (paused past its lock, taken over, resumed) changes no committed file ---------------------------

def _data_etags(s3_env, uri: str) -> dict[str, tuple[str, str]]:  # noqa: F811
    """ETag and last-modified time of every object of the table outside `.hoodie/`: its data files (a rewrite with
    the same bytes keeps the ETag, not the time)."""
    bucket, prefix = uri[len("s3://"):].split("/", 1)
    pages = s3_env["server"].client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {o["Key"]: (o["ETag"], o["LastModified"].isoformat()) for page in pages for o in page.get("Contents") or []
            if "/.hoodie/" not in o["Key"]}


@pytest.mark.parametrize("paused", ["before_its_tasks", "after_listing_before_its_upload"])
def test_a_resumed_zombie_run_changes_no_committed_file(s3_env, tmp_path, monkeypatch, paused) -> None:  # noqa: F811
    """Run A of a plan stops (a SIGSTOP, a GC pause) past its run lock's lease; run B, on another host, takes the
    lock, runs the same plan and commits it. A resumes — before its tasks listed the partition (it then finds
    B's files) or after (its upload then meets B's base file): either way it writes nothing over B's committed
    files (their ETags unchanged, no file added) and is refused `lock_lost`, naming the lock and its holder."""
    import threading
    import time

    from engine import Refused, Table
    from engine.compaction import execute, file_group_task
    from engine.config.properties import LOCK_PROVIDER_KEY, STORAGE_LOCK_PROVIDER
    from engine.errors import LOCK_LOST
    from engine.io import storage
    from engine.io.store_lock import COMPACTION_LOCK, LockData, StoreLock
    from tests.support.tables import DAYS, THRESHOLD, day_file

    monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "host-a"))
    uri = f"{s3_env['bucket_uri']}/t"
    table = Table.create(uri, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER, "hoodie.bucket.index.num.buckets": "1"})
    for i, day in enumerate(DAYS):
        table.write(day_file(tmp_path, i, day))
    c = table.schedule_compaction(threshold=THRESHOLD).instant
    run_lock = StoreLock(uri, COMPACTION_LOCK).path
    seen: dict[str, dict[str, tuple[str, str]]] = {}
    b_done: list[str] = []

    def take_over() -> None:
        """A's lease ran out while it stood still (here: made so); B, another host, runs the plan and commits."""
        b_done.append("started")
        _, etag = storage.read_tagged(run_lock)
        a_owner = json.loads(storage.read_bytes(run_lock))["owner"]
        storage.replace_if_match(run_lock, LockData(False, int(time.time() * 1000) - 60_000, a_owner).to_bytes(),
                                 etag)
        failed: list[BaseException] = []

        def run_b() -> None:
            try:
                b_done.append(Table.open(uri).run_compaction(c, local=True).instant)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                failed.append(exc)

        monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "host-b"))
        thread = threading.Thread(target=run_b)
        thread.start()
        thread.join()
        monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "host-a"))
        if failed:
            raise failed[0]
        seen["committed"] = _data_etags(s3_env, uri)
        time.sleep(1.1)   # a rewrite from now on shows in the last-modified time, whole seconds on S3

    if paused == "before_its_tasks":
        real = execute.fault_point

        def pause(operation: str, step: str) -> None:
            real(operation, step)
            if (operation, step) == ("execute", "inflight") and not b_done:
                take_over()
        monkeypatch.setattr(execute, "fault_point", pause)
    else:
        real_write = file_group_task._write_base

        def pause_in_upload(task, winners, tmp, name):
            if not b_done:
                take_over()
            return real_write(task, winners, tmp, name)
        monkeypatch.setattr(file_group_task, "_write_base", pause_in_upload)

    with pytest.raises(Refused) as refused:
        table.run_compaction(c, local=True)
    assert b_done[-1] == c   # B committed the plan
    now = _data_etags(s3_env, uri)
    assert {k: etag for k, (etag, _) in now.items()} == {k: etag for k, (etag, _) in seen["committed"].items()}
    if paused == "after_listing_before_its_upload":
        # not even rewritten with the same bytes. (Paused before its tasks, the run's listing predates B's files, so
        # it copies the carried logs again: S3 refuses that CopyObject's If-None-Match, moto ignores it.)
        assert now == seen["committed"]
    assert refused.value.reason == LOCK_LOST
    message = refused.value.message
    assert "\n" not in message and message.startswith(f"lock lost: {run_lock} ")
    assert f"stopped before committing compaction {c}" in message and "was written by another run" in message
    assert [i.state.value for i in Timeline.load(uri).instants if i.timestamp == c] == ["completed"]
