"""The public `Table` API end to end: typed results, settings resolution, preview, refusals, progress, tide."""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from engine import CompactionPlan, Refused, Table, TableNotFoundError, TidemarkError
from engine.errors import PENDING_COMPACTION
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.tables import THRESHOLD, create_table, day_file, table_copy, three_day_table

UTC = dt.UTC


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory) -> str:
    return three_day_table(tmp_path_factory.mktemp("api")).path


@pytest.fixture
def table(base, tmp_path) -> Table:
    return Table.open(str(table_copy(Path(base), tmp_path / "copy")))


def _hoodie_files(t: Table) -> set[str]:
    return set(os.listdir(os.path.join(t.path, ".hoodie")))


def test_open_and_create_errors(tmp_path) -> None:
    with pytest.raises(TableNotFoundError, match="no Hudi table"):
        Table.open(str(tmp_path / "missing"))
    t = create_table(tmp_path / "x")
    assert (t.name, t.config.record_key_fields, t.config.event_time_field) == ("x", ["id"], "ts")
    with pytest.raises(TidemarkError, match="already exists"):
        create_table(tmp_path / "x")


def test_write_reports_progress_and_a_typed_result(spark, tmp_path) -> None:
    t = create_table(tmp_path / "w")
    calls: list[tuple[int, int, str]] = []
    result = t.write(day_file(tmp_path, 0, "01"), on_progress=lambda d, n, u: calls.append((d, n, u)))
    assert result.records_written == 3 and result.file_groups == 1 and len(result.log_files) == 1
    assert result.committed_at is not None and result.committed_at.tzinfo is not None
    assert json.loads(json.dumps(result.to_dict()))["committed_at"].endswith("Z")
    done = [d for d, _, _ in calls]
    assert calls and done == sorted(done) and len(set(done)) == len(done)   # increasing, never repeated
    assert calls[-1][0] == calls[-1][1] > 0                                 # ends at the total


def test_plan_compaction_is_a_preview_that_writes_nothing(table) -> None:
    before = _hoodie_files(table)
    plan = table.plan_compaction(threshold=THRESHOLD)
    assert isinstance(plan, CompactionPlan) and plan.instant is None and plan.state == "preview"
    assert _hoodie_files(table) == before
    (op,) = plan.operations
    assert len(op.logs_compacted) == 2 and len(op.logs_carried) == 1 and op.logs_carried[0].mode == "symlink"
    assert op.bytes_compacted and op.bytes_carried
    assert plan.threshold == dt.datetime(2024, 1, 2, 12, tzinfo=UTC)
    # Just below the carried log's min event time (day 3), as the commit will publish — not merely T.
    assert plan.projected_ro_completion_time == dt.datetime(2024, 1, 2, 23, 59, 59, 999000, tzinfo=UTC)


def test_threshold_and_latency_forms_agree(table) -> None:
    as_iso = table.plan_compaction(threshold=THRESHOLD)
    as_dt = table.plan_compaction(threshold=dt.datetime(2024, 1, 2, 12, tzinfo=UTC))
    as_ms = table.plan_compaction(threshold=1704196800000)
    assert as_iso.threshold == as_dt.threshold == as_ms.threshold
    with pytest.raises(TidemarkError, match="no time zone"):
        table.plan_compaction(threshold=dt.datetime(2024, 1, 2))
    with pytest.raises(TidemarkError, match="malformed duration"):
        table.plan_compaction(data_latency="soon")
    with pytest.raises(TidemarkError, match="either threshold or data_latency"):
        table.plan_compaction(threshold=THRESHOLD, data_latency="2h")
    # A huge latency puts T before every log: nothing qualifies, nothing is written.
    empty = table.plan_compaction(data_latency=dt.timedelta(days=365 * 10))
    assert empty.operations == [] and empty.state == "nothing_to_do"


def test_table_settings_apply_unless_an_argument_overrides(spark, tmp_path) -> None:
    t = three_day_table(tmp_path, {"hoodie.compaction.carry.over.mode": "copy",
                                   "hoodie.compaction.event.time.data.latency": "3650d"})
    plan = t.plan_compaction(threshold=THRESHOLD)
    used = {k: (v.value, v.source) for k, v in plan.settings_used.items()}
    assert plan.carry_over == "copy" and used["hoodie.compaction.carry.over.mode"] == ("copy", "table")
    assert used["hoodie.compaction.strategy"] == ("event_time", "default")
    assert used["threshold"] == ("2024-01-02T12:00:00.000Z", "argument")
    plan = t.plan_compaction(threshold=THRESHOLD, carry_over="symlink", exact=True)
    used = {k: (v.value, v.source) for k, v in plan.settings_used.items()}
    assert plan.carry_over == "symlink" and used["hoodie.compaction.carry.over.mode"] == ("symlink", "argument")
    assert plan.exact is True and used["hoodie.compaction.exact.event.time"] == (True, "argument")
    # No threshold: the table's data latency (ten years) sets T, so nothing qualifies.
    plan = t.plan_compaction()
    assert plan.state == "nothing_to_do"


def test_schedule_run_show_and_hudi_reads_identically(table) -> None:
    plan = table.schedule_compaction(threshold=THRESHOLD)
    assert plan.state == "requested" and plan.instant is not None
    with pytest.raises(Refused) as refused:
        table.schedule_compaction(threshold=THRESHOLD)
    assert refused.value.reason == PENDING_COMPACTION and refused.value.blocking_instant == plan.instant
    pending = table.compaction(plan.instant)
    assert pending.state == "requested" and pending.result is None
    assert pending.settings_used["hoodie.compaction.carry.over.mode"].source == "default"

    calls: list[tuple[int, int, str]] = []
    result = table.run_compaction(on_progress=lambda d, n, u: calls.append((d, n, u)))
    assert calls[0][0] == 0 and calls[-1] == (1, 1, "file groups")
    assert [d for d, _, _ in calls] == sorted({d for d, _, _ in calls})
    assert result.instant == plan.instant and result.records_written == 3 and result.logs_carried_over == 1
    assert result.ro_completion_time == dt.datetime(2024, 1, 2, 23, 59, 59, 999000, tzinfo=UTC)
    assert result.to_dict()["ro_completion_time"] == "2024-01-02T23:59:59.999Z"
    assert plan.projected_ro_completion_time == result.ro_completion_time   # the preview told the truth

    done = table.compaction(plan.instant)
    assert done.state == "completed" and done.result is not None and done.result.records_written == 3
    assert done.operations[0].new_base_file and done.operations[0].logs_carried[0].mode == "symlink"
    (summary,) = table.compactions()
    assert (summary.state, summary.logs_compacted, summary.logs_carried) == ("completed", 2, 1)
    assert [i.action for i in table.timeline()] == ["deltacommit"] * 3 + ["commit"]
    assert rows_by_key(table.read(local=True).table) == rows_by_key(hudi_read(table.path))
    fresh = table.freshness()
    assert fresh.guarantee == "holds" and fresh.ro_completion_time == result.ro_completion_time


def test_rollback_and_recover(table) -> None:
    plan = table.schedule_compaction(threshold=THRESHOLD)
    rolled = table.rollback(plan.instant or "")
    assert rolled.instant == plan.instant and rolled.removed_instant_files
    assert table.compactions() == []
    with pytest.raises(Refused) as refused:
        table.rollback(plan.instant or "")
    assert refused.value.reason == "unknown_instant"
    assert table.recover().rolled_back == []


def test_clean_dry_run_and_metrics(table) -> None:
    table.schedule_compaction(threshold=THRESHOLD)
    table.run_compaction()
    dry = table.clean(retain_commits=1, dry_run=True)
    assert dry.instant is None and dry.dry_run and dry.errors == []
    metrics = table.metrics()
    assert metrics.remaining_log_files == 1 and metrics.min_event_time == dt.datetime(2024, 1, 3, tzinfo=UTC)
    assert metrics.to_dict()["min_event_time_ms"] == 1704240000000


def test_tide_buckets_add_up_to_the_backlog(table) -> None:
    buckets = table.tide("1d")
    assert [b.start for b in buckets] == [dt.datetime(2024, 1, d, tzinfo=UTC) for d in (1, 2, 3)]
    assert all(b.end is not None and b.start is not None and b.end - b.start == dt.timedelta(days=1)
               for b in buckets)
    assert [b.log_records for b in buckets] == [3, 3, 3]
    # each bucket's newest event: the max of its logs (here within the day of their min)
    assert all(b.start <= b.newest_event_time < b.end for b in buckets)
    assert table.freshness_lag(buckets=buckets) is not None
    metrics = table.metrics()
    assert sum(b.log_files for b in buckets) == metrics.remaining_log_files
    assert sum(b.log_bytes for b in buckets) == metrics.remaining_log_bytes
    with pytest.raises(TidemarkError):
        table.tide("0s")
