from django.urls import path

from webapp.api.metrics import metrics

urlpatterns = [path("metrics", metrics, name="metrics")]
