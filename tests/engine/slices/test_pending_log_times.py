"""The pending logs' event times each deltacommit carries (engine.slices.pending_log_times): a planner on an object
store reads the latest deltacommit alone, and plans as the stats and headers would have — whatever the summary
leaves out, or gets wrong about a log's size or bytes, is resolved the old way."""
from __future__ import annotations

import dataclasses
import json

import pytest

from engine import Table
from engine.compaction import log_event_times as let
from engine.io import storage
from engine.logformat.scan import clear_validated_scans
from engine.slices import pending_log_times as plt
from engine.slices.fsview import FileSystemView
from engine.slices.pending_log_times import PendingLogTime
from engine.timeline.instants import DELTACOMMIT, Timeline
from engine.timeline.metadata import PENDING_LOG_TIMES
from tests.support.day_batches import DAY
from tests.support.day_batches import day_batch as _batch
from tests.support.day_batches import day_table as _table
from tests.support.day_batches import iso_day as _iso
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def test_entries_round_trip_and_junk_is_ignored():
    summary = {("a", "x.log.1_0-1-0"): PendingLogTime(1, 5, False, 100, "ab"), ("", "y"): PendingLogTime(2, 2, True, 7)}
    encoded = plt.encode(summary)
    assert encoded is not None and plt.decode({PENDING_LOG_TIMES: encoded}) == summary
    assert plt.decode({}) == {} and plt.decode({PENDING_LOG_TIMES: "{not json"}) == {}
    assert plt.decode({PENDING_LOG_TIMES: json.dumps({"a": {"x": [1, 2], "y": [1, "2", 0, 3], "z": [1, 2, 0, 3]}})}) \
        == {("a", "z"): PendingLogTime(1, 2, False, 3)}


def test_no_summary_above_the_bound(monkeypatch):
    monkeypatch.setattr(plt, "MAX_LOGS", 1)
    assert plt.encode({("", "x"): PendingLogTime(1, 1, False, 1)}) is not None
    assert plt.encode({("", "x"): PendingLogTime(1, 1, False, 1), ("", "y"): PendingLogTime(1, 1, False, 1)}) is None


def test_an_entry_describes_only_a_log_of_its_size():
    entry = PendingLogTime(1, 5, False, 100, "ab")
    assert entry.matches("/t/p/x", 100) and not entry.matches("/t/p/x", 101)


def _times(table: Table, monkeypatch: pytest.MonkeyPatch, summary: bool) -> dict:
    storage.clear_kept_immutable()
    clear_validated_scans()
    with monkeypatch.context() as m, storage.operation_reads():
        if not summary:
            m.setattr(plt, "latest", lambda timeline: {})
        view = FileSystemView(table.path)
        found = let.resolve_log_event_times(view, view.timeline, view.latest_slices())
    return {p: (f.min_ms, f.max_ms, f.deletes, f.partial) for p, f in found.items()}


def _plan(table: Table, monkeypatch: pytest.MonkeyPatch, summary: bool, threshold: str) -> list:
    storage.clear_kept_immutable()
    clear_validated_scans()
    with monkeypatch.context() as m:
        if not summary:
            m.setattr(plt, "latest", lambda timeline: {})
        ops = table.plan_compaction(threshold=threshold).operations
    return [dataclasses.replace(op, logs_carried=[(c.target, c.mode) for c in op.logs_carried]) for op in ops]


def _commit_gets(server) -> int:  # noqa: ANN001
    return sum(1 for r in server.counts() if r["method"] == "GET" and "/.hoodie/" in r["path"]
               and "commit" in r["path"].rsplit("/", 1)[-1])


def _history(tmp, t: Table, rollback: bool = False) -> None:  # noqa: ANN001
    """Writes with deletes, a compaction carrying half the logs over, writes after it (one rolled back)."""
    for i in range(4):
        t.write(_batch(tmp, i, i + 1))
    t.write(_batch(tmp, 4, 5, range(5, 10)), "delete")
    t.run_compaction(t.schedule_compaction(threshold=_iso(2.5), carry_over="copy").instant, local=True)
    t.write(_batch(tmp, 6, 7))
    if rollback:
        t.rollback(t.write(_batch(tmp, 5, 6, range(0, 60, 7))).instant)
    t.write(_batch(tmp, 7, 8))


@pytest.mark.parametrize("version", [6, 8, 9])
def test_planning_reads_one_deltacommit_and_plans_as_before(s3_env, tmp_path, monkeypatch, version):  # noqa: F811
    t = _table(f"{s3_env['bucket_uri']}/t", version)
    _history(tmp_path, t)
    server = s3_env["server"]
    with_summary = _times(t, monkeypatch, True)
    without = _times(t, monkeypatch, False)
    assert with_summary == without and len(with_summary) >= 16
    timeline = Timeline.load(t.path)
    latest = plt.latest(timeline)
    carried = [p for p in with_summary if f"_{t.compactions()[-1].instant}.log." in p]
    assert carried and all(p.rsplit("/", 1)[-1] in {n for _, n in latest} for p in carried), "copies named"
    assert len(latest) == len(with_summary), "every pending log: writes, deletes, carried copies"
    server.reset_counts()
    planned = _plan(t, monkeypatch, True, _iso(7.5))
    assert _commit_gets(server) == 1 and not [r for r in server.counts() if r["range"]], "one commit, no log"
    assert planned and planned == _plan(t, monkeypatch, False, _iso(7.5))


def _rewrite_summary(t: Table, change) -> None:  # noqa: ANN001
    timeline = Timeline.load(t.path)
    inst = [i for i in timeline.completed() if i.action == DELTACOMMIT][-1]
    doc = json.loads(storage.read_bytes(timeline.instant_path(inst)))
    doc["extraMetadata"][PENDING_LOG_TIMES] = change(doc["extraMetadata"][PENDING_LOG_TIMES])
    storage.write_bytes(timeline.instant_path(inst), json.dumps(doc).encode())


def _lie(encoded: str) -> str:
    """Every entry's times moved a year later; half the sizes off by one, the other half's MD5 another's."""
    doc = json.loads(encoded)
    for i, entry in enumerate(e for logs in doc.values() for e in logs.values()):
        entry[0] += 365 * DAY
        entry[1] += 365 * DAY
        if i % 2:
            entry[3] += 1
        else:
            entry[4] = "0" * 32
    return json.dumps(doc)


@pytest.mark.parametrize("version", [6, 8])
def test_a_rolled_back_write_plans_as_before(s3_env, tmp_path, monkeypatch, version):  # noqa: F811
    t = _table(f"{s3_env['bucket_uri']}/t", version)
    _history(tmp_path, t, rollback=True)
    assert _times(t, monkeypatch, True) == _times(t, monkeypatch, False)
    assert _plan(t, monkeypatch, True, _iso(7.5)) == _plan(t, monkeypatch, False, _iso(7.5))


@pytest.mark.parametrize("change", [_lie, lambda s: "{junk", lambda s: ""])
def test_a_summary_that_does_not_match_the_listing_is_ignored(s3_env, tmp_path, monkeypatch, change):  # noqa: F811
    t = _table(f"{s3_env['bucket_uri']}/t", 6)   # JSON commit metadata, rewritten here
    _history(tmp_path, t)
    before = _plan(t, monkeypatch, False, _iso(7.5))
    _rewrite_summary(t, change)
    assert _times(t, monkeypatch, True) == _times(t, monkeypatch, False)
    assert _plan(t, monkeypatch, True, _iso(7.5)) == before


def test_a_write_after_a_commit_without_summary_starts_over(s3_env, tmp_path, monkeypatch):  # noqa: F811
    """A Java writer's deltacommit records no summary: the next write records its own logs only, the rest of the
    pending logs are resolved from the write stats."""
    t = _table(f"{s3_env['bucket_uri']}/t", 6)
    for i in range(3):
        t.write(_batch(tmp_path, i, i + 1))
    _rewrite_summary(t, lambda s: "")
    mine = t.write(_batch(tmp_path, 3, 4, range(0, 10)))
    latest = plt.latest(Timeline.load(t.path))
    assert {n for _, n in latest} == {p.rsplit("/", 1)[-1] for p in mine.log_files}
    assert _times(t, monkeypatch, True) == _times(t, monkeypatch, False)
    assert _plan(t, monkeypatch, True, _iso(3.5)) == _plan(t, monkeypatch, False, _iso(3.5))


def test_local_tables_carry_no_summary(tmp_path):
    t = _table(str(tmp_path / "t"), 6)
    t.write(_batch(tmp_path, 0, 1), local=True)
    timeline = Timeline.load(t.path)
    (inst,) = [i for i in timeline.completed() if i.action == DELTACOMMIT]
    assert PENDING_LOG_TIMES not in timeline.commit_metadata(inst).extra


def test_hudi_reads_the_tables_as_without_the_summary(s3_env, tmp_path, monkeypatch):  # noqa: F811
    t = _table(f"{s3_env['bucket_uri']}/t", 6)
    _history(tmp_path, t, rollback=True)
    opts = s3_env["storage_options"]
    reads = {q: rows_by_key(hudi_read(t.path, q, storage_options=opts)) for q in ("snapshot", "read_optimized")}
    assert reads["snapshot"] == rows_by_key(t.read().table)
    timeline = Timeline.load(t.path)
    carrying = [i for i in timeline.completed() if i.action == DELTACOMMIT
                and PENDING_LOG_TIMES in timeline.commit_metadata(i).extra]
    assert carrying
    for inst in carrying:   # the same table without the summaries
        doc = json.loads(storage.read_bytes(timeline.instant_path(inst)))
        del doc["extraMetadata"][PENDING_LOG_TIMES]
        storage.write_bytes(timeline.instant_path(inst), json.dumps(doc).encode())
    assert reads == {q: rows_by_key(hudi_read(t.path, q, storage_options=opts)) for q in reads}


def test_a_write_reads_no_commit_more_than_its_schema_needs(s3_env, tmp_path):  # noqa: F811
    """As a process that holds nothing of the table: after a deltacommit the write reads that commit alone (for the
    schema, as before the summary); right after a compaction, that commit and the deltacommit before it."""
    t = _table(f"{s3_env['bucket_uri']}/t", 6)
    for i in range(3):
        t.write(_batch(tmp_path, i, i + 1))
    server = s3_env["server"]
    storage.clear_kept_immutable()
    server.reset_counts()
    t.write(_batch(tmp_path, 3, 4))
    assert _commit_gets(server) == 1
    t.run_compaction(t.schedule_compaction(threshold=_iso(2.5), carry_over="copy").instant, local=True)
    storage.clear_kept_immutable()
    server.reset_counts()
    t.write(_batch(tmp_path, 4, 5))
    assert _commit_gets(server) == 2
    assert len(plt.latest(Timeline.load(t.path))) == len([lf for sl in FileSystemView(t.path).latest_slices()
                                                          for lf in sl.log_files])
