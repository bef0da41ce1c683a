"""`/metrics`: Prometheus text exposition built from the database (latest samples and run counts).

One process renders every table's gauges from stored rows, so the numbers agree across web workers and
need no multiprocess registry. Closed by default: `Authorization: Bearer <METRICS_TOKEN>` is required, or,
without a token, `TIDEMARK_METRICS_OPEN=1` opens it explicitly (a scraper on a private network); with
neither it answers 403 saying so.
"""
from __future__ import annotations

import hmac
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from webapp.alerts.models import AlertDelivery
from webapp.api import table_gauges
from webapp.api.sampling_metrics import SamplingCollector
from webapp.tables.models import Run

COMPACTION_KINDS = (Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE)
DURATION_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)
FINISHED = (Run.State.SUCCEEDED, Run.State.FAILED, Run.State.REFUSED)


class DatabaseCollector:
    """Collects the tidemark_* counter families from the Run table (the per-table gauges are written directly
    as text by webapp.api.table_gauges: at 10,000 tables that is most of the output)."""

    def collect(self) -> Iterator[Metric]:
        yield self._compactions()
        yield self._refusals()
        yield from self._compaction_work()
        yield self._alert_deliveries()

    def _compaction_work(self) -> Iterator[Metric]:
        """Per table, what completed compactions did (Hudi's totalLogFilesCompacted, totalLogFilesSize,
        totalUpdatedRecordsCompacted) and how long compaction runs took (a histogram)."""
        stats = {key: CounterMetricFamily(f"tidemark_compaction_{key}", doc, labels=["table"]) for key, doc in (
            ("log_files_compacted", "Log files folded into base files by completed compactions."),
            ("log_bytes_compacted", "Bytes of log files folded into base files by completed compactions."),
            ("records_updated", "Records updated by completed compactions."))}
        duration = HistogramMetricFamily("tidemark_compaction_duration_seconds",
                                         "Wall-clock duration of finished compaction runs.", labels=["table"])
        totals: dict[str, dict[str, float]] = {}
        seconds: dict[str, list[float]] = {}
        rows = (Run.objects.filter(kind__in=COMPACTION_KINDS, state=Run.State.SUCCEEDED)
                .values_list("table__name", "result", "started_at", "finished_at"))
        for table, result, started, finished in rows:
            work = (result or {}).get("compaction_stats") or {}
            per = totals.setdefault(table, dict.fromkeys(stats, 0.0))
            for key in stats:
                per[key] += work.get(key) or 0
            if started and finished:
                seconds.setdefault(table, []).append((finished - started).total_seconds())
        for table, per in totals.items():
            for key, family in stats.items():
                family.add_metric([table], per[key])
        for table, values in seconds.items():
            buckets = [(str(float(b)), float(sum(v <= b for v in values))) for b in DURATION_BUCKETS]
            duration.add_metric([table], buckets + [("+Inf", float(len(values)))], sum_value=sum(values))
        yield from stats.values()
        yield duration

    def _alert_deliveries(self) -> CounterMetricFamily:
        family = CounterMetricFamily("tidemark_alert_deliveries", "Alert deliveries by event, channel kind and status.",
                                     labels=["event", "kind", "status"])
        rows = (AlertDelivery.objects.values("event", "channel__kind", "status").annotate(n=Count("id")).order_by())
        for row in rows:
            family.add_metric([row["event"], row["channel__kind"], row["status"]], row["n"])
        return family

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
    if not token and not settings.METRICS_OPEN:
        return HttpResponse("metrics are closed: set METRICS_TOKEN (scrape with Authorization: Bearer <token>) "
                            "or TIDEMARK_METRICS_OPEN=1\n", status=403, content_type="text/plain")
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
