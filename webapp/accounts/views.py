"""The login page, rate limited (webapp.accounts.throttle): a locked-out user name or address gets 429."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse

from webapp.accounts import throttle
from webapp.tables.models import AuditEvent


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")
        address = throttle.client_address(request)
        if throttle.locked_out(username, address):
            AuditEvent.objects.create(actor=throttle.username_tried(username), action="login.throttled",
                                      outcome="refused", detail={"address": address})
            form = self.get_form()
            response = self.render_to_response(self.get_context_data(form=form, throttled=True))
            response.status_code = 429
            response["Retry-After"] = str(int(throttle.window().total_seconds()))
            return response
        return super().post(request, *args, **kwargs)
