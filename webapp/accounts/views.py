"""The login pages, rate limited (webapp.accounts.throttle): a locked-out user name or address gets 429 — on the
site's login and on the admin's alike, since both take a password and feed the same failure count."""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.accounts import throttle
from webapp.tables.models import AuditEvent


def _locked_out(request: HttpRequest) -> bool:
    """Whether this login attempt must be refused unread; the refusal is audited."""
    username = request.POST.get("username", "")
    address = throttle.client_address(request)
    if not throttle.locked_out(username, address):
        return False
    AuditEvent.objects.create(actor=throttle.username_tried(username), action="login.throttled",
                              outcome="refused", detail={"address": address, "page": request.path})
    return True


def _throttled(response: HttpResponse) -> HttpResponse:
    response.status_code = 429
    response["Retry-After"] = str(int(throttle.window().total_seconds()))
    return response


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if _locked_out(request):
            return _throttled(self.render_to_response(self.get_context_data(form=self.get_form(), throttled=True)))
        return super().post(request, *args, **kwargs)


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's login with the same lock-out (the site's login page tells the locked-out user why)."""
    if request.method == "POST" and _locked_out(request):
        return _throttled(render(request, "accounts/login.html", {"form": AuthenticationForm(request), "throttled": True}))
    return admin.site.login(request, extra_context)
