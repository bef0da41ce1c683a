from django.apps import AppConfig
from django.db.models.signals import post_save


class TablesConfig(AppConfig):
    verbose_name = "Tables, runs and audit"
    name = "webapp.tables"
    label = "tables"

    def ready(self) -> None:
        from webapp.tables import latest
        from webapp.tables.models import MetricSample, RegisteredTable

        post_save.connect(latest.on_sample_saved, sender=MetricSample, dispatch_uid="tidemark-latest-sample")
        post_save.connect(latest.on_table_saved, sender=RegisteredTable, dispatch_uid="tidemark-sampling-state")
