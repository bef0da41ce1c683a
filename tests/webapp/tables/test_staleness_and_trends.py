"""Item 17: staleness against the clock (list and table page, health, the table_stale alert), a channel's
test alert, and the compaction trends (duration, bytes rewritten, core-seconds) on the table page."""
import datetime as dt
import json

from django.utils import timezone

from tests.support.records import sample
from webapp.alerts.models import AlertChannel, AlertDelivery
from webapp.tables import health, history
from webapp.tables.models import Run


def _written(table, hours_ago: float, taken_at=None):
    at = timezone.now() - dt.timedelta(hours=hours_ago)
    s = sample(table, taken_at or timezone.now(), completion=None, lag_s=60)
    s.activity = {"housekeeping": {"settings": []}, "ingestion": {"last_write": "20240101000000000",
                                                                    "last_write_at": at.strftime("%Y-%m-%dT%H:%M:%S.000Z")}}
    s.save()
    return s


def test_staleness_is_a_health_signal_on_the_list_and_the_table_page(operator_client, flights):
    _written(flights, 30)
    page = operator_client.get("/").content.decode()
    cell = page[page.index("data-last-write"):][:200]
    assert "30 h ago" in cell and "badge bad" in cell
    assert "no write for 30 h" in page                                   # a health reason
    assert 'id="stale-badge"' in operator_client.get("/tables/flights/").content.decode()
    unhealthy = operator_client.get("/?status=unhealthy").content.decode()
    assert "flights" in unhealthy                                        # the SQL rank agrees
    assert health.staleness(7 * 3600) == "warning" and health.staleness(60) == "ok" and health.staleness(None) == "unknown"


def test_a_table_going_stale_is_alerted_once(flights):
    from tasks.watch import observe

    AlertChannel.objects.create(kind="webhook", target="https://hooks.example/x", events=["table_stale"])
    fresh = _written(flights, 1)
    stale = _written(flights, 25)
    assert observe(flights, stale, fresh) == ["table_stale"]
    assert observe(flights, _written(flights, 26), stale) == []          # still stale: told once
    assert AlertDelivery.objects.get().event == "table_stale"


def test_a_channel_sends_a_test_alert(operator_client, operator, monkeypatch):
    sent = []
    monkeypatch.setattr("webapp.alerts.events._dispatch", sent.append)
    channel = AlertChannel.objects.create(kind="webhook", target="https://hooks.example/x", events=["run_failed"])
    assert 'data-action="test-channel"' in operator_client.get(f"/alerts/{channel.pk}/").content.decode()
    with_commit = operator_client.post(f"/alerts/{channel.pk}/test", follow=True)
    delivery = AlertDelivery.objects.get()
    assert (delivery.event, delivery.channel, delivery.payload["text"]) == (
        "test", channel, "Tidemark: test alert: sent from the dashboard by olivia")
    assert "Test alert queued" in with_commit.content.decode()


def test_trends_of_duration_bytes_and_cost_per_compaction(operator_client, flights):
    t0 = timezone.now() - dt.timedelta(hours=2)
    for i, (seconds, size, cores) in enumerate(((40, 5 << 20, None), (90, 12 << 20, 4))):
        Run.objects.create(table=flights, kind="schedule_execute", state="succeeded", instant=f"2024010100000{i}000",
                           started_at=t0 + dt.timedelta(minutes=10 * i),
                           finished_at=t0 + dt.timedelta(minutes=10 * i, seconds=seconds),
                           result={"compaction_stats": {"log_bytes_compacted": size}, **({"cores": cores} if cores else {})})
    Run.objects.create(table=flights, kind="clean", state="succeeded", started_at=t0, finished_at=t0)
    points = history.compaction_trends(flights)
    assert [(p["seconds"], p["bytes"], p["core_seconds"]) for p in points] == [(40, 5 << 20, 40), (90, 12 << 20, 360)]
    page = operator_client.get("/tables/flights/").content.decode()
    chart = json.loads(page.split('id="chart-data" type="application/json">')[1].split("</script>")[0])
    assert len(chart["trends"]) == 2 and 'id="trend-chart"' in page
