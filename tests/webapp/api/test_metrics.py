"""/metrics: Prometheus text with the issue's metric names, built from the database."""
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from webapp.tables.models import Run

NAMES = {"tidemark_ro_completion_timestamp_seconds", "tidemark_remaining_log_files", "tidemark_remaining_log_bytes",
         "tidemark_file_slices_with_logs", "tidemark_pending_compactions", "tidemark_compactions_total",
         "tidemark_trigger_refusals_total", "tidemark_freshness_sla_breached", "tidemark_corrupt_log_blocks",
         "tidemark_compaction_log_files_compacted_total", "tidemark_compaction_log_bytes_compacted_total",
         "tidemark_compaction_records_updated_total"}


def samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def outcomes(flights):
    for state in ("succeeded", "succeeded", "failed"):
        Run.objects.create(table=flights, kind="schedule_execute", state=state)
    Run.objects.create(table=flights, kind="schedule_execute", state="refused", refusal_reason="pending_compaction")
    Run.objects.create(table=flights, kind="clean", state="succeeded")  # not a compaction


def test_metrics_parse_and_come_from_the_latest_sample(client, outcomes, settings):
    settings.METRICS_OPEN = True
    response = client.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    values = samples(response.content.decode())
    t = (("table", "flights"),)
    assert NAMES <= {name for name, _ in values}
    assert values[("tidemark_ro_completion_timestamp_seconds", t)] == 1358636400.0  # 2013-01-19T23:00:00Z
    assert values[("tidemark_remaining_log_files", t)] == 4
    assert values[("tidemark_remaining_log_bytes", t)] == 3 << 20
    assert values[("tidemark_file_slices_with_logs", t)] == 3
    assert values[("tidemark_pending_compactions", t)] == 1
    assert values[("tidemark_freshness_sla_breached", t)] == 1
    assert values[("tidemark_corrupt_log_blocks", t)] == 2
    assert values[("tidemark_compactions_total", (("outcome", "succeeded"), ("table", "flights")))] == 2
    assert values[("tidemark_compactions_total", (("outcome", "failed"), ("table", "flights")))] == 1
    assert values[("tidemark_trigger_refusals_total", (("reason", "pending_compaction"), ("table", "flights")))] == 1


def test_metrics_token_when_configured(outcomes, settings):
    settings.METRICS_TOKEN = "s3cret"
    client = Client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200


def test_hudi_compaction_metrics_and_alert_counters(client, flights, finished_compaction, settings):
    """Hudi's compaction figures under tidemark_ names in base units, compaction duration as a histogram,
    alert delivery counters."""
    settings.METRICS_OPEN = True
    from webapp.alerts.models import AlertChannel, AlertDelivery

    finished_compaction.result = {**finished_compaction.result, "compaction_stats": {
        "log_files_compacted": 3, "log_bytes_compacted": 4096, "records_updated": 17}}
    finished_compaction.save()
    sample = flights.samples.order_by("-taken_at").first()
    sample.earliest_pending_compaction, sample.latest_completed_compaction = "20130120030000000", "20130120020000500"
    sample.save()
    channel = AlertChannel.objects.create(kind="webhook", target="https://h.example/x", events=["run_failed"])
    for status in ("sent", "sent", "failed"):
        AlertDelivery.objects.create(channel=channel, event="run_failed", status=status)
    values = samples(client.get("/metrics").content.decode())
    t = (("table", "flights"),)
    assert values[("tidemark_earliest_inflight_compaction_timestamp_seconds", t)] == 1358650800.0
    assert values[("tidemark_latest_completed_compaction_timestamp_seconds", t)] == 1358647200.5
    assert values[("tidemark_compaction_log_files_compacted_total", t)] == 3
    assert values[("tidemark_compaction_log_bytes_compacted_total", t)] == 4096
    assert values[("tidemark_compaction_records_updated_total", t)] == 17
    assert values[("tidemark_compaction_duration_seconds_count", t)] == 1
    assert values[("tidemark_compaction_duration_seconds_sum", t)] == 42
    assert values[("tidemark_compaction_duration_seconds_bucket", (("le", "30.0"), ("table", "flights")))] == 0
    assert values[("tidemark_compaction_duration_seconds_bucket", (("le", "60.0"), ("table", "flights")))] == 1
    sent = (("event", "run_failed"), ("kind", "webhook"), ("status", "sent"))
    assert values[("tidemark_alert_deliveries_total", sent)] == 2


def test_metrics_are_closed_without_a_token_unless_opened(outcomes, settings):
    settings.METRICS_TOKEN, settings.METRICS_OPEN = "", False
    refused = Client().get("/metrics")
    assert refused.status_code == 403 and b"METRICS_TOKEN" in refused.content
    settings.METRICS_OPEN = True
    assert Client().get("/metrics").status_code == 200


def test_compaction_work_is_summed_over_runs_in_the_database(client, flights, finished_compaction, settings,
                                                             django_assert_max_num_queries):
    """Many runs: counters are sums, the histogram counts each run in its buckets, a run without stats or
    without timestamps adds nothing it lacks, and the number of queries does not grow with the runs."""
    settings.METRICS_OPEN = True
    import datetime as dt

    from webapp.tables.models import Run

    start = finished_compaction.started_at
    for i, seconds in enumerate((10, 100, 4000)):
        Run.objects.create(table=flights, kind=Run.Kind.EXECUTE, state=Run.State.SUCCEEDED, started_at=start,
                           finished_at=start + dt.timedelta(seconds=seconds),
                           result={"compaction_stats": {"log_files_compacted": i + 1, "records_updated": 5}})
    Run.objects.create(table=flights, kind=Run.Kind.EXECUTE, state=Run.State.SUCCEEDED, result={})  # never timed
    with django_assert_max_num_queries(12):
        values = samples(client.get("/metrics").content.decode())
    t = (("table", "flights"),)
    before = finished_compaction.result.get("compaction_stats") or {}
    assert values[("tidemark_compaction_log_files_compacted_total", t)] == 6 + (before.get("log_files_compacted") or 0)
    assert values[("tidemark_compaction_records_updated_total", t)] == 15 + (before.get("records_updated") or 0)
    assert values[("tidemark_compaction_duration_seconds_count", t)] == 4   # the fixture's 42 s run and these three
    assert values[("tidemark_compaction_duration_seconds_sum", t)] == 42 + 10 + 100 + 4000
    bucket = {le: values[("tidemark_compaction_duration_seconds_bucket", (("le", le), ("table", "flights")))]
              for le in ("5.0", "15.0", "60.0", "120.0", "3600.0", "7200.0", "+Inf")}
    assert bucket == {"5.0": 0, "15.0": 1, "60.0": 2, "120.0": 3, "3600.0": 3, "7200.0": 4, "+Inf": 4}
