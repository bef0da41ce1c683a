"""A Hudi table version 6 and a version 8 table side by side in one control plane (SQLite stack, a real Celery
worker): registered through the API, both listed with their versions (list page, API, version filter), freshness,
metrics and a plan preview read on both, a compaction triggered on each through the API and run by the worker,
and hudi 0.5.0 reads both as before."""
from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine import Table
from tests.support.demo_tables import demo_table
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import wait_final
from tests.support.tables import table_copy

BATCHES = 3
VERSIONS = (6, 8, 9)

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def templates(tmp_path_factory, spark):
    """The flights demo at each table version, built once for the module."""
    root = tmp_path_factory.mktemp("mixed-versions")
    return {v: demo_table(root / f"v{v}" / "flights", spark, batches=BATCHES, table_version=v) for v in VERSIONS}


@pytest.fixture
def operator_client(stack_env):
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from webapp.accounts.roles import OPERATOR

    user = User.objects.create_user(f"op-{uuid.uuid4().hex[:6]}", password="pw-123456789")
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def post(client, url: str, body: dict):
    return client.post(url, json.dumps(body), content_type="application/json")


def snapshot_and_ro(path) -> tuple[dict, dict]:
    return rows_by_key(hudi_read(path, "snapshot")), rows_by_key(hudi_read(path, "read_optimized"))


def threshold_inside(tide: list[dict]) -> str:
    """An event time in the middle of a table's log backlog, so T compacts part of it and carries the rest."""
    buckets = [b for b in tide if b["start"] and b["log_bytes"]]
    assert len(buckets) > 2, "the demo table should have logs spread over event time"
    return buckets[len(buckets) // 2]["end"]


def test_a_v6_and_a_v8_table_side_by_side(stack, templates, operator_client):
    from django.test import override_settings

    from webapp.tables.models import RegisteredTable, Run
    from webapp.tables.status import iso

    names = {v: f"flights-v{v}-{uuid.uuid4().hex[:6]}" for v in VERSIONS}
    paths = {v: table_copy(templates[v], stack.table_root / names[v]) for v in VERSIONS}
    before = {v: snapshot_and_ro(paths[v]) for v in VERSIONS}
    for v in VERSIONS:   # registering queues the first sample (a metrics run) for the worker
        response = post(operator_client, "/api/tables", {"name": names[v], "path": str(paths[v])})
        assert response.status_code == 201, response.content
    tables = {v: RegisteredTable.objects.get(name=names[v]) for v in VERSIONS}
    for v in VERSIONS:
        first = tables[v].runs.get(kind=Run.Kind.METRICS)
        assert wait_final(first.pk).state == Run.State.SUCCEEDED, first.error

    # Listed side by side, each with its version; the filter selects by version.
    listed = {t["name"]: t for t in operator_client.get("/api/tables").json()["tables"]}
    assert {listed[names[v]]["table_version"] for v in VERSIONS} == set(VERSIONS)
    for v in VERSIONS:
        only = operator_client.get(f"/api/tables?version={v}").json()["tables"]
        assert [t["name"] for t in only] == [names[v]]
        assert listed[names[v]]["table_version"] == v
    page = operator_client.get("/?version=8").content.decode()
    assert names[8] in page and names[6] not in page and 'data-version="8"' in page
    page = operator_client.get("/").content.decode()
    assert 'data-version="6"' in page and 'data-version="8"' in page

    # Freshness, backlog and the plan preview, on both.
    thresholds = {}
    for v in VERSIONS:
        detail = operator_client.get(f"/api/tables/{names[v]}").json()
        assert detail["table_version"] == v and detail["remaining_log_files"] > 0
        assert detail["freshness_lag_seconds"] is not None and detail["pending_plan"] is None
        sample = tables[v].samples.order_by("-taken_at").first()
        thresholds[v] = threshold_inside(sample.tide)
        preview = post(operator_client, f"/api/tables/{names[v]}/preview", {"threshold": thresholds[v]})
        assert preview.status_code == 200, preview.content
        plan = preview.json()["plan"]
        assert plan["operations"] and plan["threshold"].startswith(thresholds[v][:19])
        assert any(op["logs_carried"] for op in plan["operations"]), "a T inside the backlog carries logs over"
        table_page = operator_client.get(f"/tables/{names[v]}/").content.decode()
        assert f'data-version="{v}"' in table_page

    # A compaction on each, through the API and the worker.
    runs = {}
    for v in VERSIONS:
        response = post(operator_client, f"/api/tables/{names[v]}/compactions", {"threshold": thresholds[v]})
        assert response.status_code == 202, response.content
        runs[v] = response.json()["id"]
    for v in VERSIONS:
        run = wait_final(runs[v])
        assert run.state == Run.State.SUCCEEDED, run.error
        assert run.kind == Run.Kind.SCHEDULE_EXECUTE and run.result["instant"] == run.instant
        engine_table = Table.open(str(paths[v]))
        assert engine_table.config.version == v
        completion = engine_table.freshness().ro_completion_time
        threshold = dt.datetime.fromisoformat(thresholds[v].replace("Z", "+00:00"))
        assert completion is not None and completion >= threshold
        detail = operator_client.get(f"/api/tables/{names[v]}").json()
        assert detail["ro_completion_time"] == iso(completion)     # the worker sampled what the engine says
        assert detail["table_version"] == v and detail["pending_plan"] is None
        assert snapshot_and_ro(paths[v])[0] == before[v][0], "compaction never changes a snapshot"

    with override_settings(METRICS_OPEN=True, METRICS_TOKEN=""):
        metrics = operator_client.get("/metrics").content.decode()
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for family in text_string_to_metric_families(metrics) for s in family.samples}
    for v in VERSIONS:
        table = (("table", names[v]),)
        completion = Table.open(str(paths[v])).freshness().ro_completion_time
        assert values[("tidemark_ro_completion_timestamp_seconds", table)] == completion.timestamp()
        assert values[("tidemark_compactions_total", (("outcome", "succeeded"), *table))] == 1
        assert values[("tidemark_compaction_log_files_compacted_total", table)] > 0, "Hudi's figures, on both"
