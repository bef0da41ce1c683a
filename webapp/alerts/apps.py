from django.apps import AppConfig


class AlertsConfig(AppConfig):
    verbose_name = "Alert channels and deliveries"
    name = "webapp.alerts"
    label = "alerts"
