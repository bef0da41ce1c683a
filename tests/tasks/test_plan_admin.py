"""Validate, unschedule and repair of a pending plan as control-plane runs: under the table's lease, audited,
recorded with their result, and the snapshot (ours and hudi 0.5.0's) as the engine tests require."""
from __future__ import annotations

import pytest

from engine import Table
from tests.support.pending_plans import LATE, files, group_of_late_writes, ours, pending_with_late_writes
from tests.support.runs import register
from tests.support.table_model import HISTORY, model_of, snapshot

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)


def perform(table, kind: str, **params):
    from django.utils import timezone

    from tasks import runner
    from webapp.tables.models import Run

    run = Run.objects.create(table=table, kind=kind, state="queued", queued_at=timezone.now(), **params)
    runner.perform(run.pk)
    run.refresh_from_db()
    return run


def test_validate_unschedule_and_repair_runs(stack_env):
    from webapp.tables import plans
    from webapp.tables.models import AuditEvent

    path = str(stack_env.table_root / "admin")
    engine_table, c = pending_with_late_writes(path)
    fid = group_of_late_writes(engine_table, c)
    table = register(path)
    expected = model_of(HISTORY + LATE)

    checked = perform(table, "validate", instant=c)
    assert checked.state == "succeeded", checked.error
    assert checked.result["valid"] and [g["status"] for g in checked.result["file_groups"]] == ["Valid", "Valid"]

    listing = files(path)
    dry = perform(table, "unschedule", instant=c, file_group=fid, dry_run=True)
    assert dry.state == "succeeded" and dry.result["dry_run"] and len(dry.result["renames"]) == 2
    assert files(path) == listing and ours(path) == expected

    one = perform(table, "unschedule", instant=c, file_group=fid)
    assert one.state == "succeeded", one.error
    assert one.result["unscheduled_file_groups"] == [fid] and one.result["remaining_file_groups"] == 1
    assert snapshot(path) == expected                    # ours == hudi 0.5.0: the group's late logs are read
    left = plans.read(table).pending                      # the card shows the plan as the engine rewrote it
    assert left is not None and left.instant == c and len(left.file_groups) == 1 and fid not in left.file_groups
    assert left.planned_count == 1 and left.run is None   # planned outside the control plane
    assert AuditEvent.objects.filter(run=one, action="run.unschedule", outcome="succeeded").exists()
    # Every run stores a sample: the heatmap and the backlog age come with it.
    from webapp.tables.models import MetricSample
    latest = MetricSample.objects.filter(table=table).order_by("-taken_at", "-pk").first()
    assert latest is not None and latest.backlog_heatmap["rows"] == [""] and latest.backlog_heatmap["cells"]
    assert latest.oldest_log_instant == engine_table.timeline()[0].instant

    repaired = perform(table, "repair", instant=c, dry_run=True)
    assert repaired.state == "succeeded" and repaired.result["renames"] == []
    assert repaired.result["validation"]["valid"]

    whole = perform(table, "unschedule", instant=c)
    assert whole.state == "succeeded" and whole.result["remaining_file_groups"] == 0
    assert not [x for x in Table.open(path).compactions() if x.state != "completed"]
    assert snapshot(path) == expected and plans.read(table).pending is None

    gone = perform(table, "validate", instant=c)
    assert gone.state == "refused" and gone.refusal_reason == "unknown_instant"
