"""Details an operator reads: sizes in human units, one name per run kind (pages and the page script),
audit times in UTC with a Z like the API, and the run page shows only the fields its kind has."""
from __future__ import annotations

import json
import re

import pytest

from webapp.tables.models import AuditEvent, Run
from webapp.tables.templatetags.tidemark import KIND_LABELS, filesize


@pytest.mark.parametrize("size, shown", [(999, "999 B"), (1536, "1.5 KiB"), (1_040_179, "0.99 MiB"),
                                         (3 << 20, "3.0 MiB"), (None, "—")])
def test_sizes_never_show_four_digits(size, shown):
    assert filesize(size) == shown


def test_audit_times_end_in_z(operator_client, flights):
    operator_client.post("/api/tables/flights/compactions", json.dumps({"threshold": "2013-01-20T01:00:00"}),
                         content_type="application/json")
    assert AuditEvent.objects.get(action="request.schedule_execute").detail["threshold"] == "2013-01-20T01:00:00Z"


def test_run_kinds_are_named_one_way(operator_client, flights):
    run = Run.objects.create(table=flights, kind="schedule", state="queued")
    page = operator_client.get("/tables/flights/").content.decode()
    assert ">plan only<" in page
    # The page script renders the run JSON as the server shaped it: the same name and badge as the page.
    shaped = operator_client.get(f"/api/runs/{run.pk}").json()
    assert (shaped["kind_label"], shaped["state_class"], shaped["final"]) == (KIND_LABELS["schedule"], "muted", False)


def test_run_page_shows_only_its_kind_s_fields(operator_client, flights, finished_compaction):
    clean = Run.objects.create(table=flights, kind="clean", state="succeeded")
    assert "Threshold T" not in operator_client.get(f"/runs/{clean.pk}/").content.decode()
    assert "Threshold T" in operator_client.get(f"/runs/{finished_compaction.pk}/").content.decode()


def test_run_page_folds_long_lists(operator_client, flights, finished_compaction):
    carried = [{"name": f".fg-1_001.log.{i}_0-1-0", "target": f".fg-1_002.log.{i}_0-1-0", "mode": "symlink"}
               for i in range(12)]
    plan = {**finished_compaction.plan}
    plan["operations"] = [{**plan["operations"][0], "logs_carried": carried}]
    finished_compaction.plan = plan
    finished_compaction.save()
    page = operator_client.get(f"/runs/{finished_compaction.pk}/").content.decode()
    assert re.search(r"<details>\s*<summary>12 logs, 400 B</summary>", page), "12 carried logs folded"
    assert re.search(r"<details open>\s*<summary>1 log, 0.98 KiB</summary>", page), "short lists stay open"
