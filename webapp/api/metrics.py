"""`/metrics`: Prometheus text exposition built from the database (latest samples and run counts).

One process renders every table's gauges from stored rows, so the numbers agree across web workers and
need no multiprocess registry. Open unless METRICS_TOKEN is set, then `Authorization: Bearer <token>`.
"""
from __future__ import annotations

import hmac

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from webapp.api import table_gauges
from webapp.api.sampling_metrics import SamplingCollector
from webapp.tables.models import Run

COMPACTION_KINDS = (Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE)
FINISHED = (Run.State.SUCCEEDED, Run.State.FAILED, Run.State.REFUSED)


class DatabaseCollector:
    """Collects the tidemark_* counter families from the Run table (the per-table gauges are written directly
    as text by webapp.api.table_gauges: at 10,000 tables that is most of the output)."""

    def collect(self):
        yield self._compactions()
        yield self._refusals()

    def _compactions(self) -> CounterMetricFamily:
        family = CounterMetricFamily("tidemark_compactions", "Finished compaction runs by outcome.",
                                     labels=["table", "outcome"])
        rows = (Run.objects.filter(kind__in=COMPACTION_KINDS, state__in=FINISHED)
                .values("table__name", "state").annotate(n=Count("id")).order_by())
        for row in rows:
            family.add_metric([row["table__name"], row["state"]], row["n"])
        return family

    def _refusals(self) -> CounterMetricFamily:
        family = CounterMetricFamily("tidemark_trigger_refusals", "Refused runs by reason code.",
                                     labels=["table", "reason"])
        rows = (Run.objects.filter(state=Run.State.REFUSED).values("table__name", "refusal_reason")
                .annotate(n=Count("id")).order_by())
        for row in rows:
            family.add_metric([row["table__name"], row["refusal_reason"] or "unknown"], row["n"])
        return family


def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
            response = HttpResponse("bearer token required\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    registry.register(SamplingCollector())
    body = table_gauges.render().encode() + generate_latest(registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
