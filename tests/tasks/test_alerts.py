"""Alerts reach people: a webhook receiver on 127.0.0.1 and a local SMTP server (aiosmtpd) receive
run_refused, run_failed and sla_breached from a real Celery worker; a receiver answering 500 is retried with
backoff, then its delivery is marked failed. SLA breaches are audited and alerted once per breach (one
present at registration too), and an SLA trigger that cannot plan is refused once, not queued every time."""
from __future__ import annotations

import datetime as dt
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.runs import register
from tests.support.stack import free_port

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)

T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)
BEFORE_ANY_DATA = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
ATTEMPTS = 3


class Receiver(BaseHTTPRequestHandler):
    received: list[dict] = []
    failures = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/fail":
            type(self).failures += 1
            self.send_response(500)
        else:
            type(self).received.append(body)
            self.send_response(200)
        self.end_headers()

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def webhook():
    Receiver.received, Receiver.failures = [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def smtp():
    from aiosmtpd.controller import Controller

    class Inbox:
        messages: list = []

        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
            self.messages.append((envelope.rcpt_tos, envelope.content.decode(errors="replace")))
            return "250 OK"

    inbox = Inbox()
    inbox.messages = []
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller.port, inbox
    controller.stop()


def perform(table, kind: str, **params):
    from django.utils import timezone

    from tasks import runner
    from webapp.tables.models import Run

    run = Run.objects.create(table=table, kind=kind, state="queued", queued_at=timezone.now(), **params)
    runner.perform(run.pk)
    run.refresh_from_db()
    return run


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_webhook_and_email_receive_refused_failed_and_breached_with_retries(stack_env, flights, webhook, smtp,
                                                                             tmp_path, monkeypatch):
    from django.conf import settings

    from tasks import sampling
    from webapp.alerts.channels import create_channel
    from webapp.alerts.models import AlertDelivery

    smtp_port, inbox = smtp
    worker = stack_env.start_worker("alerts", warm=False, extra_env={
        "TIDEMARK_SMTP_HOST": "127.0.0.1", "TIDEMARK_SMTP_PORT": str(smtp_port),
        "TIDEMARK_ALERT_BACKOFF_S": "0.3", "TIDEMARK_ALERT_ATTEMPTS": str(ATTEMPTS),
        "TIDEMARK_ALERT_ALLOW_PRIVATE": "1"})   # the receiver is on the loopback
    monkeypatch.setattr(settings, "TIDEMARK_BASE_URL", "https://tidemark.example")  # alerts are raised here
    monkeypatch.setattr(settings, "TIDEMARK_ALERT_ALLOW_PRIVATE", True)
    try:
        events = ["run_refused", "run_failed", "sla_breached"]
        hook = create_channel(None, {"kind": "webhook", "target": webhook + "/hook", "events": events})
        mail = create_channel(None, {"kind": "email", "target": "oncall@example.com", "events": events})
        broken = create_channel(None, {"kind": "webhook", "target": webhook + "/fail", "events": ["run_refused"]})

        table = register(flights, data_latency="1h")
        refused = perform(table, "schedule", threshold=BEFORE_ANY_DATA)
        assert refused.state == "refused"
        # inside the allowed roots (outside them the run is refused, outside_roots), but no table there: failed
        failed = perform(register(stack_env.table_root / "no-table-here"), "clean")
        assert failed.state == "failed"
        table.freshness_sla_minutes = 1
        table.save()
        assert sampling.refresh(table).sla_breached

        wait_for(lambda: len(Receiver.received) == 3 and len(inbox.messages) == 3, 60, "webhook and email alerts")
        wait_for(lambda: AlertDelivery.objects.get(channel=broken).status == "failed", 60, "the failing delivery")
    finally:
        stack_env.stop("alerts")
    assert worker.poll() is not None

    by_event = {body["event"]: body for body in Receiver.received}
    assert set(by_event) == set(events)
    body = by_event["run_refused"]
    assert body["table"]["name"] == table.name and body["run"]["id"] == refused.pk
    assert body["run"]["url"] == f"https://tidemark.example/runs/{refused.pk}/"
    assert body["reason"].startswith("nothing_to_compact: nothing to compact up to 2000-01-01T00:00:00Z")
    assert body["time"].endswith("Z") and dt.datetime.fromisoformat(body["time"].replace("Z", "+00:00"))
    assert body["text"].startswith(f"Tidemark: run refused on {table.name} (run #{refused.pk})")
    assert by_event["run_failed"]["run"]["id"] == failed.pk and "no Hudi table" in by_event["run_failed"]["reason"]
    assert by_event["sla_breached"]["run"] is None and "exceeds the SLA of 1 min" in by_event["sla_breached"]["reason"]

    assert all(rcpt == ["oncall@example.com"] for rcpt, _ in inbox.messages)
    subjects = "\n".join(text for _, text in inbox.messages)
    for title in ("run refused", "run failed", "freshness SLA breached"):
        assert f"Subject: Tidemark: {title}" in subjects

    assert set(AlertDelivery.objects.filter(channel__in=[hook, mail]).values_list("status", flat=True)) == {"sent"}
    failing = AlertDelivery.objects.get(channel=broken)
    assert (failing.attempts, failing.response_code, Receiver.failures) == (ATTEMPTS, 500, ATTEMPTS)
    assert "500" in failing.last_error


@pytest.fixture
def quiet_alerts(monkeypatch):
    """Deliveries recorded but not sent (no worker in these tests)."""
    from webapp.alerts import events

    monkeypatch.setattr(events, "_dispatch", lambda _id: None)


def test_a_breach_is_audited_and_alerted_once_even_when_present_at_registration(stack_env, flights, quiet_alerts,
                                                                                 settings):
    from tasks import change_sampling, sampling
    from webapp.alerts.channels import create_channel
    from webapp.alerts.models import AlertDelivery
    from webapp.tables.models import AuditEvent, Run

    settings.TIDEMARK_ALERT_ALLOW_PRIVATE = True    # a closed port on the loopback: every delivery fails
    channel = create_channel(None, {"kind": "webhook", "target": "http://127.0.0.1:9/x",
                                    "events": ["sla_breached", "sla_recovered", "run_refused"]})
    table = register(flights, data_latency="1h", freshness_sla_minutes=1)
    # A plan is pending, so the SLA trigger cannot plan: it must be refused with that reason, once.
    assert perform(table, "schedule", threshold=T).state == "succeeded"
    assert perform(table, "metrics").state == "succeeded"     # like the sample taken at registration
    assert AuditEvent.objects.filter(table=table, action="sla_breached").count() == 1

    for _ in range(3):   # three sampling cycles, in process (beat fans them out to the sampling queue)
        change_sampling.sample_tables([table.pk])
    assert AuditEvent.objects.filter(table=table, action="sla_breached").count() == 1
    assert AlertDelivery.objects.filter(channel=channel, event="sla_breached").count() == 1
    sla_runs = Run.objects.filter(table=table, trigger="sla")
    assert [(r.state, r.refusal_reason) for r in sla_runs] == [("refused", "pending_compaction")]
    assert not Run.objects.filter(table=table, state="queued").exists()

    table.freshness_sla_minutes = None
    table.save()
    sampling.refresh(table)   # the table's data did not change: a refresh (or the floor sample) takes the sample
    assert AuditEvent.objects.filter(table=table, action="sla_recovered").count() == 1


def test_deliveries_over_the_rate_limit_are_suppressed(stack_env, flights, quiet_alerts, settings):
    from webapp.alerts.channels import create_channel
    from webapp.alerts.events import notify
    from webapp.alerts.models import AlertDelivery

    settings.TIDEMARK_ALERT_RATE_PER_HOUR = 2
    channel = create_channel(None, {"kind": "email", "target": "a@example.com", "events": ["late_data"]})
    table, other = register(flights), register(flights, name="other-name")
    for _ in range(4):
        notify("late_data", table=table, reason="late")
    notify("late_data", table=other, reason="late")
    statuses = list(AlertDelivery.objects.filter(channel=channel, table=table).order_by("pk")
                    .values_list("status", flat=True))
    assert statuses == ["pending", "pending", "suppressed", "suppressed"]
    assert AlertDelivery.objects.get(channel=channel, table=other).status == "pending"
