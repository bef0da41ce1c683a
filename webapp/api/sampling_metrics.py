"""`/metrics` families about sampling itself: what the change checks and full samples cost, and how many
samples the checks saved (tasks.change_sampling keeps the counters on each table's SamplingState).

Totals are summed over all tables in one aggregate query; the per-table gauge of the duration of each
table's last full sample (to find the tables that make a cycle slow) is in webapp.api.table_gauges.
"""
from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Sum
from prometheus_client.core import CounterMetricFamily, Metric

from webapp.tables.models import SamplingState

COUNTERS = {
    "checks": ("tidemark_sampling_checks", "Change checks (one .hoodie listing each)."),
    "samples": ("tidemark_sampling_samples", "Full samples taken by the sampling cycle (changed or floor-due tables)."),
    "skips": ("tidemark_sampling_skips", "Full samples skipped because the table's timeline was unchanged."),
    "failures": ("tidemark_sampling_failures", "Change checks or samples that failed."),
    "check_seconds": ("tidemark_sampling_check_seconds", "Time spent in change checks."),
    "sample_seconds": ("tidemark_sampling_sample_seconds", "Time spent in full samples by the sampling cycle."),
}


class SamplingCollector:
    def collect(self) -> Iterator[Metric]:
        totals = SamplingState.objects.aggregate(**{key: Sum(key) for key in COUNTERS})
        for key, (name, doc) in COUNTERS.items():
            family = CounterMetricFamily(name, doc)
            family.add_metric([], float(totals[key] or 0))
            yield family
