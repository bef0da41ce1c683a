"""`/metrics`: Prometheus text exposition built from the database (latest samples and run counts).

One process renders every table's gauges from stored rows, so the numbers agree across web workers and
need no multiprocess registry. Closed by default: `Authorization: Bearer <METRICS_TOKEN>` is required, or,
without a token, `TIDEMARK_METRICS_OPEN=1` opens it explicitly (a scraper on a private network); with
neither it answers 403 saying so.
"""
from __future__ import annotations

import datetime as dt
import hmac

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from webapp.alerts.models import AlertDelivery
from webapp.tables.overview import latest_samples
from webapp.tables.models import RegisteredTable, Run

COMPACTION_KINDS = (Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE)
DURATION_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)


def instant_seconds(instant: str) -> float | None:
    """A Hudi instant time (yyyyMMddHHmmss[SSS], UTC) as Unix seconds; None for "" or a malformed one."""
    if not instant.isdigit() or len(instant) not in (14, 17):
        return None
    when = dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.timezone.utc)
    return when.timestamp() + (int(instant[14:]) / 1000 if len(instant) == 17 else 0)
FINISHED = (Run.State.SUCCEEDED, Run.State.FAILED, Run.State.REFUSED)


class DatabaseCollector:
    """Collects the tidemark_* families from the latest MetricSample per table and the Run table."""

    def collect(self):
        tables = RegisteredTable.objects.all()
        names = dict(tables.values_list("pk", "name"))
        samples = latest_samples(tables)
        gauges = {
            "ro_completion_timestamp_seconds": "Event time before which the RO table is complete (Unix seconds).",
            "remaining_log_files": "Log files not yet compacted into base files.",
            "remaining_log_bytes": "Bytes in log files not yet compacted.",
            "file_slices_with_logs": "File slices that still have log files.",
            "pending_compactions": "Compaction plans requested or inflight on the timeline.",
            "freshness_sla_breached": "1 when the RO freshness lag exceeds the table's SLA.",
            "corrupt_log_blocks": "Corrupt log blocks of committed instants (their records are missing from reads).",
        }
        families = {k: GaugeMetricFamily(f"tidemark_{k}", doc, labels=["table"]) for k, doc in gauges.items()}
        for table_id, sample in samples.items():
            label = [names[table_id]]
            if sample["ro_completion_time"] is not None:
                families["ro_completion_timestamp_seconds"].add_metric(label, sample["ro_completion_time"].timestamp())
            for key in ("remaining_log_files", "remaining_log_bytes", "file_slices_with_logs", "pending_compactions",
                        "corrupt_log_blocks"):
                families[key].add_metric(label, sample[key])
            families["freshness_sla_breached"].add_metric(label, 1.0 if sample["sla_breached"] else 0.0)
        instants = {
            "earliest_pending_compaction": GaugeMetricFamily(
                "tidemark_earliest_inflight_compaction_timestamp_seconds",
                "Instant time of the oldest pending (requested or inflight) compaction (Unix seconds; Hudi's "
                "earliestInflightCompactionInstant).", labels=["table"]),
            "latest_completed_compaction": GaugeMetricFamily(
                "tidemark_latest_completed_compaction_timestamp_seconds",
                "Instant time of the newest completed compaction (Unix seconds; Hudi's "
                "latestCompletedCompactionInstant).", labels=["table"])}
        for table_id, sample in samples.items():
            for key, family in instants.items():
                seconds = instant_seconds(sample.get(key) or "")
                if seconds is not None:
                    family.add_metric([names[table_id]], seconds)
        yield from families.values()
        yield from instants.values()
        yield self._compactions()
        yield self._refusals()
        yield from self._compaction_work()
        yield self._alert_deliveries()

    def _compaction_work(self):
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
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
