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
    core at least, more when they read more than SHARED_TASK_BYTES together — dealt to the least loaded; a group
    bigger than that runs alone, and first."""
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
    assert len(many) == 3 and all(len(b) == 4 for b in many)   # 3 tasks' worth of bytes: 3 tasks, not 2
    assert spark_bundles([], cores=2) == []


def test_a_shared_task_keeps_more_groups_in_flight_on_an_object_store(tmp_path):
    """A group on a store waits round trips (log GETs, the base's upload) that other groups' decode fills."""
    assert shared_task_threads(str(tmp_path)) == THREADS_PER_SHARED_TASK == 2
    assert shared_task_threads("s3://lake/t") == REMOTE_THREADS_PER_SHARED_TASK > THREADS_PER_SHARED_TASK


def test_every_remote_copy_finishes_when_more_are_queued_than_the_pool_has_threads(monkeypatch):
    """A task carrying more logs than the request threads leaves its copies block with some still queued: the
    block waits for them all (none is cancelled), as when each task had its own pool."""
    import threading
    import time
    from types import SimpleNamespace

    from engine.compaction import execute
    from engine.io.threads import REQUEST_THREADS

    done, lock = [], threading.Lock()

    def copy(src, dest, src_size, dest_size):
        time.sleep(0.02)
        with lock:
            done.append(dest)

    monkeypatch.setattr(execute, "_ensure_remote_copy", copy)
    links = tuple((f"link-{i}", f"target-{i}") for i in range(REQUEST_THREADS + 8))
    task = SimpleNamespace(carry_mode="copy", links=links)
    with execute._remote_copies(task, "s3://bucket/t/p", {}):
        pass   # the merge and upload finished at once: most copies have not started
    assert sorted(done) == sorted(f"s3://bucket/t/p/{link}" for link, _ in links)


def test_a_failed_task_drops_its_copies_not_yet_started(monkeypatch):
    import threading
    from types import SimpleNamespace

    from engine.compaction import execute
    from engine.io.threads import REQUEST_THREADS

    release, started = threading.Event(), []

    def copy(src, dest, src_size, dest_size):
        started.append(dest)
        release.wait(5)

    monkeypatch.setattr(execute, "_ensure_remote_copy", copy)
    links = tuple((f"link-{i}", f"target-{i}") for i in range(REQUEST_THREADS + 8))
    task = SimpleNamespace(carry_mode="copy", links=links)
    threading.Timer(0.3, release.set).start()
    with pytest.raises(RuntimeError, match="merge failed"):
        with execute._remote_copies(task, "s3://bucket/t/p", {}):
            raise RuntimeError("merge failed")
    assert len(started) <= REQUEST_THREADS   # the queued ones never ran; the running ones were waited for


# ------------------------------------------------- carried logs: read only when a delete could make them matter

DAY_MS = 86_400_000
DAY0 = 1_767_225_600_000   # 2026-01-01T00:00:00Z


def _day_rows(keys: range, day: int, seq: int):
    import numpy as np
    import pyarrow as pa

    ks = np.asarray(list(keys))
    return pa.table({"id": [f"k{k:04d}" for k in ks], "region": ["eu" if k % 2 else "us" for k in ks],
                     "seq": pa.array(np.full(len(ks), seq), pa.int64()),
                     "ts": pa.array(DAY0 + day * DAY_MS + ks * 1000, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                     "v": pa.array(ks * 0.5 + seq)})


def _days_table(path, carried_delete: bool):
    """Days 1-2 folded by a threshold at the end of day 2; days 3-4 carried over (day 4 a delete, if asked)."""
    from engine import Table

    t = Table.create(str(path), name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                     event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "2"})
    batches = [(range(0, 200), 1, "upsert"), (range(0, 100), 2, "upsert"), (range(50, 150), 3, "upsert"),
               (range(100, 130), 4, "delete" if carried_delete else "upsert")]
    for i, (keys, day, op) in enumerate(batches):
        source = path.parent / f"{path.name}-in{i}.parquet"
        rows = _day_rows(keys, day, i + 1)
        # a processing-time delete (no ordering value): what makes a carried log's records matter to the base
        pq.write_table(rows.drop(["seq", "v"]) if op == "delete" else rows, source)
        t.write(str(source), op, local=True)
    return t


@pytest.fixture
def logs_read(monkeypatch):
    """Every log a compaction task reads whole (folded and following alike), by name."""
    from engine.compaction import execute

    seen: list[str] = []
    real = execute.read_slice_logs

    def spy(paths, *args, **kwargs):
        seen.extend(os.path.basename(p) for p in paths)
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(execute, "read_slice_logs", spy)
    return seen


def test_carried_logs_without_deletes_are_not_read_and_give_the_same_table(tmp_path, logs_read, monkeypatch):
    from engine.timeline.metadata import CompactionOperation

    threshold = DAY0 + 3 * DAY_MS - 1
    ours, old = _days_table(tmp_path / "ours", False), _days_table(tmp_path / "old", False)
    plans = {name: t.schedule_compaction(threshold=threshold, carry_over="copy")
             for name, t in (("ours", ours), ("old", old))}
    carried_ops = [op for op in Timeline.load(ours.path).compaction_plan(plans["ours"].instant).operations if op.carried]
    assert carried_ops, "the history carries logs over"
    view = FileSystemView(ours.path)
    for op in carried_ops:
        assert not op.carried_needed
        # the recorded times are the carried logs' header times
        for link in op.carried:
            scan = logformat.scan_log_file(os.path.join(view.partition_dir(op.partition_path), link.target))
            mins = [b.min_event_time for b in scan.blocks if b.min_event_time is not None]
            maxes = [b.max_event_time for b in scan.blocks if b.max_event_time is not None]
            assert op.carried_event_times[link.symlink] == (min(mins), max(maxes))

    result = ours.run_compaction(plans["ours"].instant, local=True)
    carried = {link.target for op in carried_ops for link in op.carried}
    assert logs_read and not carried & set(logs_read), "no carried log was read"

    # The same plan run as before this change (a plan that records nothing: read them, scan them at the commit).
    monkeypatch.setattr(CompactionOperation, "carried_needed", property(lambda self: True))
    monkeypatch.setattr(CompactionOperation, "carried_event_times", property(lambda self: {}))
    logs_read.clear()
    before = old.run_compaction(plans["old"].instant, local=True)
    old_ops = Timeline.load(old.path).compaction_plan(plans["old"].instant).operations
    assert {link.target for op in old_ops for link in op.carried} <= set(logs_read)
    assert (result.ro_completion_time, result.ro_freshness_time, result.records_written) == \
           (before.ro_completion_time, before.ro_freshness_time, before.records_written)
    for query in ("snapshot", "read_optimized"):
        ours_rows = rows_by_key(read_arrow(ours.path, query), with_meta=("_hoodie_record_key",))
        assert ours_rows == rows_by_key(read_arrow(old.path, query), with_meta=("_hoodie_record_key",))
        assert ours_rows == rows_by_key(hudi_read(ours.path, query), with_meta=("_hoodie_record_key",))


def test_carried_logs_with_a_delete_are_read(tmp_path, logs_read):
    t = _days_table(tmp_path / "t", True)
    before = rows_by_key(read_arrow(t.path, "snapshot"), with_meta=("_hoodie_record_key",))
    plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="copy")
    record = Timeline.load(t.path).compaction_plan(plan.instant)
    deleting = [op for op in record.operations if op.carried_needed]
    assert deleting, "day 4's delete is carried over"
    # the bytes a task will read include those carried logs (placement and balancing weigh them)
    tasks = {task.file_id: task for task in _tasks(load_table_config(t.path), Timeline.load(t.path), plan.instant,
                                                   record)}
    for op in record.operations:
        carried = sum(os.path.getsize(os.path.join(t.path, op.partition_path, s.target)) for s in op.carried)
        assert tasks[op.file_id].carried_read == (carried if op.carried_needed else 0)
    t.run_compaction(plan.instant, local=True)
    assert {link.target for op in deleting for link in op.carried} <= set(logs_read)
    assert rows_by_key(read_arrow(t.path, "snapshot"), with_meta=("_hoodie_record_key",)) == before
    assert rows_by_key(hudi_read(t.path, "read_optimized"), with_meta=("_hoodie_record_key",)) == \
           rows_by_key(read_arrow(t.path, "read_optimized"), with_meta=("_hoodie_record_key",))


def _s3_table(s3_env, tmp_path, name: str):  # noqa: F811
    """A partitioned S3 table of three writes over two days' worth of keys (logs before and after DAY0 + 3 days)."""
    from engine import Table

    t = Table.create(f"{s3_env['bucket_uri']}/{name}", name="t", record_keys=["id"], partition_fields=["region"],
                     ordering_field="seq", event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "2"})
    for i, (keys, day) in enumerate([(range(0, 200), 1), (range(0, 100), 2), (range(50, 150), 3)]):
        source = tmp_path / f"{name}-in{i}.parquet"
        pq.write_table(_day_rows(keys, day, i + 1), source)
        t.write(str(source), local=True)
    return t


def _list_prefixes(server) -> list[str]:
    from urllib.parse import parse_qs

    return [parse_qs(r["query"]).get("prefix", [""])[0] for r in server.counts()
            if r["method"] == "GET" and "list-type=2" in r["query"]]


def test_a_first_attempt_asks_the_runs_listing_and_a_retry_lists(s3_env, tmp_path, monkeypatch):  # noqa: F811
    """On a store, a task's first attempt makes no LIST (the run's listing, taken before the plan went inflight,
    answers it); a retried attempt lists its partition, so what an earlier attempt of the run left — a base file
    of C under another write token, which the run's listing never saw — is found and removed."""
    from engine.compaction import execute, in_process
    from engine.io import storage

    t = _s3_table(s3_env, tmp_path, "first")
    server = s3_env["server"]
    plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="copy")
    server.reset_counts()
    asked = []
    real_here = in_process.run_here
    monkeypatch.setattr(in_process, "run_here", lambda *args: asked.append(args[-1]) or real_here(*args))
    t.run_compaction(plan.instant, local=True)
    assert asked == [execute.REMOTE_GROUPS_PER_CPU]   # in this process: groups' round trips overlap others' work
    # the run's own listings only: the table's tree and its timeline (no partition's, no group's)
    assert _list_prefixes(server) and all(p == "first/" or p.startswith("first/.hoodie/")
                                          for p in _list_prefixes(server)), _list_prefixes(server)

    retried = _s3_table(s3_env, tmp_path, "retried")
    plan = retried.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="copy")
    real = execute.execute_operation
    left: list[str] = []

    def after_a_failed_attempt(task):
        pdir = storage.join(task.base_path, task.partition_path)
        stale = storage.join(pdir, f"{task.file_id}_9-9-0_{task.instant}.parquet")   # attempt 0 uploaded it, then died
        storage.write_bytes(stale, b"PAR1 an earlier attempt's base file")
        left.append(stale)
        return real(task)

    monkeypatch.setattr(execute, "execute_operation", after_a_failed_attempt)
    monkeypatch.setattr(execute, "_first_attempt", lambda: False)
    server.reset_counts()
    retried.run_compaction(plan.instant, local=True)
    assert {"retried/eu/", "retried/us/"} <= set(_list_prefixes(server))   # each retry listed its partition
    assert left and not [p for p in left if storage.exists(p)]
    for query in ("snapshot", "read_optimized"):
        expected = rows_by_key(read_arrow(t.path, query), with_meta=("_hoodie_record_key",))
        assert rows_by_key(read_arrow(retried.path, query), with_meta=("_hoodie_record_key",)) == expected
        theirs = hudi_read(retried.path, query, storage_options=s3_env["storage_options"])
        assert rows_by_key(theirs, with_meta=("_hoodie_record_key",)) == expected


def test_tasks_list_their_group_by_prefix_in_a_partition_of_several_pages(s3_env, tmp_path, monkeypatch):  # noqa: F811
    """Above a listing page of files a retried task lists only its group's names (two prefix LISTs), and compacts
    the same (a first attempt lists nothing: the run's listing answers it)."""
    from engine.compaction import execute
    from engine.io import storage

    whole, grouped = _s3_table(s3_env, tmp_path, "whole"), _s3_table(s3_env, tmp_path, "grouped")
    monkeypatch.setattr(execute, "_first_attempt", lambda: False)
    server = s3_env["server"]
    lists = {}
    for t, page in ((whole, execute.LIST_PAGE), (grouped, 0)):
        monkeypatch.setattr(execute, "LIST_PAGE", page)   # grouped: every partition counts as several pages
        plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="copy")
        left = storage.join(t.path, ".hoodie", ".temp", plan.instant, "attempt-1.marker")   # as a failed try leaves
        storage.write_bytes(left, b"x")
        server.reset_counts()
        t.run_compaction(plan.instant, local=True)
        lists[t.path.rsplit("/", 1)[-1]] = _list_prefixes(server)
        # the run's temp folder went with the commit (removed while the RO times were published)
        assert not storage.list_tree(storage.join(t.path, ".hoodie", ".temp", plan.instant))

    fids = {g.file_id for g in FileSystemView(grouped.path).all_file_groups()}
    by_group = [p for p in lists["grouped"] if p.rsplit("/", 1)[-1].lstrip(".")[:-1] in fids]
    assert len(by_group) == 2 * len(fids), lists["grouped"]   # `<fid>_` and `.<fid>_` per task
    partitions = {"grouped/eu/", "grouped/us/"}
    assert not partitions & set(lists["grouped"]), "no task listed its whole partition"
    assert {p.replace("whole/", "grouped/") for p in lists["whole"]} >= partitions
    for query in ("snapshot", "read_optimized"):
        expected = rows_by_key(read_arrow(whole.path, query), with_meta=("_hoodie_record_key",))
        assert rows_by_key(read_arrow(grouped.path, query), with_meta=("_hoodie_record_key",)) == expected


def test_the_temp_folder_removal_waits_its_turn_on_a_busy_pool(s3_env, monkeypatch):  # noqa: F811
    """The commit's `.temp/<C>` removal, queued behind other work when the block ends, still runs."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from engine.compaction import execute
    from engine.io import storage

    gate = threading.Event()
    pool = ThreadPoolExecutor(1)
    pool.submit(gate.wait)                        # the one thread is busy until the block has ended
    monkeypatch.setattr(execute, "requests_pool", lambda: pool)
    folder = f"{s3_env['bucket_uri']}/t/.hoodie/.temp/20240101000000000"
    storage.write_bytes(f"{folder}/attempt-1.marker", b"x")
    try:
        with execute._removing_ahead(folder):
            threading.Timer(0.2, gate.set).start()
        assert not storage.list_tree(folder)
    finally:
        gate.set()
        pool.shutdown()


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
        early = [_source(tmp_path, "d1", _day_rows(range(0, 6), 1, 5)),
                 _source(tmp_path, "d2", _day_rows(range(0, 2), 2, 10), "delete")]
        late = [_source(tmp_path, "late", _day_rows(range(0, 4), 3, 7))]
    else:   # the base gets seq 5 over seq 1; after the late delete, seq 3 meets the old row (none), not seq 5
        early = [_source(tmp_path, "d1", _day_rows(range(0, 6), 1, 1)), _source(tmp_path, "d2", _day_rows(range(0, 6), 2, 5))]
        late = [_source(tmp_path, "late-delete", _day_rows(range(2, 4), 3, 1), "delete", ordered=False),
                _source(tmp_path, "late", _day_rows(range(0, 4), 3, 3))]
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

    early = [_source(tmp_path, "d1", _day_rows(range(0, 6), 1, 5)), _source(tmp_path, "d2", _day_rows(range(10, 12), 3, 6))]
    seen = _source(tmp_path, "seen-delete", _day_rows(range(2, 4), 3, 1), "delete", ordered=False)
    late = _source(tmp_path, "late", _day_rows(range(0, 4), 3, 3))
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

    early = [_source(tmp_path, "d1", _day_rows(range(0, 6), 1, 5)),
             _source(tmp_path, "d2", _day_rows(range(0, 2), 2, 10), "delete")]
    late = _source(tmp_path, "late", _day_rows(range(0, 4), 3, 7))
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

    twin, t = _twins(tmp_path, [_source(tmp_path, "d1", _day_rows(range(0, 6), 1, 5))])
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
    from engine.compaction import execute
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
        real_write = execute._write_base

        def pause_in_upload(task, winners, tmp, name):
            if not b_done:
                take_over()
            return real_write(task, winners, tmp, name)
        monkeypatch.setattr(execute, "_write_base", pause_in_upload)

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
