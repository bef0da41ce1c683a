"""Health at a glance: per table the worst of its signals (corrupt blocks, SLA, pending-plan age, logs per
slice, failed runs in the last day, late data) with reasons; a sortable health column, worst first, on the
list and in the API."""
from __future__ import annotations

import datetime as dt

from django.utils import timezone

from tests.webapp.conftest import sample
from webapp.tables.health import assess
from webapp.tables.models import RegisteredTable, Run

NOW = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)


def base(**fields):
    return {"corrupt_log_blocks": 0, "earliest_pending_compaction": "", "file_slices_with_logs": 4,
            "remaining_log_files": 8, "late_records": 0, **fields}


def test_assess_takes_the_worst_signal():
    assert assess(None, "none", 0, NOW).level == "unknown"
    assert assess(base(), "ok", 0, NOW).level == "ok"
    assert assess(base(late_records=3), "ok", 0, NOW).reasons == ["late data: 3 records"]
    pending = assess(base(earliest_pending_compaction="20260101113000000"), "ok", 0, NOW)
    assert (pending.level, pending.reasons) == ("warning", ["a compaction plan pending for 30 min"])
    assert assess(base(earliest_pending_compaction="20260101100000000"), "ok", 0, NOW).level == "critical"
    assert assess(base(remaining_log_files=40), "ok", 0, NOW).reasons == ["10.0 log files per slice"]
    assert assess(base(), "ok", 3, NOW).level == "critical"
    worst = assess(base(corrupt_log_blocks=1, late_records=1), "breached", 1, NOW)
    assert worst.level == "critical" and len(worst.reasons) == 4


def test_health_column_sorts_worst_first(operator_client, flights):
    calm = RegisteredTable.objects.create(name="calm", path=flights.path + "-calm")
    sample(calm, timezone.now(), completion=None, lag_s=None, files=1, slices=1)
    busy = RegisteredTable.objects.create(name="busy", path=flights.path + "-busy")
    sample(busy, timezone.now(), completion=None, lag_s=None, files=1, slices=1)
    Run.objects.create(table=busy, kind="clean", state="failed", queued_at=timezone.now())
    page = operator_client.get("/?sort=health").content.decode()
    order = [page.index(f'>{name}</a>') for name in ("flights", "busy", "calm")]
    assert order == sorted(order), "critical (corrupt blocks, SLA) before warning before ok"
    assert 'data-health="warning"' in page and "1 failed runs in the last day" in page
    body = operator_client.get("/api/tables").json()
    levels = {t["name"]: t["health"]["level"] for t in body["tables"]}
    assert levels == {"flights": "critical", "busy": "warning", "calm": "ok"}
    unhealthy = operator_client.get("/?status=unhealthy").content.decode()
    assert ">calm</a>" not in unhealthy and unhealthy.index(">flights</a>") < unhealthy.index(">busy</a>")
