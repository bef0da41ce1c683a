"""The table page's Housekeeping and Ingestion panels and the API's `activity`: what the latest sample read from
the table through the engine (tasks.sampling), the lag measured at the request; and the clean policy and
retention edited from the settings form, with the settings edit's permission and audit."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from engine import Table
from engine.config.properties import load_table_config
from tests.support.api_schema import validate
from tests.support.tables import STREAM_WATERMARK_MS as WATERMARK_MS
from tests.support.tables import living_table
from webapp.tables.models import AuditEvent, Run


@pytest.fixture
def living(flights, tmp_path) -> Table:
    """`flights` made a living table (tests.support.tables.living_table), sampled as the worker samples it."""
    from tasks import sampling

    table = living_table(Path(flights.path), tmp_path)
    sampling.refresh(flights)
    return table


def test_panels_show_the_sampled_housekeeping_and_ingestion(viewer_client, living):
    facts = living.activity()
    response = viewer_client.get("/tables/flights/")
    assert response.status_code == 200, response
    page = response.content.decode()

    assert 'id="housekeeping-panel"' in page and 'id="ingestion-panel"' in page
    assert '<span class="mono">KEEP_LATEST_COMMITS</span> <span class="badge"' in page   # Hudi's default, marked
    assert "10 commits" in page
    assert facts.housekeeping.last_clean and f'<span class="mono">{facts.housekeeping.last_clean}</span>' in page
    assert "3 files deleted" in page
    assert f"{facts.housekeeping.active_instants} instants" in page and "nothing archived yet" in page
    assert "keep 20–30 commits" in page
    assert f'<span class="mono" id="last-write">{facts.ingestion.last_write}</span>' in page
    assert f'data-last-write-ms="{int(facts.ingestion.last_write_at.timestamp() * 1000)}"' in page
    assert '<dd class="mono" id="stream-query">orders-q</dd>' in page
    assert '<dd class="mono" id="stream-batch">12</dd>' in page
    assert '<dd class="mono" id="stream-watermark">2024-01-02 12:00:00 UTC</dd>' in page


def test_api_detail_has_activity_with_the_lag_measured_now(viewer_client, living):
    response = viewer_client.get("/api/tables/flights")
    validate("/api/tables/{name}", "get", response)
    body = response.json()["activity"]
    ing = body["ingestion"]
    assert ing["stream"]["query_id"] == "orders-q" and ing["stream"]["batch_id"] == 12
    assert ing["stream"]["watermark_ms"] == WATERMARK_MS
    done = dt.datetime.fromisoformat(ing["last_write_at"].replace("Z", "+00:00"))
    assert 0 <= ing["lag_seconds"] <= (dt.datetime.now(dt.UTC) - done).total_seconds()
    assert body["housekeeping"]["last_clean_files_deleted"] == 3
    assert {s["source"] for s in body["housekeeping"]["settings"]} == {"default"}


def test_a_sample_keeps_no_clock_so_an_unchanged_table_samples_equal(living, flights):
    from tasks import sampling

    _, fields = sampling.read(flights)
    stored = flights.samples.order_by("-taken_at").first()
    assert stored.activity == fields["activity"] and "lag_seconds" not in fields["activity"]["ingestion"]


def test_before_a_sample_kept_them_the_panels_say_so(viewer_client, flights):
    page = viewer_client.get("/tables/flights/").content.decode()
    assert "Not sampled yet: the next metrics sample reads the last write." in page
    assert viewer_client.get("/api/tables/flights").json()["activity"] is None


def test_operator_changes_clean_policy_and_retention_audited(operator_client, living, flights):
    response = operator_client.post("/tables/flights/settings", {
        "schedule_minutes": "", "freshness_sla_minutes": "120", "data_latency": "2h", "carry_over": "symlink",
        "clean_policy": "KEEP_LATEST_FILE_VERSIONS", "clean_retained": "2"})

    assert response.status_code == 302, response.content
    props = load_table_config(living.path).props
    assert props["hoodie.cleaner.policy"] == "KEEP_LATEST_FILE_VERSIONS"
    assert props["hoodie.cleaner.fileversions.retained"] == "2"
    detail = AuditEvent.objects.get(action="settings").detail
    assert detail["hoodie.cleaner.policy"] == {"from": "KEEP_LATEST_COMMITS", "to": "KEEP_LATEST_FILE_VERSIONS"}
    assert detail["hoodie.cleaner.fileversions.retained"] == {"from": "3", "to": "2"}
    assert flights.runs.filter(kind=Run.Kind.METRICS, state=Run.State.QUEUED).count() == 1   # the panels catch up
    assert living.activity().housekeeping.clean_retained == 2


def test_an_unchanged_form_writes_nothing_to_the_table(operator_client, living, flights):
    before = (Path(living.path) / ".hoodie" / "hoodie.properties").read_bytes()
    response = operator_client.post("/tables/flights/settings", {
        "freshness_sla_minutes": "120", "data_latency": "2h", "carry_over": "symlink",
        "clean_policy": "KEEP_LATEST_COMMITS", "clean_retained": "10"})
    assert response.status_code == 302
    assert (Path(living.path) / ".hoodie" / "hoodie.properties").read_bytes() == before
    assert AuditEvent.objects.get(action="settings").detail == {}
    assert not flights.runs.filter(kind=Run.Kind.METRICS).exists()


def test_viewer_cannot_and_a_bad_policy_is_refused(viewer_client, operator_client, living):
    refused = viewer_client.post("/tables/flights/settings", {"clean_policy": "KEEP_LATEST_BY_HOURS"})
    assert refused.status_code == 403
    bad = operator_client.patch("/api/tables/flights", json.dumps({"clean_policy": "KEEP_EVERYTHING"}),
                                content_type="application/json")
    assert bad.status_code == 400 and "clean_policy must be one of" in bad.json()["error"]
    zero = operator_client.patch("/api/tables/flights", json.dumps({"clean_retained": 0}),
                                 content_type="application/json")
    assert zero.status_code == 400 and zero.json()["error"].startswith("clean_retained must be from 1")
    assert "hoodie.cleaner.policy" not in load_table_config(living.path).props
    assert not AuditEvent.objects.filter(action="settings").exists()


def test_api_edits_retention_of_the_tables_policy(operator_client, living):
    response = operator_client.patch("/api/tables/flights", json.dumps({"clean_retained": 4}),
                                     content_type="application/json")
    assert response.status_code == 200, response.content
    validate("/api/tables/{name}", "patch", response)
    props = load_table_config(living.path).props
    # the retention of the policy in force (Hudi's default, which stays unset: only what changed is stored)
    assert props["hoodie.cleaner.commits.retained"] == "4" and "hoodie.cleaner.policy" not in props
