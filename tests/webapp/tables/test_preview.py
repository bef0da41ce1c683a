"""Plan preview: the engine's dry-run plan on a real table, per partition compacted vs carried; writes nothing."""
import json
import shutil

import pytest

from engine import Table
from webapp.tables.models import AuditEvent, RegisteredTable


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory, spark):
    from engine.demo import run_demo

    path = tmp_path_factory.mktemp("preview-demo") / "flights"
    run_demo(str(path), spark, batches=2)
    return path


@pytest.fixture
def demo(db, demo_path, settings):
    settings.TIDEMARK_TABLE_ROOTS = [str(demo_path.parent)]
    return RegisteredTable.objects.create(name="demo", path=str(demo_path))


def middle_of_backlog(path) -> str:
    buckets = [b for b in Table.open(str(path)).tide(bucket="6h") if b.start is not None and b.log_bytes]
    return buckets[len(buckets) // 2].to_dict()["end"]


def test_preview_shows_compacted_and_carried_per_partition_and_writes_nothing(operator_client, demo, operator,
                                                                            tmp_path):
    timeline = [i.to_dict() for i in Table.open(demo.path).timeline()]
    threshold = middle_of_backlog(demo.path)
    response = operator_client.post("/api/tables/demo/preview", json.dumps({"threshold": threshold}),
                                    content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    plan = body["plan"]
    assert plan["instant"] is None and plan["state"] == "preview"
    assert plan["threshold"] == threshold
    # The engine projects the time the commit will publish: at least T, just below the oldest log it leaves.
    assert plan["projected_ro_completion_time"] >= threshold
    copy = Table.open(str(shutil.copytree(demo.path, tmp_path / "copy", symlinks=True)))
    copy.schedule_compaction(threshold=threshold)
    assert copy.run_compaction().to_dict()["ro_completion_time"] == plan["projected_ro_completion_time"]
    total_compacted = sum(p["logs_compacted"] for p in body["partitions"])
    assert total_compacted == sum(len(op["logs_compacted"]) for op in plan["operations"]) > 0
    assert sum(p["file_groups"] for p in body["partitions"]) == len(plan["operations"])
    assert [i.to_dict() for i in Table.open(demo.path).timeline()] == timeline
    assert AuditEvent.objects.get(action="preview").user == operator

    from tests.support.api_schema import validate

    validate("/api/tables/{name}/preview", "post", response)


def test_preview_with_bad_arguments_is_400(operator_client, demo):
    response = operator_client.post("/api/tables/demo/preview", json.dumps({"carry_over": "hardlink"}),
                                    content_type="application/json")
    assert response.status_code == 400 and "carry_over" in response.json()["error"]
