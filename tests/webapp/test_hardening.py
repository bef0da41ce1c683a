"""Hardening of the web side: forged Host headers, login rate limiting and its audit, API token expiry and
revocation, role-less users, refusals in the audit log, NUL bytes and over-long names (400 on PostgreSQL
and SQLite alike), secure cookies / HSTS from the environment."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from tests.support.records import PASSWORD
from webapp.accounts.models import ApiToken
from webapp.tables.models import AuditEvent, RegisteredTable, Run


def test_a_forged_host_header_is_refused(operator_client):
    response = operator_client.get("/", HTTP_HOST="evil.example")
    assert response.status_code == 400


def _login(client: Client, username: str, password: str):
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_failed_logins_are_audited_and_then_throttled(operator, monkeypatch):
    monkeypatch.setenv("TIDEMARK_LOGIN_MAX_FAILURES", "3")
    client = Client()
    for _ in range(3):
        assert _login(client, operator.username, "wrong").status_code == 200
    failed = AuditEvent.objects.filter(action="login.failed", actor=operator.username)
    assert failed.count() == 3 and failed.first().detail["address"] == "127.0.0.1"
    throttled = _login(client, operator.username, PASSWORD)   # even the right password, for now
    assert throttled.status_code == 429 and b"Too many failed logins" in throttled.content
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action="login.throttled", actor=operator.username).exists()
    failed.update(at=timezone.now() - dt.timedelta(hours=1))    # the window passed
    assert _login(client, operator.username, PASSWORD).status_code == 302


def test_the_admin_login_is_throttled_too(operator, monkeypatch):
    """Failures on either login page count together, and the admin's refuses once the count is reached."""
    monkeypatch.setenv("TIDEMARK_LOGIN_MAX_FAILURES", "3")
    client = Client()
    for _ in range(2):
        assert client.post("/admin/login/", {"username": operator.username, "password": "wrong"}).status_code == 200
    assert _login(client, operator.username, "wrong").status_code == 200
    refused = client.post("/admin/login/", {"username": operator.username, "password": "wrong"})
    assert refused.status_code == 429 and refused["Retry-After"] and b"Too many failed logins" in refused.content
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action="login.throttled", detail__page="/admin/login/").exists()
    assert client.get("/admin/login/").status_code == 200, "the page itself still shows"


def test_api_tokens_expire_and_can_be_revoked(viewer):
    _, raw = ApiToken.issue(viewer, "ci", days=1)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert Client().get("/api/runs", **auth).status_code == 200
    ApiToken.objects.filter(user=viewer).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert Client().get("/api/runs", **auth).status_code == 401

    out = StringIO()
    call_command("tidemark_token", viewer.username, "--name", "ci2", stdout=out)
    fresh = {"HTTP_AUTHORIZATION": f"Bearer {out.getvalue().strip()}"}
    token = ApiToken.objects.get(name="ci2")
    assert dt.timedelta(days=89) < token.expires_at - timezone.now() <= dt.timedelta(days=90)
    assert Client().get("/api/runs", **fresh).status_code == 200
    call_command("tidemark_token", viewer.username, "--revoke", "ci2", stdout=StringIO())
    assert Client().get("/api/runs", **fresh).status_code == 401


def test_a_user_in_no_role_group_reads_nothing(flights):
    nobody = User.objects.create_user("nobody", password=PASSWORD)
    client = Client()
    client.force_login(nobody)
    for url in ("/", "/tables/flights/", "/runs/", "/audit/"):
        assert client.get(url).status_code == 403, url
    api = client.get("/api/tables")
    assert api.status_code == 403 and "no role" in api.json()["error"]
    assert client.get("/accounts/login/").status_code in (200, 302)


def test_refusals_are_in_the_audit_log(viewer_client, csrf_client, flights):
    assert Client().get("/api/tables").status_code == 401
    assert viewer_client.post("/api/tables/flights/clean", "{}", content_type="application/json").status_code == 403
    assert csrf_client.post("/tables/flights/clean").status_code == 403
    actions = list(AuditEvent.objects.filter(action__startswith="refused.").values_list("action", "actor"))
    assert ("refused.401", "anonymous (127.0.0.1)") in actions
    assert ("refused.403", "victor") in actions
    assert ("refused.csrf", "olivia") in actions
    assert not Run.objects.exists()


def test_metrics_need_a_token_by_default(db, settings):
    settings.METRICS_TOKEN, settings.METRICS_OPEN = "", False
    assert Client().get("/metrics").status_code == 403


def test_settings_take_secure_cookies_hsts_and_hosts_from_the_environment(tmp_path):
    probe = ("import django; django.setup(); from django.conf import settings as s; import json; "
             "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.ALLOWED_HOSTS]))")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings", "TIDEMARK_STATE_DIR": str(tmp_path),
           "DJANGO_SESSION_COOKIE_SECURE": "1", "DJANGO_CSRF_COOKIE_SECURE": "true",
           "DJANGO_SECURE_HSTS_SECONDS": "31536000", "DJANGO_ALLOWED_HOSTS": "tidemark.example.com"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [True, True, 31536000, ["tidemark.example.com"]]
    env = {k: v for k, v in env.items() if not k.startswith("DJANGO_") or k == "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [False, False, 0, ["localhost", "127.0.0.1", "[::1]"]]


@pytest.fixture
def stack_operator(stack_env):
    from django.contrib.auth.models import Group

    from webapp.accounts.roles import OPERATOR

    user = User.objects.create_user("hardening-op", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def test_long_names_and_nul_bytes_are_400_on_both_databases(stack_operator, stack_env):
    root = stack_env.table_root
    cases = [
        ("/api/tables", {"name": "x" * 1000, "path": str(root)}, "at most 100"),
        ("/api/tables", {"name": "nul", "path": f"{root}/a\x00b"}, "NUL byte"),
        ("/api/tables", {"name": "n\x00l", "path": str(root)}, "NUL byte"),
    ]
    for url, body, message in cases:
        response = stack_operator.post(url, json.dumps(body), content_type="application/json")
        assert response.status_code == 400, (body, response.status_code, response.content[:300])
        assert message in response.json()["error"]
    page = stack_operator.post("/tables/register", {"name": "y" * 1000, "path": str(root)}, follow=True)
    assert page.status_code == 400 and b"at most 100" in page.content   # the form, with its error message, not a 500
    assert stack_operator.get("/runs/?table=a%00b").status_code == 400
    assert stack_operator.get("/api/tables/" + "z" * 1000).status_code == 404
    assert not RegisteredTable.objects.exists()


def test_a_refused_post_is_logged_in_one_line_without_a_traceback(viewer_client, flights, caplog):
    """A viewer's POST is an expected refusal: its page is the site's 403, its log a line, never a traceback."""
    import logging

    caplog.set_level(logging.INFO)
    response = viewer_client.post("/tables/flights/clean")
    assert response.status_code == 403 and b"403" in response.content
    assert [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged for a refused POST"


def test_static_files_need_no_collect_step(settings):
    """Pages are served from static/ directly; WhiteNoise is never pointed at a folder nothing collected into
    (it would warn "No directory at" on every start)."""
    from pathlib import Path

    assert settings.WHITENOISE_USE_FINDERS
    assert settings.STATIC_ROOT is None or Path(settings.STATIC_ROOT).is_dir()
