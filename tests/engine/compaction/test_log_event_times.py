"""Event times of logs from the write stats that account for every byte of them (engine.compaction.log_event_times):
on an object store, the same answer as the headers, for fewer requests."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.compaction import log_event_times as let
from engine.compaction.log_event_times import LogEventTime, _Append, _tiled
from engine.io import storage
from engine.logformat.scan import clear_validated_scans
from engine.slices.fsview import FileSystemView
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)

APPENDS = {("p", "a"): [_Append(0, 100, 5, 9, 0)],
           ("p", "b"): [_Append(100, 150, 3, 4, 0), _Append(0, 100, 7, 8, 0)]}


def test_appends_that_tile_the_log_give_its_times():
    assert _tiled(APPENDS, set(), {}, "p", "a", 100) == LogEventTime(5, 9, "write_stats", deletes=False)
    assert _tiled(APPENDS, set(), {}, "p", "b", 150) == LogEventTime(3, 8, "write_stats", deletes=False)


@pytest.mark.parametrize("appends,size,why", [
    ([_Append(0, 100, 5, 9, 0)], 120, "bytes no completed write accounts for (a failed write, a rollback block)"),
    ([_Append(0, 100, 5, 9, 0)], 90, "a log shorter than its writes (truncated)"),
    ([_Append(0, 50, 5, 9, 0), _Append(60, 100, 5, 9, 0)], 100, "a gap"),
    ([_Append(0, 60, 5, 9, 0), _Append(50, 100, 5, 9, 0)], 100, "an overlap"),
    ([_Append(0, 100, None, None, 0)], 100, "a write without event times"),
    ([_Append(0, 100, 5, 9, 3)], 100, "deletes (Java's stats do not bound them)"),
])
def test_anything_short_of_an_exact_tiling_is_left_to_the_headers(appends, size, why):
    assert _tiled({("p", "x"): appends}, set(), {}, "p", "x", size) is None, why


def test_a_carried_copy_has_the_appends_of_the_log_it_copies():
    copies = {("p", "copy2"): "copy1", ("p", "copy1"): "a"}
    assert _tiled(APPENDS, set(), copies, "p", "copy2", 100) == LogEventTime(5, 9, "write_stats", deletes=False)
    assert _tiled(APPENDS, set(), {("p", "c"): "a"}, "q", "c", 100) is None            # another partition's alias
    assert _tiled(APPENDS, set(), {("p", "x"): "y", ("p", "y"): "x"}, "p", "x", 100) is None   # a loop ends


def _batch(tmp, i: int, keys: range, day: int) -> str:
    t = pa.table({"id": [f"k{k:03d}" for k in keys], "p": ["a" if k % 2 else "b" for k in keys],
                  "seq": pa.array([i] * len(keys), pa.int64()),
                  "ts": pa.array([1_767_225_600_000 + day * 86_400_000 + k for k in keys], pa.int64()).cast(
                      pa.timestamp("ms", tz="UTC"))})
    path = str(tmp / f"b{i}.parquet")
    pq.write_table(t, path)
    return path


def _times(table: Table, stats: bool, monkeypatch, summary: bool = False) -> dict[str, LogEventTime]:
    """Each log's times from the latest deltacommit's summary (`summary`), the stats that tile it (`stats`), else
    its header."""
    clear_validated_scans()   # each way reads what it needs
    with monkeypatch.context() as m, storage.operation_reads():
        if not summary:
            m.setattr(let, "_from_summary", lambda *a: {})
        if not stats:
            m.setattr(let, "_from_covering_stats", lambda *a: {})
        view = FileSystemView(table.path)
        return let.resolve_log_event_times(view, view.timeline, view.latest_slices())


def test_on_s3_the_stats_answer_as_the_headers_do_with_fewer_requests(s3_env, tmp_path, monkeypatch):  # noqa: F811
    t = Table.create(f"{s3_env['bucket_uri']}/t", name="t", record_keys=["id"], partition_fields=["p"],
                     ordering_field="seq", event_time_field="ts",
                     settings={"hoodie.bucket.index.num.buckets": "2"})
    t.write(_batch(tmp_path, 1, range(0, 40), 1))
    t.write(_batch(tmp_path, 2, range(0, 20), 2))
    t.write(_batch(tmp_path, 3, range(30, 60), 3))
    t.write(_batch(tmp_path, 4, range(5, 10), 4), "delete")
    t.run_compaction(t.schedule_compaction(threshold="2026-01-03T00:00:00Z", carry_over="copy").instant,
                     local=True)
    t.write(_batch(tmp_path, 5, range(0, 60, 3), 5))
    server = s3_env["server"]

    server.reset_counts()
    by_summary = _times(t, True, monkeypatch, summary=True)
    summary_reads = server.counts()
    server.reset_counts()
    by_stats = _times(t, True, monkeypatch)
    stats_reads = server.counts()
    server.reset_counts()
    by_headers = _times(t, False, monkeypatch)
    header_reads = server.counts()

    assert by_stats.keys() == by_headers.keys() == by_summary.keys() and len(by_stats) >= 6
    for path, found in [*by_stats.items(), *by_summary.items()]:
        expected = by_headers[path]
        assert (found.min_ms, found.max_ms, found.deletes) == (expected.min_ms, expected.max_ms, expected.deletes), path
    assert all(found.source == "write_stats" for found in by_summary.values())
    assert not [r for r in summary_reads if r["range"]], "the summary: no log read, not even those with deletes"
    sources = {path: found.source for path, found in by_stats.items()}
    carried = [p for p in sources if "_" + t.compactions()[-1].instant + ".log." in p]
    assert carried and all(sources[p] == "write_stats" for p in carried), "carried copies: the original's stats"
    # only the logs holding deletes were read (their headers), where the header path read every log
    deleting = {p.split("://", 1)[1] for p, found in by_headers.items() if found.deletes}
    assert deleting and {r["path"].lstrip("/") for r in stats_reads if r["range"]} == deleting
    assert len({r["path"] for r in header_reads if r["range"]}) == len(by_stats)


@pytest.mark.parametrize("carry", ["symlink", "copy"])
def test_every_log_the_stats_account_for_has_its_header_times(tmp_path, carry):
    """The stats' answer, taken for every log they tile (here on local disk), equals the headers' over a history
    with deletes, a rolled-back write, a compaction's carried logs and writes into the new slice."""
    t = Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], partition_fields=["p"], ordering_field="seq",
                     event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "2"})
    t.write(_batch(tmp_path, 1, range(0, 40), 1), local=True)
    t.write(_batch(tmp_path, 2, range(0, 20), 2), local=True)
    t.write(_batch(tmp_path, 3, range(30, 60), 3), local=True)
    t.write(_batch(tmp_path, 4, range(5, 10), 4), "delete", local=True)
    gone = t.write(_batch(tmp_path, 5, range(0, 60, 7), 5), local=True)
    t.rollback(gone.instant)
    t.run_compaction(t.schedule_compaction(threshold="2026-01-03T00:00:00Z", carry_over=carry).instant, local=True)
    t.write(_batch(tmp_path, 6, range(0, 60, 3), 6), local=True)
    view = FileSystemView(t.path)
    slices = view.latest_slices()
    by_stats = let.covering_stats(view.timeline, [(sl.partition_path, lf) for sl in slices for lf in sl.log_files], {})
    by_headers = let.resolve_log_event_times(view, view.timeline, slices)   # local: every log scanned
    assert len(by_stats) >= 4, "the untouched writes and the carried logs are accounted for"
    for path, found in by_stats.items():
        expected = by_headers[path]
        assert (found.min_ms, found.max_ms, found.deletes) == (expected.min_ms, expected.max_ms, expected.deletes), path
    assert not [p for p in by_stats if by_headers[p].deletes], "logs with deletes are left to the headers"


def test_java_stats_naming_several_logs_are_left_to_the_header_path(tmp_path):
    """Java's append stat names every log of the slice in `logFiles`: no account of one log's bytes."""
    import json

    from engine.timeline.instants import Timeline

    t = Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                     settings={"hoodie.bucket.index.num.buckets": "1"})
    for i in range(3):
        t.write(_batch(tmp_path, i, range(0, 10), i + 1), local=True)
    view = FileSystemView(t.path)
    logs = [(sl.partition_path, lf) for sl in view.latest_slices() for lf in sl.log_files]
    assert len(let.covering_stats(view.timeline, logs, {})) == 3
    timeline = Timeline.load(t.path)
    last = timeline.completed()[-1]
    doc = timeline.read_commit_metadata(last)
    (stat,) = [s for stats in doc["partitionToWriteStats"].values() for s in stats]
    stat["logFiles"] = [lf.name for _, lf in logs]   # as Java's append handle records it
    with open(timeline.instant_path(last), "w") as fh:
        json.dump(doc, fh)
    view = FileSystemView(t.path)
    assert let.covering_stats(view.timeline, logs, {}) == {}
