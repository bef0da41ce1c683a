"""Hudi CLI parity for pending plans (engine.compaction.admin): validate, unschedule (whole plan or one file
group) and repair leave the snapshot as it was, ours and hudi 0.5.0's; logs written into the plan's slice
while it was pending are still read after their file group is unscheduled."""
from __future__ import annotations

import json
import os

import pytest

from engine import Table
from engine.cli.console import EXIT_ERROR, EXIT_REFUSED, main
from engine.compaction import admin, run_compaction
from engine.config.layout import create_table
from engine.errors import Refused
from engine.timeline.instants import Timeline
from tests.support.inline_spark import InlineSpark
from tests.support.oracle import hudi_read
from tests.support.pending_plans import LATE, files, group_of_late_writes, ours, pending_with_late_writes
from tests.support.table_model import HISTORY, E, T, model_of, new_table, snapshot, write


def hudi(path: str) -> dict[str, int]:
    t = hudi_read(path)
    return dict(zip(t.column("id").to_pylist(), t.column("ts").to_pylist()))


def test_validate_reports_each_file_group_and_changes_nothing(tmp_path):
    path = str(tmp_path / "t")
    table, c = pending_with_late_writes(path)
    before, hudi_before, listing = ours(path), hudi(path), files(path)

    report = table.validate_compaction(c)
    assert report.valid and report.state == "requested" and len(report.file_groups) == 2
    assert all(g.status == "Valid" and not g.errors for g in report.file_groups)
    assert sorted(len(g.logs_written_since) for g in report.file_groups) == [0, 2]
    assert ours(path) == before == model_of(HISTORY + LATE) and hudi(path) == hudi_before and files(path) == listing

    # A log the plan folds disappears: that file group is in Error, naming it; the other stays Valid.
    victim = next(g for g in report.file_groups if g.logs_compacted)
    lost = next(op for op in table.compaction(c).operations if op.file_id == victim.file_id)
    os.rename(os.path.join(path, lost.logs_compacted[0]), os.path.join(str(tmp_path), "aside"))
    broken = table.validate_compaction(c)
    assert not broken.valid
    bad = next(g for g in broken.file_groups if g.file_id == victim.file_id)
    assert bad.status == "Error" and any(lost.logs_compacted[0] in e and "missing" in e for e in bad.errors)
    assert all(g.valid for g in broken.file_groups if g.file_id != victim.file_id)


def test_unschedule_one_file_group_keeps_its_late_logs_read(tmp_path):
    path = str(tmp_path / "t")
    table, c = pending_with_late_writes(path)
    fid = group_of_late_writes(table, c)
    expected = model_of(HISTORY + LATE)
    assert ours(path) == expected and hudi(path)["k5"] == E + 1005   # hudi 0.5.0 ignores slice C while pending

    listing = files(path)
    dry = table.unschedule_compaction(c, file_id=fid, dry_run=True)
    assert dry.dry_run and len(dry.renames) == 2 and not any(x.done for x in dry.renames)
    assert files(path) == listing and ours(path) == expected     # the dry run lists, and changes nothing

    done = table.unschedule_compaction(c, file_id=fid)
    assert [x.target for x in done.renames] == [x.target for x in dry.renames] and all(x.done for x in done.renames)
    assert done.unscheduled_file_groups == [fid] and done.remaining_file_groups == 1
    assert snapshot(path) == expected                   # ours == hudi 0.5.0 == the model: k5's late logs are read
    plan = Table.open(path).compaction(c)
    assert [op.file_id for op in plan.operations] != [fid] and len(plan.operations) == 1
    assert table.validate_compaction(c).valid

    # The rest of the plan runs; what it publishes accounts for the logs left outside the base.
    run_compaction(path, spark=InlineSpark())
    assert snapshot(path) == expected
    fresh = Table.open(path).freshness()
    assert fresh.guarantee == "holds"
    assert fresh.ro_completion_time is not None and fresh.ro_completion_time.timestamp() * 1000 < T


def test_unschedule_the_whole_plan_with_late_writes(tmp_path):
    path = str(tmp_path / "t")
    table, c = pending_with_late_writes(path)
    expected = model_of(HISTORY + LATE)
    done = table.unschedule_compaction(c)
    assert done.remaining_file_groups == 0 and done.rollback_instant and len(done.renames) == 2
    timeline = Timeline.load(path)
    assert not timeline.get(c) and timeline.is_completed(done.rollback_instant)
    assert snapshot(path) == expected
    again = table.schedule_compaction(threshold=E + 5000)      # the slot is free: every log is planned again
    run_compaction(path, again.instant, spark=InlineSpark())
    assert snapshot(path) == expected


def test_unschedule_without_late_writes_leaves_hudi_snapshot_unchanged(tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    table = Table.open(path)
    before = snapshot(path)
    c = table.schedule_compaction(threshold=T).instant
    assert c is not None and table.validate_compaction(c).valid and snapshot(path) == before
    fid = table.compaction(c).operations[0].file_id
    assert table.unschedule_compaction(c, file_id=fid).renames == [] and snapshot(path) == before
    assert table.repair_compaction(c).renames == [] and snapshot(path) == before
    table.unschedule_compaction(c)
    assert snapshot(path) == before and not Timeline.load(path).pending_compactions()


def test_an_interrupted_unschedule_is_repaired(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    table, c = pending_with_late_writes(path)
    fid = group_of_late_writes(table, c)
    expected = model_of(HISTORY + LATE)
    real_rename, calls = admin.storage.rename, []

    def failing(src: str, dst: str) -> None:
        calls.append(src)
        if len(calls) == 2:
            raise OSError("disk unplugged")
        real_rename(src, dst)

    monkeypatch.setattr(admin.storage, "rename", failing)
    with pytest.raises(admin.UnscheduleInterrupted, match="compaction repair"):
        table.unschedule_compaction(c, file_id=fid)
    monkeypatch.setattr(admin.storage, "rename", real_rename)
    assert ours(path) == expected                          # half moved: every record still read, in order
    report = table.validate_compaction(c)
    assert not report.valid and any("repair" in e for g in report.file_groups for e in g.errors)
    with pytest.raises(Refused) as refused:
        table.unschedule_compaction(c, file_id=fid)
    assert refused.value.reason == "interrupted_unschedule"

    listing = files(path)
    dry = table.repair_compaction(c, dry_run=True)
    assert dry.dry_run and len(dry.renames) == 1 and not dry.renames[0].done
    assert files(path) == listing                          # the dry run lists, and changes nothing
    fixed = table.repair_compaction(c)
    assert [x.target for x in fixed.renames] == [x.target for x in dry.renames] and fixed.renames[0].done
    assert fixed.validation is not None and fixed.validation.valid and ours(path) == expected
    assert not os.path.exists(admin.journal_path(path, c))

    # Repaired, the plan can be unscheduled after all (or run).
    table.unschedule_compaction(c, file_id=fid)
    assert snapshot(path) == expected
    run_compaction(path, spark=InlineSpark())
    assert snapshot(path) == expected


def test_refusals(tmp_path):
    path = str(tmp_path / "t")
    table, c = pending_with_late_writes(path)
    from engine.errors import ConfigError

    with pytest.raises(ConfigError, match="not in pending compaction"):
        table.unschedule_compaction(c, file_id="nope")
    with pytest.raises(Refused) as unknown:
        table.validate_compaction("20990101000000000")
    assert unknown.value.reason == "unknown_instant"
    table.unschedule_compaction(c)
    run = table.schedule_compaction(threshold=T).instant
    run_compaction(path, run, spark=InlineSpark())
    with pytest.raises(Refused) as done:
        table.unschedule_compaction(str(run))
    assert done.value.reason == "already_completed"


def test_cli(tmp_path, capsys):
    path = str(tmp_path / "t")
    table, c = pending_with_late_writes(path)
    fid = group_of_late_writes(table, c)
    capsys.readouterr()
    assert main(["compaction", "validate", path, "--instant", c]) == 0
    out = capsys.readouterr().out
    assert f"compaction {c} (requested): valid" in out and out.count("Valid") == 2
    assert main(["compaction", "unschedule", path, "--instant", c, "--file-group", fid, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dry_run"] and len(dry["renames"]) == 2
    assert main(["compaction", "unschedule", path, "--instant", c, "--file-group", fid]) == 0
    assert f"unscheduled {fid} from compaction {c}" in capsys.readouterr().out
    assert main(["compaction", "repair", path, "--instant", c, "--dry-run"]) == 0
    assert "nothing to move" in capsys.readouterr().out
    os.remove(os.path.join(path, Table.open(path).compaction(c).operations[0].logs_compacted[0]))
    assert main(["compaction", "validate", path, "--instant", c, "--json"]) == EXIT_ERROR
    assert json.loads(capsys.readouterr().out)["file_groups"][0]["status"] == "Error"
    assert main(["compaction", "unschedule", path, "--instant", c]) == EXIT_REFUSED
    assert "invalid_plan" in capsys.readouterr().err


def test_an_inflight_plan_goes_back_to_requested_and_a_running_one_is_refused(tmp_path):
    from engine.io.locking import COMPACTION_LOCK_FILE, table_lock
    from engine.timeline.instants import COMPACTION, State, transition_to_inflight

    path = str(tmp_path / "t")
    table, c = pending_with_late_writes(path)
    fid = group_of_late_writes(table, c)
    transition_to_inflight(path, c, COMPACTION)
    with table_lock(path, "a run executing the plan", timeout_s=0, lock_file=COMPACTION_LOCK_FILE):
        with pytest.raises(Refused) as running:
            table.unschedule_compaction(c, file_id=fid)
        assert running.value.reason == "compaction_running"
    done = table.unschedule_compaction(c, file_id=fid)
    assert done.reverted_inflight
    assert [i.state for i in Timeline.load(path).get(c)] == [State.REQUESTED]
    assert snapshot(path) == model_of(HISTORY + LATE)


# ------------------------------------------------------------------ table version 8 (completion-time slicing)

def new_table_v8(path: str, version: int = 8) -> None:
    create_table(path, name="f", record_keys=["id"], partition_fields=[], ordering_field="ts", event_time_field="ts",
                 table_version=version, settings={"hoodie.bucket.index.num.buckets": "2",
                                            "hoodie.client.heartbeat.interval_in_ms": "100"})
    for op, rows in HISTORY:
        write(path, op, rows)


@pytest.fixture(params=[8, 9])
def layout2_version(request) -> int:
    """Table versions 8 (Hudi 1.0) and 9 (Hudi 1.1): both slice by completion time (timeline layout 2)."""
    return request.param


def pending_v8_with_late_writes(path: str, version: int = 8) -> tuple[Table, str]:
    return pending_with_late_writes(path, make=lambda p: new_table_v8(p, version))


def test_v8_validate_lists_writes_completed_since_the_plan(tmp_path, layout2_version):
    path = str(tmp_path / "t")
    table, c = pending_v8_with_late_writes(path, layout2_version)
    expected = model_of(HISTORY + LATE)
    assert snapshot(path) == expected        # on v8 hudi 0.5.0 reads the late writes while the plan is pending
    listing = files(path)
    report = table.validate_compaction(c)
    assert report.valid and len(report.file_groups) == 2
    late = [g for g in report.file_groups if g.logs_written_since]
    assert len(late) == 1 and len(late[0].logs_written_since) == 2
    assert all(f"_{c}.log." not in n for n in late[0].logs_written_since)   # named by their own writes
    assert files(path) == listing and snapshot(path) == expected

    victim = next(g for g in report.file_groups if g.logs_compacted)
    lost = next(op for op in table.compaction(c).operations if op.file_id == victim.file_id)
    os.rename(os.path.join(path, lost.logs_compacted[0]), os.path.join(str(tmp_path), "aside"))
    broken = table.validate_compaction(c)
    bad = next(g for g in broken.file_groups if g.file_id == victim.file_id)
    assert not broken.valid and any(lost.logs_compacted[0] in e and "missing" in e for e in bad.errors)


def test_v8_unschedule_one_file_group_renames_nothing_and_keeps_every_record(tmp_path, layout2_version):
    path = str(tmp_path / "t")
    table, c = pending_v8_with_late_writes(path, layout2_version)
    fid = group_of_late_writes(table, c)
    expected = model_of(HISTORY + LATE)
    data = {k: v for k, v in files(path).items() if not k.startswith(".hoodie")}
    done = table.unschedule_compaction(c, file_id=fid)
    assert done.renames == [] and done.unscheduled_file_groups == [fid] and done.remaining_file_groups == 1
    assert {k: v for k, v in files(path).items() if not k.startswith(".hoodie")} == data   # no log moved
    assert snapshot(path) == expected                       # ours == hudi 0.5.0 == the model
    assert [op.file_id for op in Table.open(path).compaction(c).operations] != [fid]
    assert table.validate_compaction(c).valid
    assert table.repair_compaction(c).renames == [] and snapshot(path) == expected
    run_compaction(path, spark=InlineSpark())
    assert snapshot(path) == expected
    assert Table.open(path).freshness().guarantee == "holds"


def test_v8_unschedule_the_whole_plan_then_plan_again(tmp_path, layout2_version):
    path = str(tmp_path / "t")
    table, c = pending_v8_with_late_writes(path, layout2_version)
    expected = model_of(HISTORY + LATE)
    done = table.unschedule_compaction(c)
    assert done.remaining_file_groups == 0 and done.rollback_instant and done.renames == []
    timeline = Timeline.load(path)
    assert not timeline.get(c) and timeline.is_completed(done.rollback_instant)
    assert snapshot(path) == expected
    again = table.schedule_compaction(threshold=E + 5000)
    run_compaction(path, again.instant, spark=InlineSpark())
    assert snapshot(path) == expected


def test_v8_unschedule_an_interrupted_run_removes_its_carried_logs(tmp_path, monkeypatch, layout2_version):
    """A run that got past carry-over left logs re-published under C's name (its outputs): going back to
    requested deletes them, so after the unschedule no log is named by an instant that will never complete."""
    from engine.io import faults

    path = str(tmp_path / "t")
    table, c = pending_v8_with_late_writes(path, layout2_version)
    expected = model_of(HISTORY + LATE)
    monkeypatch.setenv("TIDEMARK_FAULT", "execute:tasks:abort")
    with pytest.raises(faults.InjectedAbort):
        run_compaction(path, spark=InlineSpark())
    monkeypatch.delenv("TIDEMARK_FAULT")
    assert [n for n in files(path) if f"_{c}.log." in n], "the run got past carry-over"
    assert snapshot(path) == expected
    done = table.unschedule_compaction(c)
    assert done.reverted_inflight and done.renames == []
    assert not [n for n in files(path) if f"_{c}." in n]
    assert snapshot(path) == expected
    with pytest.raises(Refused) as gone:
        table.repair_compaction(c)
    assert gone.value.reason == "unknown_instant"
