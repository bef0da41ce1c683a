from django.urls import path

from webapp.api import views

app_name = "api"

urlpatterns = [
    path("tables", views.tables, name="tables"),
    path("tables/<slug:name>", views.table, name="table"),
    path("tables/<slug:name>/compactions", views.compactions, name="compactions"),
    path("tables/<slug:name>/execute", views.execute_view, name="execute"),
    path("tables/<slug:name>/preview", views.preview_view, name="preview"),
    path("tables/<slug:name>/clean", views.clean_view, name="clean"),
    path("tables/<slug:name>/rollback", views.rollback_view, name="rollback"),
    path("tables/<slug:name>/recover", views.recover_view, name="recover"),
    path("tables/<slug:name>/validate", views.validate_view, name="validate"),
    path("tables/<slug:name>/unschedule", views.unschedule_view, name="unschedule"),
    path("tables/<slug:name>/repair", views.repair_view, name="repair"),
    path("runs", views.runs, name="runs"),
    path("runs/<int:run_id>", views.run, name="run"),
    path("runs/<int:run_id>/cancel", views.cancel_view, name="cancel"),
    path("tables/<slug:name>/pause", views.pause_view, name="pause"),
    path("tables/<slug:name>/resume", views.resume_view, name="resume"),
    path("schema", views.schema_view, name="schema"),
    path("alert-channels", views.alert_channels, name="alert-channels"),
    path("alert-channels/<int:channel_id>", views.alert_channel, name="alert-channel"),
]
