"""Health at a glance: per table the worst of its signals (corrupt blocks, SLA, backlog age, pending-plan age,
logs per slice, failed runs in the last day, late data) with reasons; a sortable health column, worst first, on the
list and in the API."""
from __future__ import annotations

import datetime as dt

from django.utils import timezone

from tests.support.records import sample
from webapp.tables.health import LEVELS, assess
from webapp.tables.models import MetricSample, RegisteredTable, Run

NOW = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)


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
    waiting = assess(base(oldest_log_instant="20260101040000000"), "ok", 0, NOW)
    assert (waiting.level, waiting.reasons) == ("warning", ["oldest uncompacted log written 8 h ago"])
    assert assess(base(oldest_log_instant="20251228120000000"), "ok", 0, NOW).reasons == [
        "oldest uncompacted log written 4 d ago"]
    assert assess(base(oldest_log_instant="20251228120000000"), "ok", 0, NOW).level == "critical"
    assert assess(base(oldest_log_instant="20260101113000000"), "ok", 0, NOW).level == "ok"
    assert assess(base(), "ok", 3, NOW).level == "critical"
    worst = assess(base(corrupt_log_blocks=1, late_records=1), "breached", 1, NOW)
    assert worst.level == "critical" and len(worst.reasons) == 4


def test_a_table_that_cannot_be_read_is_critical_whatever_its_last_sample(operator_client, flights):
    gone = "full sample failed: TableNotFoundError: no Hudi table at s3://lake/t: s3://lake/t/.hoodie does not exist"
    assert assess(base(), "ok", 0, NOW, gone).level == "critical"
    assert assess(base(), "ok", 0, NOW, gone).reasons == [f"the table cannot be read: {gone}"]
    assert assess(None, "none", 0, NOW, gone).level == "critical"   # never sampled, and failing

    from webapp.tables.models import SamplingState

    SamplingState.objects.filter(table=flights).update(error=gone)
    page = operator_client.get("/").content.decode()
    assert 'data-health="critical"' in page and "the table cannot be read" in page


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


def test_the_database_rank_agrees_with_assess(db):
    """webapp.tables.listing.with_health (the sort and filter in SQL) says what assess says, signal by signal."""
    from webapp.tables.listing import with_health
    from webapp.tables.overview import statuses

    now = timezone.now()

    def instant(minutes_ago: float) -> str:
        return (now - dt.timedelta(minutes=minutes_ago)).strftime("%Y%m%d%H%M%S") + "000"

    cases = {"unsampled": None, "calm": {}, "late": {"late": 2}, "corrupt": {"corrupt": 1},
             "many-logs": {"files": 10, "slices": 1}, "too-many-logs": {"files": 40, "slices": 1},
             "pending-20m": {"pending": 1, "since": instant(20)}, "pending-2h": {"pending": 1, "since": instant(120)},
             "failed-once": {}, "failed-thrice": {}, "breached": {"lag": 7200},
             "waiting-1h": {"waiting": instant(60)}, "waiting-8h": {"waiting": instant(480)},
             "waiting-2d": {"waiting": instant(2880)}}
    for name, fields in cases.items():
        table = RegisteredTable.objects.create(name=name, path=f"/data/{name}",
                                               freshness_sla_minutes=60 if name == "breached" else None)
        if fields is not None:
            s = sample(table, now, completion=None, lag_s=fields.get("lag", 0), files=fields.get("files", 1),
                       slices=fields.get("slices", 1), late=fields.get("late", 0), corrupt=fields.get("corrupt", 0))
            MetricSample.objects.filter(pk=s.pk).update(earliest_pending_compaction=fields.get("since", ""),
                                                        oldest_log_instant=fields.get("waiting", ""))
        for _ in range({"failed-once": 1, "failed-thrice": 3}.get(name, 0)):
            Run.objects.create(table=table, kind="clean", state="failed", queued_at=now)
    in_python = {s.table["name"]: s.health.level for s in statuses(RegisteredTable.objects.all())}
    in_sql = dict(with_health(RegisteredTable.objects.all()).values_list("name", "health_rank"))
    assert {name: LEVELS[rank] for name, rank in in_sql.items()} == in_python
    assert in_python == {"unsampled": "unknown", "calm": "ok", "late": "warning", "corrupt": "critical",
                         "many-logs": "warning", "too-many-logs": "critical", "pending-20m": "warning",
                         "pending-2h": "critical", "failed-once": "warning", "failed-thrice": "critical",
                         "breached": "critical", "waiting-1h": "ok", "waiting-8h": "warning",
                         "waiting-2d": "critical"}


def test_failures_a_later_recover_or_run_of_their_kind_redid_do_not_count(flights):
    import datetime as dt

    from webapp.tables.overview import failed_last_day

    now = timezone.now()
    for minutes, kind, state in ((50, "schedule_execute", "failed"), (40, "clean", "failed"),
                                 (30, "recover", "succeeded"), (20, "clean", "failed"),
                                 (15, "rollback", "failed"), (10, "schedule_execute", "succeeded")):
        Run.objects.create(table=flights, kind=kind, state=state, queued_at=now - dt.timedelta(minutes=minutes))
    # the clean and the rollback after the recover still count: a compaction that succeeded later redid neither
    assert failed_last_day(RegisteredTable.objects.filter(pk=flights.pk)) == {flights.pk: 2}
