"""Webhooks go to public http(s) addresses only (webapp.alerts.targets): internal targets are refused when
the channel is added and again before each delivery, and redirects are not followed — unless
TIDEMARK_ALERT_ALLOW_PRIVATE is set."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webapp.alerts import delivery, targets
from webapp.alerts.models import AlertChannel

INTERNAL = ["http://127.0.0.1:6379/", "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/hook",
            "http://192.168.0.10/", "http://[::1]:8000/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/",
            "http://localhost:8000/x"]


def post(client, body):
    return client.post("/api/alert-channels", json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("url", INTERNAL)
def test_an_internal_webhook_is_refused_when_added(operator_client, url):
    response = post(operator_client, {"kind": "webhook", "target": url, "events": ["run_failed"]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith(f"target {url!r} refused: ") and "is an internal address" in error
    assert error.endswith("set TIDEMARK_ALERT_ALLOW_PRIVATE=1 to allow webhooks inside your network")
    assert not AlertChannel.objects.exists()


def test_the_message_names_the_address_a_name_resolves_to():
    assert targets.internal_reason("http://localhost:1/").startswith("localhost (127.0.0.1) is an internal")
    assert targets.internal_reason("http://169.254.169.254/").startswith("169.254.169.254 is an internal")
    # 127.0.0.1 spelled as one number (the form refuses it before this, the delivery check would too)
    assert targets.internal_reason("http://2130706433/").startswith("2130706433 (127.0.0.1) is an internal")


@pytest.mark.parametrize("url", ["https://93.184.216.34/hook", "https://hooks.example/T0/B0"])
def test_a_public_or_unresolvable_webhook_is_accepted(operator_client, url):
    """A name that does not resolve now is checked again at delivery, which reports it unreachable."""
    response = post(operator_client, {"kind": "webhook", "target": url, "events": ["run_failed"]})
    assert response.status_code == 201, response.content


def test_allow_private_lets_an_internal_webhook_in(operator_client, settings):
    settings.TIDEMARK_ALERT_ALLOW_PRIVATE = True
    response = post(operator_client, {"kind": "webhook", "target": "http://127.0.0.1:6379/", "events": ["run_failed"]})
    assert response.status_code == 201


def test_a_delivery_checks_the_target_again(settings):
    """A channel stored before the rule (or a name now resolving inside) is not posted to."""
    with pytest.raises(delivery.DeliveryError, match=r"^webhook not sent: 127\.0\.0\.1 is an internal address"):
        delivery.post_webhook("http://127.0.0.1:9/", {"text": "x"})


@pytest.fixture
def redirecting():
    hits = []

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            hits.append(self.path)
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


def test_a_redirect_is_not_followed(redirecting, settings):
    settings.TIDEMARK_ALERT_ALLOW_PRIVATE = True      # the receiver itself is on the loopback
    url, hits = redirecting
    with pytest.raises(delivery.DeliveryError, match="webhook answered 302") as raised:
        delivery.post_webhook(url + "/hook", {"text": "x"})
    assert raised.value.code == 302 and hits == ["/hook"]


def test_only_http_and_https():
    assert targets.internal_reason("ftp://93.184.216.34/x") == "a webhook must be an http(s) URL, not ftp"
