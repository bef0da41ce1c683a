"""Planning reads only the commit metadata that can describe a pending log (log_event_times.describing_instants):
the deltacommits and compactions at or after the oldest instant a pending log (or the log it carries) names. What
it skips never changes what is resolved or planned: each test compares with the old rule, every completed
deltacommit and compaction read."""
from __future__ import annotations

import dataclasses
import json

import pytest

from engine import Table
from engine.compaction import log_event_times as let
from engine.io import storage
from engine.io.naming import parse_log_file_name
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import COMMIT, DELTACOMMIT, Timeline
from tests.support.day_batches import DAY, T0
from tests.support.day_batches import day_batch as _batch
from tests.support.day_batches import day_table as _table
from tests.support.day_batches import iso_day as _iso
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _old_rule(timeline, logs, aliases=None):   # noqa: ANN001, ANN202  (the rule before: everything)
    return [i for i in timeline.completed() if i.action in (DELTACOMMIT, COMMIT)]


class _Reads:
    """The instants whose commit metadata is read (Timeline.commit_metadata)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.instants: list[str] = []
        original = Timeline.commit_metadata

        def counted(timeline, inst):  # noqa: ANN001, ANN202
            self.instants.append(inst.timestamp)
            return original(timeline, inst)

        monkeypatch.setattr(Timeline, "commit_metadata", counted)


def _resolve_by_stats(table: Table, monkeypatch: pytest.MonkeyPatch, old: bool) -> tuple[dict, list[str]]:
    """Every log's times as the stats give them (headers ignored, as for a Java log without tidemark's
    attributes), under the new rule or the old; and the instants whose metadata was read."""
    with monkeypatch.context() as m:
        m.setattr(let, "_from_header", lambda *a: None)
        if old:
            m.setattr(let, "describing_instants", _old_rule)
        reads = _Reads(m)
        view = FileSystemView(table.path)
        times = let.resolve_log_event_times(view, view.timeline, view.latest_slices())
    return times, reads.instants


def _plan(table: Table, monkeypatch: pytest.MonkeyPatch, old: bool, threshold: str) -> list:
    with monkeypatch.context() as m:
        m.setattr(let, "_from_header", lambda *a: None)
        if old:
            m.setattr(let, "describing_instants", _old_rule)
        ops = table.plan_compaction(threshold=threshold).operations
    # a preview's carried logs are named with an instant of its own: compared by what they carry
    return [dataclasses.replace(op, logs_carried=[(c.target, c.mode) for c in op.logs_carried]) for op in ops]


@pytest.mark.parametrize("version", [6, 8])
def test_a_long_history_reads_only_the_recent_instants(tmp_path, monkeypatch, version):
    t = _table(str(tmp_path / "t"), version)
    for i in range(8):
        t.write(_batch(tmp_path, i, i + 1), local=True)
    t.run_compaction(t.schedule_compaction(threshold=_iso(100)).instant, local=True)   # everything compacted
    for i in range(8, 14):
        t.write(_batch(tmp_path, i, i + 1), local=True)
    t.run_compaction(t.schedule_compaction(threshold=_iso(100)).instant, local=True)
    recent = [t.write(_batch(tmp_path, i, i + 1), local=True).instant for i in (14, 15)]

    new, read = _resolve_by_stats(t, monkeypatch, old=False)
    old, read_before = _resolve_by_stats(t, monkeypatch, old=True)
    assert new == old and len(new) == 8 and all(f.source == "write_stats" for f in new.values())
    last_compaction = t.compactions()[-1].instant
    # v6 logs are named with their slice's base instant (the last compaction), v8 logs with their deltacommit
    assert sorted(set(read)) == sorted(recent + ([last_compaction] if version == 6 else []))
    assert len(set(read_before)) == 16 + 2
    planned = _plan(t, monkeypatch, False, _iso(15.5))
    assert planned and planned == _plan(t, monkeypatch, True, _iso(15.5))


def test_v6_logs_java_appended_across_deltacommits_plan_as_before(tmp_path, monkeypatch):
    """Java (v6) appends a later deltacommit's blocks to the slice's log, its stat naming that log at an offset."""
    t = _table(str(tmp_path / "t"), 6)
    for i in range(4):
        t.write(_batch(tmp_path, i, i + 1), local=True)
    t.run_compaction(t.schedule_compaction(threshold=_iso(100)).instant, local=True)
    first = t.write(_batch(tmp_path, 4, 5), local=True).instant
    second = t.write(_batch(tmp_path, 5, 6), local=True).instant
    timeline = Timeline.load(t.path)
    (inst,) = [i for i in timeline.completed() if i.timestamp == second]
    doc = timeline.read_commit_metadata(inst)
    for stats in doc["partitionToWriteStats"].values():
        for stat in stats:
            folder, _, name = stat["path"].rpartition("/")
            mine = parse_log_file_name(name)
            assert mine is not None
            first_log = next(n for n in storage.list_names(storage.join(t.path, folder))
                             if n.startswith(f".{mine.file_id}_{mine.base_instant}.log.{mine.version - 1}_"))
            older, mine_path = storage.join(t.path, folder, first_log), storage.join(t.path, stat["path"])
            with open(older, "rb") as fh:
                head = fh.read()
            with open(mine_path, "rb") as fh:
                tail = fh.read()
            with open(older, "wb") as fh:   # the second write's blocks appended to the first's log
                fh.write(head + tail)
            storage.remove(mine_path)
            stat["path"] = f"{folder}/{first_log}"
            stat["logOffset"], stat["fileSizeInBytes"] = len(head), len(tail)
            stat["logFiles"] = [first_log]
    doc.get("extraMetadata", {}).pop(let.LOG_MD5, None)
    with open(timeline.instant_path(inst), "w") as fh:
        json.dump(doc, fh)

    new, read = _resolve_by_stats(t, monkeypatch, old=False)
    old, _ = _resolve_by_stats(t, monkeypatch, old=True)
    assert new == old and len(new) == 4
    assert all(f.min_ms is not None and f.min_ms < T0 + 6 * DAY < f.max_ms for f in new.values())   # both writes
    assert sorted(set(read)) == sorted([t.compactions()[-1].instant, first, second])
    planned = _plan(t, monkeypatch, False, _iso(5.5))
    assert planned and planned == _plan(t, monkeypatch, True, _iso(5.5))
    view = FileSystemView(t.path)
    logs = [(sl.partition_path, lf) for sl in view.latest_slices() for lf in sl.log_files]
    assert let.covering_stats(view.timeline, logs, {}) == _with_old_rule(monkeypatch, view, logs)


def _with_old_rule(monkeypatch, view, logs):  # noqa: ANN001, ANN202
    with monkeypatch.context() as m:
        m.setattr(let, "describing_instants", _old_rule)
        return let.covering_stats(view.timeline, logs, {})


@pytest.mark.parametrize("version,carry", [(6, "copy"), (8, "copy"), (8, "symlink")])
def test_carried_over_logs_still_resolve(tmp_path, monkeypatch, version, carry):
    """Carried logs (and copies of copies) find their original's stats in deltacommits older than the pending
    slices: the compactions' carry-over records lower the floor to them."""
    t = _table(str(tmp_path / "t"), version)
    written = [t.write(_batch(tmp_path, i, i + 1), local=True).instant for i in range(6)]
    t.run_compaction(t.schedule_compaction(threshold=_iso(2.5), carry_over=carry).instant, local=True)
    written.append(t.write(_batch(tmp_path, 6, 7), local=True).instant)
    t.run_compaction(t.schedule_compaction(threshold=_iso(3.5), carry_over=carry).instant, local=True)
    written.append(t.write(_batch(tmp_path, 7, 8), local=True).instant)

    new, read = _resolve_by_stats(t, monkeypatch, old=False)
    old, _ = _resolve_by_stats(t, monkeypatch, old=True)
    assert new == old and len(new) == 4 * 5 and all(f.source == "write_stats" for f in new.values())
    if version == 8:   # the deltacommits of days 1-3 wrote only logs compacted since: not read
        assert not set(read) & set(written[:3]) and set(written[3:]) <= set(read)
    view = FileSystemView(t.path)
    logs = [(sl.partition_path, lf) for sl in view.latest_slices() for lf in sl.log_files]
    assert let.covering_stats(view.timeline, logs, {}) == _with_old_rule(monkeypatch, view, logs)
    assert len(let.covering_stats(view.timeline, logs, {})) == 4 * 5
    planned = _plan(t, monkeypatch, False, _iso(6.5))
    assert planned and planned == _plan(t, monkeypatch, True, _iso(6.5))


def test_on_s3_a_second_plan_reads_only_what_its_logs_need(s3_env, tmp_path, monkeypatch):  # noqa: F811
    t = _table(f"{s3_env['bucket_uri']}/t", 8)
    for i in range(6):
        t.write(_batch(tmp_path, i, i + 1))
    t.run_compaction(t.schedule_compaction(threshold=_iso(100), carry_over="copy").instant, local=True)
    for i in range(6, 8):
        t.write(_batch(tmp_path, i, i + 1))
    server = s3_env["server"]
    plans = []
    counts = []
    for rule in ("summary", "describing", "old"):
        storage.clear_kept_immutable()
        from engine.logformat.scan import clear_validated_scans

        clear_validated_scans()
        with monkeypatch.context() as m:
            if rule != "summary":   # the latest deltacommit's summary of the pending logs ignored
                m.setattr(let.pending_log_times, "latest", lambda timeline: {})
            if rule == "old":
                m.setattr(let, "describing_instants", _old_rule)
            server.reset_counts()
            plans.append([dataclasses.replace(op, logs_carried=[c.target for c in op.logs_carried])
                          for op in t.plan_compaction(threshold=_iso(7.5)).operations])
            counts.append(sum(1 for r in server.counts() if r["method"] == "GET" and "/.hoodie/" in r["path"]
                              and "commit" in r["path"].rsplit("/", 1)[-1]))
    assert plans[0] == plans[1] == plans[2] and plans[0]
    # the summary: the latest deltacommit; without it, the two deltacommits since the compaction; before, all
    assert counts[0] == 1 and counts[1] == 2 and counts[2] >= 9, counts
