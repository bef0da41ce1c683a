"""`/metrics`: Prometheus text exposition built from the database (latest samples and run counts).

One process renders every table's gauges from stored rows, so the numbers agree across web workers and
need no multiprocess registry. Closed by default: `Authorization: Bearer <METRICS_TOKEN>` is required, or,
without a token, `TIDEMARK_METRICS_OPEN=1` opens it explicitly (a scraper on a private network); with
neither it answers 403 saying so.
"""
from __future__ import annotations

import datetime as dt
import hmac
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, FloatField, Q, Sum
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast
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


def _stat_sum(key: str) -> Sum:
    """The sum over runs of `result.compaction_stats.<key>` (a number in the JSON), in SQL."""
    return Sum(Cast(KeyTextTransform(key, KeyTransform("compaction_stats", "result")), FloatField()))


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
        # Summed in the database, one row per table: the runs' result JSON never leaves it, so the cost does not
        # grow with each table's run history (a 10,000-table fleet accumulates millions of runs).
        took = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
        timed = Q(started_at__isnull=False, finished_at__isnull=False)
        rows = (Run.objects.filter(kind__in=COMPACTION_KINDS, state=Run.State.SUCCEEDED).alias(took=took)
                .values("table__name")
                .annotate(**{key: _stat_sum(key) for key in stats}, timed_runs=Count("id", filter=timed),
                          took_total=Sum("took", filter=timed),
                          **{f"le_{i}": Count("id", filter=timed & Q(took__lte=dt.timedelta(seconds=b)))
                             for i, b in enumerate(DURATION_BUCKETS)})
                .order_by())
        for values in rows:
            row: dict[str, Any] = dict(values)   # keys made above from the stats' names and the buckets
            table = row["table__name"]
            for key, family in stats.items():
                family.add_metric([table], float(row[key] or 0))
            if row["timed_runs"]:
                buckets = [(str(float(b)), float(row[f"le_{i}"])) for i, b in enumerate(DURATION_BUCKETS)]
                duration.add_metric([table], buckets + [("+Inf", float(row["timed_runs"]))],
                                    sum_value=row["took_total"].total_seconds())
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
