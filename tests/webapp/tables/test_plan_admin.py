"""Validate / unschedule / repair of a pending plan from the table page and the API: one queued run each with its
arguments, audited with the user, bad input refused with 400 before anything is queued, viewers refused; the run
page shows per file group Valid/Error and the renames."""
from __future__ import annotations

import json

import pytest

from tests.support.api_schema import validate
from webapp.tables.models import AuditEvent, Run

C = "20130120020000000"


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def pending(planned):
    """A pending plan on the table's timeline, scheduled outside the control plane; its instant."""
    return planned[1].instant


@pytest.mark.parametrize("kind, body, expected", [
    ("validate", {"instant": C}, {"file_group": "", "dry_run": False}),
    ("unschedule", {"instant": C}, {"file_group": "", "dry_run": False}),
    ("unschedule", {"instant": C, "file_group": "2013/01/20/fg-1", "dry_run": True},
     {"file_group": "2013/01/20/fg-1", "dry_run": True}),
    ("repair", {"instant": C, "dry_run": True}, {"file_group": "", "dry_run": True}),
])
def test_api_queues_one_audited_run(operator_client, flights, operator, kind, body, expected):
    response = post(operator_client, f"/api/tables/flights/{kind}", body)
    assert response.status_code == 202, response.content
    validate(f"/api/tables/{{name}}/{kind}", "post", response)
    run = Run.objects.get()
    assert (run.kind, run.instant, run.state, run.requested_by) == (kind, C, "queued", operator)
    assert {"file_group": run.file_group, "dry_run": run.dry_run} == expected
    assert AuditEvent.objects.get(run=run).action == f"request.{kind}"
    shown = operator_client.get(f"/api/runs/{run.pk}")
    validate("/api/runs/{id}", "get", shown)
    assert shown.json()["dry_run"] is expected["dry_run"]


@pytest.mark.parametrize("kind, body, message", [
    ("validate", {}, "instant is required"),
    ("unschedule", {"instant": "soon"}, "not a Hudi instant time"),
    ("unschedule", {"instant": C, "file_group": "../x"}, "is not a file id"),
    ("unschedule", {"instant": C, "dry_run": "maybe"}, "dry_run must be true or false"),
    ("validate", {"instant": C, "dry_run": True}, "unknown key 'dry_run': this request takes instant"),
    ("repair", {"instant": C, "file_group": "fg-1"}, "unknown key 'file_group': this request takes dry_run, instant"),
])
def test_bad_input_is_refused_before_anything_is_queued(operator_client, flights, kind, body, message):
    response = post(operator_client, f"/api/tables/flights/{kind}", body)
    assert response.status_code == 400 and message in response.json()["error"]
    validate(f"/api/tables/{{name}}/{kind}", "post", response)
    assert not Run.objects.exists()


def test_viewers_cannot(viewer_client, flights):
    assert post(viewer_client, "/api/tables/flights/unschedule", {"instant": C}).status_code == 403
    assert viewer_client.post("/tables/flights/unschedule", {"instant": C}).status_code == 403
    assert not Run.objects.exists()


def test_table_page_offers_the_actions_for_the_pending_plan(operator_client, viewer_client, flights, pending):
    page = operator_client.get("/tables/flights/").content.decode()
    assert 'id="plan-admin"' in page and 'data-action="validate-plan"' in page
    assert f'name="instant" value="{pending}"' in page and 'data-confirm-unless="dry_run"' in page
    assert 'data-action="unschedule-plan"' not in viewer_client.get("/tables/flights/").content.decode()

    response = operator_client.post("/tables/flights/unschedule", {"instant": pending, "file_group": "",
                                                                   "dry_run": "true"})
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == f"/tables/flights/?run={run.pk}"
    assert (run.kind, run.instant, run.file_group, run.dry_run) == ("unschedule", pending, "", True)
    # A checkbox left unchecked is absent from the form: a real unschedule.
    operator_client.post("/tables/flights/repair", {"instant": pending})
    assert Run.objects.get(kind="repair").dry_run is False
    assert 'id="plan-admin-runs"' in operator_client.get("/tables/flights/").content.decode()


def test_run_page_shows_valid_and_error_per_file_group_and_the_renames(operator_client, flights):
    validation = {"instant": C, "state": "requested", "valid": False, "file_groups": [
        {"partition": "2013/01/20", "file_id": "fg-1", "valid": True, "status": "Valid", "errors": [],
         "logs_compacted": 2, "logs_carried": 1, "logs_written_since": [f".fg-1_{C}.log.3_0-1-0"]},
        {"partition": "2013/01/20", "file_id": "fg-2", "valid": False, "status": "Error",
         "errors": ["log .fg-2_001.log.1_0-1-0 named by the plan is missing"], "logs_compacted": 1,
         "logs_carried": 0, "logs_written_since": []}]}
    checked = Run.objects.create(table=flights, kind="validate", state="succeeded", instant=C, result=validation)
    page = operator_client.get(f"/runs/{checked.pk}/").content.decode()
    assert page.count('<span class="badge ok">Valid</span>') == 1 and page.count('<span class="badge bad">Error</span>') == 1
    assert "named by the plan is missing" in page and "1 written since" in page
    assert "Carry-over" not in page and "Strategy" not in page       # a validate run has no compaction settings

    renames = [{"partition": "2013/01/20", "file_id": "fg-1", "source": f".fg-1_{C}.log.3_0-1-0",
                "target": ".fg-1_001.log.3_0-1-0", "done": False}]
    dry = Run.objects.create(table=flights, kind="unschedule", state="succeeded", instant=C, file_group="2013/01/20/fg-1",
                             dry_run=True, result={"instant": C, "dry_run": True, "renames": renames,
                                                   "unscheduled_file_groups": ["2013/01/20/fg-1"],
                                                   "remaining_file_groups": 1, "message": "would unschedule ..."})
    page = operator_client.get(f"/runs/{dry.pk}/").content.decode()
    assert 'id="renames"' in page and ".fg-1_001.log.3_0-1-0" in page and "dry run: not done" in page
    assert "2013/01/20/fg-1" in page and "1 file group would stay planned" in page and "Would unschedule" in page


def test_every_run_kind_has_a_task_and_an_operation():
    """dispatch sends a run by its kind: a kind without a Celery task would fail the request after its commit."""
    from tasks import jobs, operations

    assert set(Run.Kind.values) == set(jobs.BY_KIND)
    assert set(Run.Kind.values) - {"metrics"} == set(operations.BY_KIND)


def test_the_pending_card_counts_and_offers_only_the_groups_still_planned(operator_client, flights, planned):
    """The card shows the plan as the engine holds it now: an unschedule of one file group (from any client)
    rewrites the plan, a whole-plan unschedule removes it."""
    engine_table, plan = planned
    first, second = (op.file_id for op in plan.operations)
    Run.objects.create(table=flights, kind="schedule", state="succeeded", instant=plan.instant, plan=plan.to_dict())
    page = operator_client.get("/tables/flights/").content.decode()
    assert '<span id="pending-groups">2 file groups</span>' in page and f'value="{first}"' in page
    engine_table.unschedule_compaction(plan.instant, file_id=first)
    page = operator_client.get("/tables/flights/").content.decode()
    assert '<span id="pending-groups">1 file group</span> (of 2 planned)' in page
    assert f'value="{first}"' not in page and f'value="{second}"' in page
    engine_table.unschedule_compaction(plan.instant)
    assert 'id="pending-plan"' not in operator_client.get("/tables/flights/").content.decode()
