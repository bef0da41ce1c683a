"""Login is required everywhere; viewers read, operators act; API tokens work without CSRF."""
import json

import pytest
from django.test import Client

from webapp.accounts.models import ApiToken
from webapp.tables.models import AuditEvent, Run

PAGES = ["/", "/tables/flights/", "/runs/", "/audit/"]
API = ["/api/tables", "/api/tables/flights", "/api/runs", "/api/schema"]


@pytest.mark.parametrize("url", PAGES)
def test_pages_redirect_anonymous_users_to_login(client, flights, url):
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


@pytest.mark.parametrize("url", API)
def test_api_needs_authentication(client, flights, url):
    response = client.get(url)
    assert response.status_code == 401
    assert "authentication required" in response.json()["error"]


def test_login_page_logs_in_with_password(client, operator):
    from tests.support.records import PASSWORD

    response = client.post("/accounts/login/", {"username": "olivia", "password": PASSWORD})
    assert response.status_code == 302 and response.url == "/"
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("action", ["trigger", "execute", "clean", "recover", "rollback", "refresh"])
def test_viewer_forged_page_post_is_403_and_queues_nothing(viewer_client, flights, action):
    response = viewer_client.post(f"/tables/flights/{action}", {})
    assert response.status_code == 403
    assert not Run.objects.exists()


@pytest.mark.parametrize("path, body", [("compactions", {}), ("clean", {}), ("recover", {}),
                                        ("rollback", {"instant": "20130120020000000"}), ("preview", {}),
                                        ("execute", {"instant": "20130120020000000"})])
def test_viewer_api_post_is_403(viewer_client, flights, path, body):
    response = viewer_client.post(f"/api/tables/flights/{path}", json.dumps(body), content_type="application/json")
    assert response.status_code == 403
    assert "operator role" in response.json()["error"]
    assert not Run.objects.exists()


@pytest.mark.parametrize(("action", "form_page"), [
    ("/tables/flights/trigger", "/tables/flights/"), ("/tables/flights/clean", "/tables/flights/"),
    ("/tables/register", "/"), ("/tables/discover", "/"), ("/alerts/new", "/alerts/"),
    ("/runs/7/cancel", "/runs/7/"), ("/alerts/3/delete", "/alerts/3/"),
])
def test_an_action_opened_with_get_leads_to_its_form_and_does_nothing(operator_client, flights, action, form_page):
    """A reload after a refused form, or a pasted link: back to the page with the form, with a line saying why
    — never the browser's blank "HTTP ERROR 405"; nothing is done."""
    response = operator_client.get(action, follow=False)
    assert (response.status_code, response["Location"]) == (302, form_page)
    assert not Run.objects.exists() and not AuditEvent.objects.filter(action__in=("register", "clean")).exists()
    if form_page in ("/", "/tables/flights/", "/alerts/"):
        page = operator_client.get(action, follow=True)
        assert page.status_code == 200 and b"carries out an action when its form is sent" in page.content


def test_api_actions_are_post_only(operator_client, flights):
    assert operator_client.get("/api/tables/flights/compactions").status_code == 405


def test_session_api_post_needs_csrf_token(csrf_client, flights):
    response = csrf_client.post("/api/tables/flights/clean", "{}", content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["error"]
    csrf_client.get("/tables/flights/")  # sets the csrftoken cookie
    token = csrf_client.cookies["csrftoken"].value
    response = csrf_client.post("/api/tables/flights/clean", "{}", content_type="application/json",
                                HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 202


def test_page_post_without_csrf_token_is_rejected(csrf_client, flights):
    assert csrf_client.post("/tables/flights/clean", {}).status_code == 403
    assert not Run.objects.exists()


def test_bearer_token_authenticates_without_csrf(operator, flights):
    _, raw = ApiToken.issue(operator, "ci")
    client = Client(enforce_csrf_checks=True)
    assert client.get("/api/tables", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    response = client.post("/api/tables/flights/recover", "{}", content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 202
    assert AuditEvent.objects.get(action="request.recover").user == operator
    assert client.get("/api/tables", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


def test_viewer_sees_no_action_buttons(viewer_client, flights):
    html = viewer_client.get("/tables/flights/").content.decode()
    assert "data-action" not in html and 'method="post" action="/tables/' not in html
    assert "viewer" in html
