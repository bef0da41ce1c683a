"""The compaction of one file group (engine.compaction.file_group_task): the carried logs' server-side copies on an
object store, carried logs read only when a delete could make them matter, and a task's listing of its partition."""
from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

from engine import logformat
from engine.compaction.execute import _tasks
from engine.config.properties import load_table_config
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from tests.support.day_rows import DAY0, DAY_MS, day_rows
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def test_every_remote_copy_finishes_when_more_are_queued_than_the_pool_has_threads(monkeypatch):
    """A task carrying more logs than the request threads leaves its copies block with some still queued: the
    block waits for them all (none is cancelled), as when each task had its own pool."""
    import threading
    import time
    from types import SimpleNamespace

    from engine.compaction import file_group_task
    from engine.io.threads import REQUEST_THREADS

    done, lock = [], threading.Lock()

    def copy(src, dest, src_size, dest_size):
        time.sleep(0.02)
        with lock:
            done.append(dest)

    monkeypatch.setattr(file_group_task, "_ensure_remote_copy", copy)
    links = tuple((f"link-{i}", f"target-{i}") for i in range(REQUEST_THREADS + 8))
    task = SimpleNamespace(carry_mode="copy", links=links)
    with file_group_task._remote_copies(task, "s3://bucket/t/p", {}):
        pass   # the merge and upload finished at once: most copies have not started
    assert sorted(done) == sorted(f"s3://bucket/t/p/{link}" for link, _ in links)


def test_a_failed_task_drops_its_copies_not_yet_started(monkeypatch):
    import threading
    from types import SimpleNamespace

    from engine.compaction import file_group_task
    from engine.io.threads import REQUEST_THREADS

    release, started = threading.Event(), []

    def copy(src, dest, src_size, dest_size):
        started.append(dest)
        release.wait(5)

    monkeypatch.setattr(file_group_task, "_ensure_remote_copy", copy)
    links = tuple((f"link-{i}", f"target-{i}") for i in range(REQUEST_THREADS + 8))
    task = SimpleNamespace(carry_mode="copy", links=links)
    threading.Timer(0.3, release.set).start()
    with pytest.raises(RuntimeError, match="merge failed"):
        with file_group_task._remote_copies(task, "s3://bucket/t/p", {}):
            raise RuntimeError("merge failed")
    assert len(started) <= REQUEST_THREADS   # the queued ones never ran; the running ones were waited for


# ------------------------------------------------- carried logs: read only when a delete could make them matter


def _days_table(path, carried_delete: bool):
    """Days 1-2 folded by a threshold at the end of day 2; days 3-4 carried over (day 4 a delete, if asked)."""
    from engine import Table

    t = Table.create(str(path), name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                     event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "2"})
    batches = [(range(0, 200), 1, "upsert"), (range(0, 100), 2, "upsert"), (range(50, 150), 3, "upsert"),
               (range(100, 130), 4, "delete" if carried_delete else "upsert")]
    for i, (keys, day, op) in enumerate(batches):
        source = path.parent / f"{path.name}-in{i}.parquet"
        rows = day_rows(keys, day, i + 1)
        # a processing-time delete (no ordering value): what makes a carried log's records matter to the base
        pq.write_table(rows.drop(["seq", "v"]) if op == "delete" else rows, source)
        t.write(str(source), op, local=True)
    return t


@pytest.fixture
def logs_read(monkeypatch):
    """Every log a compaction task reads whole (folded and following alike), by name."""
    from engine.compaction import file_group_task

    seen: list[str] = []
    real = file_group_task.read_slice_logs

    def spy(paths, *args, **kwargs):
        seen.extend(os.path.basename(p) for p in paths)
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(file_group_task, "read_slice_logs", spy)
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
        pq.write_table(day_rows(keys, day, i + 1), source)
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
    from engine.compaction import execute, file_group_task, in_process
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
    monkeypatch.setattr(file_group_task, "_first_attempt", lambda: False)
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
    from engine.compaction import file_group_task
    from engine.io import storage

    whole, grouped = _s3_table(s3_env, tmp_path, "whole"), _s3_table(s3_env, tmp_path, "grouped")
    monkeypatch.setattr(file_group_task, "_first_attempt", lambda: False)
    server = s3_env["server"]
    lists = {}
    for t, page in ((whole, file_group_task.LIST_PAGE), (grouped, 0)):
        monkeypatch.setattr(file_group_task, "LIST_PAGE", page)   # grouped: every partition counts as several pages
        plan = t.schedule_compaction(threshold=DAY0 + 3 * DAY_MS - 1, carry_over="copy")
        left = storage.join(t.path, ".hoodie", ".temp", plan.instant, "attempt-1.marker")   # as a failed try leaves
        storage.write_bytes(left, b"x")
        server.reset_counts()
        t.run_compaction(plan.instant, local=True)
        lists[t.path.rsplit("/", 1)[-1]] = _list_prefixes(server)
        # nothing is staged on a store, so the commit lists no `.temp/<C>`; what a failed try left, recover sweeps
        temp = storage.join(t.path, ".hoodie", ".temp", plan.instant)
        assert storage.list_tree(temp) and not [p for p in lists[t.path.rsplit("/", 1)[-1]] if ".temp" in p]
        t.recover()
        assert not storage.list_tree(temp)

    fids = {g.file_id for g in FileSystemView(grouped.path).all_file_groups()}
    by_group = [p for p in lists["grouped"] if p.rsplit("/", 1)[-1].lstrip(".")[:-1] in fids]
    assert len(by_group) == 2 * len(fids), lists["grouped"]   # `<fid>_` and `.<fid>_` per task
    partitions = {"grouped/eu/", "grouped/us/"}
    assert not partitions & set(lists["grouped"]), "no task listed its whole partition"
    assert {p.replace("whole/", "grouped/") for p in lists["whole"]} >= partitions
    for query in ("snapshot", "read_optimized"):
        expected = rows_by_key(read_arrow(whole.path, query), with_meta=("_hoodie_record_key",))
        assert rows_by_key(read_arrow(grouped.path, query), with_meta=("_hoodie_record_key",)) == expected
