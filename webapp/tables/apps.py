from django.apps import AppConfig


class TablesConfig(AppConfig):
    verbose_name = "Tables, runs and audit"
    name = "webapp.tables"
    label = "tables"
