from django.urls import path

from webapp.tables import views

app_name = "tables"

urlpatterns = [
    path("", views.table_list, name="list"),
    path("tables/register", views.register, name="register"),
    path("tables/discover", views.discover, name="discover"),
    path("tables/<slug:name>/", views.table_detail, name="detail"),
    path("tables/<slug:name>/timeline", views.timeline, name="timeline"),
    path("tables/<slug:name>/trigger", views.trigger, name="trigger"),
    path("tables/<slug:name>/execute", views.execute, name="execute"),
    path("tables/<slug:name>/clean", views.clean, name="clean"),
    path("tables/<slug:name>/rollback", views.rollback, name="rollback"),
    path("tables/<slug:name>/recover", views.recover, name="recover"),
    path("tables/<slug:name>/validate", views.validate_plan, name="validate"),
    path("tables/<slug:name>/unschedule", views.unschedule_plan, name="unschedule"),
    path("tables/<slug:name>/repair", views.repair_plan, name="repair"),
    path("tables/<slug:name>/refresh", views.refresh, name="refresh"),
    path("runs/", views.run_list, name="runs"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("runs/<int:run_id>/cancel", views.cancel, name="cancel"),
    path("tables/<slug:name>/pause", views.pause, name="pause"),
    path("tables/<slug:name>/resume", views.resume, name="resume"),
    path("tables/<slug:name>/settings", views.edit_settings, name="settings"),
    path("tables/<slug:name>/unregister", views.unregister, name="unregister"),
    path("audit/", views.audit_log, name="audit"),
]
