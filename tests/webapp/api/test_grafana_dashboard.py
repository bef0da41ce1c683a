"""docs/grafana-dashboard.json is valid JSON whose every query names only families /metrics exposes."""
from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana-dashboard.json"


def test_dashboard_queries_name_exposed_families(client, flights, finished_compaction, settings):
    from prometheus_client.parser import text_string_to_metric_families

    from webapp.alerts.models import AlertChannel, AlertDelivery
    from webapp.tables.models import Run

    settings.METRICS_OPEN = True
    Run.objects.create(table=flights, kind="schedule_execute", state="refused", refusal_reason="nothing_to_compact")

    AlertDelivery.objects.create(channel=AlertChannel.objects.create(kind="email", target="a@example.com",
                                                                     events=["run_failed"]), event="run_failed")
    finished_compaction.started_at = finished_compaction.finished_at.replace(second=0)
    finished_compaction.save()
    sample = flights.samples.order_by("-taken_at").first()
    sample.earliest_pending_compaction = sample.latest_completed_compaction = "20130120020000000"
    sample.save()
    exposed = {s.name for f in text_string_to_metric_families(client.get("/metrics").content.decode())
               for s in f.samples}
    doc = json.loads(DASHBOARD.read_text())
    queried = {name for panel in doc["panels"] for target in panel["targets"]
               for name in re.findall(r"tidemark_[a-z_]+", target["expr"])}
    assert queried and queried <= exposed, queried - exposed
