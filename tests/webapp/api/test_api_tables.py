"""GET/POST /api/tables and GET /api/tables/<name>."""
import json
from pathlib import Path

from webapp.tables.models import AuditEvent, RegisteredTable, Run


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_list_reports_completion_backlog_and_sla(viewer_client, flights):
    body = viewer_client.get("/api/tables").json()
    # Other rows may exist when this worker process served a live-stack test before (same database).
    assert body["count"] == len(body["tables"]) == RegisteredTable.objects.count() >= 1
    (table,) = [t for t in body["tables"] if t["name"] == "flights"]
    assert table["ro_completion_time"] == "2013-01-19T23:00:00Z"
    assert (table["remaining_log_files"], table["remaining_log_bytes"], table["file_slices_with_logs"]) == (
        4, 3 << 20, 3)
    assert table["sla_status"] == "breached" and table["late_data"] is True
    assert table["pending_compactions"] == 1


def test_detail_includes_active_run_and_pending_plan(viewer_client, flights, planned):
    _, plan = planned
    scheduled = Run.objects.create(table=flights, kind="schedule", state="succeeded", instant=plan.instant,
                                   plan=plan.to_dict())
    running = Run.objects.create(table=flights, kind="execute", state="running", instant=plan.instant)
    body = viewer_client.get("/api/tables/flights").json()
    assert body["active_run"]["id"] == running.pk and body["active_run"]["state"] == "running"
    pending = body["pending_plan"]
    assert (pending["instant"], pending["state"], pending["run_id"]) == (plan.instant, "requested", scheduled.pk)
    assert pending["threshold"] == "2024-01-02T12:00:00Z" and pending["file_groups"] == 2
    assert [op["file_id"] for op in pending["operations"]] == [op.file_id for op in plan.operations]
    assert body["timeline_error"] is None
    assert viewer_client.get("/api/tables/missing").status_code == 404


def test_register_outside_roots_is_400_with_message(operator_client, flights, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    response = post(operator_client, "/api/tables", {"name": "x", "path": str(tmp_path / "elsewhere")})
    assert response.status_code == 400
    assert "outside the allowed table roots" in response.json()["error"]


def test_register_missing_path_is_400_naming_it(operator_client, flights, settings):
    missing = settings.TIDEMARK_TABLE_ROOTS[0] + "/nothing-here"
    response = post(operator_client, "/api/tables", {"name": "x", "path": missing})
    assert response.status_code == 400 and f"path {missing} does not exist" == response.json()["error"]


def test_register_checks_name_and_duplicates(operator_client, flights):
    assert "must be a slug" in post(operator_client, "/api/tables", {"name": "Bad Name", "path": flights.path}
                                    ).json()["error"]
    assert "already registered" in post(operator_client, "/api/tables", {"name": "flights", "path": flights.path}
                                        ).json()["error"]


def test_register_a_directory_without_a_table_is_400(operator_client, flights):
    empty = Path(flights.path).parent / "empty"
    empty.mkdir()
    response = post(operator_client, "/api/tables", {"name": "empty", "path": str(empty)})
    message = response.json()["error"]
    assert response.status_code == 400 and message.startswith(f"no Hudi table at {empty}")
    assert message.count("no Hudi table") == 1, "the error says what is wrong once"
    assert not RegisteredTable.objects.filter(name="empty").exists()


def test_bad_json_is_400(operator_client, flights):
    response = operator_client.post("/api/tables/flights/compactions", "{nope", content_type="application/json")
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]


def test_trigger_returns_202_with_run_id(operator_client, flights, operator):
    response = post(operator_client, "/api/tables/flights/compactions", {"threshold": "2013-01-20T01:00:00Z"})
    assert response.status_code == 202
    run = Run.objects.get(pk=response.json()["id"])
    assert run.kind == "schedule_execute" and run.requested_by == operator
    detail = operator_client.get(f"/api/runs/{run.pk}").json()
    assert detail["state"] == "queued" and detail["threshold"] == "2013-01-20T01:00:00Z"
    assert AuditEvent.objects.filter(run=run, user=operator).exists()


def test_rollback_requires_instant(operator_client, flights):
    response = post(operator_client, "/api/tables/flights/rollback", {})
    assert response.status_code == 400 and "instant is required" in response.json()["error"]


def test_trigger_plan_only_and_execute(operator_client, flights):
    response = post(operator_client, "/api/tables/flights/compactions", {"data_latency": "2h", "execute": False})
    assert response.status_code == 202 and Run.objects.get(pk=response.json()["id"]).kind == "schedule"
    planning = response.json()["id"]
    busy = post(operator_client, "/api/tables/flights/execute", {"instant": "20130120020000000"})
    assert busy.status_code == 409 and "one compaction at a time" in busy.json()["error"]   # the plan is not made yet
    Run.objects.filter(pk=planning).update(state="succeeded")   # as the worker leaves it
    response = post(operator_client, "/api/tables/flights/execute", {"instant": "20130120020000000"})
    assert response.status_code == 202
    assert Run.objects.get(pk=response.json()["id"]).kind == "execute"
    assert post(operator_client, "/api/tables/flights/execute", {}).status_code == 400
