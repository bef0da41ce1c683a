"""URL map: pages at /, the JSON API under /api/, Prometheus at /metrics, health at /healthz, admin at /admin/."""
from django.contrib import admin
from django.urls import include, path

from webapp.accounts.views import admin_login
from webapp.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/login/", admin_login, name="admin-login"),   # before the admin: its login rate limited too
    path("admin/", admin.site.urls),
    path("accounts/", include("webapp.accounts.urls")),
    path("api/", include("webapp.api.urls")),
    path("alerts/", include("webapp.alerts.urls")),
    path("", include("webapp.api.metrics_urls")),
    path("", include("webapp.tables.urls")),
]
