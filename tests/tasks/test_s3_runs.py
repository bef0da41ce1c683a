"""The control plane on an `s3://` table (moto server): registered under an object-store root, sampled,
compacted (copy carry-over), previewed, rolled back, cleaned and recovered by the worker's own code path
(`tasks.runner.perform`, in process, with the database lease); hudi 0.5.0 agrees after the compaction."""
from __future__ import annotations

import json

import pytest

from engine import Table
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _table(uri: str, tmp) -> None:
    table = Table.create(uri, name="flights_s3", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={"hoodie.bucket.index.num.buckets": "1"})
    for i, day in enumerate(("01", "02", "03")):
        src = tmp / f"b{i}.jsonl"
        src.write_text("".join(json.dumps({"id": f"k{k}", "seq": i, "ts": f"2024-01-{day}T0{k}:00:00Z"}) + "\n"
                               for k in range(3)))
        table.write(str(src))


def _perform(table, kind: str, user, **params):
    from django.utils import timezone

    from tasks import runner
    from webapp.tables.models import Run

    run = Run.objects.create(table=table, kind=kind, state="queued", queued_at=timezone.now(), requested_by=user,
                             **params)
    runner.perform(run.pk)
    run.refresh_from_db()
    return run


@pytest.mark.django_db(transaction=True)
def test_register_and_run_an_s3_table(s3_env, spark, tmp_path, settings, monkeypatch):  # noqa: F811
    from django.contrib.auth import get_user_model

    from webapp.tables import inputs, services

    uri = f"{s3_env['bucket_uri']}/lake/flights"
    _table(uri, tmp_path)
    settings.TIDEMARK_TABLE_ROOTS = [str(tmp_path), f"{s3_env['bucket_uri']}/lake"]
    monkeypatch.setattr(services, "_dispatch", lambda run_id: None)
    user = get_user_model().objects.create_user("ops")
    with pytest.raises(inputs.InvalidInput, match="impossible on object storage"):
        services.register_table(user, {"path": uri, "name": "bad", "carry_over": "symlink"})
    table = services.register_table(user, {"path": uri + "/", "name": "flights-s3"})
    assert (table.path, table.carry_over) == (uri, "copy")

    assert _perform(table, "metrics", user).state == "succeeded"
    preview = services.preview(table, user, inputs.trigger_args({"threshold": "2024-01-02T12:00:00Z"}))
    assert preview
    done = _perform(table, "schedule_execute", user, threshold=inputs.parse_threshold("2024-01-02T12:00:00Z"))
    assert done.state == "succeeded", done.error
    assert done.result["logs_carried_over"] == 1
    assert Table.open(uri).compaction(done.instant).to_dict()["operations"][0]["logs_carried"][0]["mode"] == "copy"
    opts = s3_env["storage_options"]
    ro = rows_by_key(hudi_read(uri, "read_optimized", storage_options=opts), ["_hoodie_record_key",
                                                                               "_hoodie_partition_path", "seq"])
    assert {k[1]: v["seq"] for k, v in ro.items()} == {"k0": 1, "k1": 1, "k2": 1}
    assert table.samples.exists()
    rolled = _perform(table, "rollback", user, instant=done.instant)
    assert rolled.state == "succeeded", rolled.error
    assert _perform(table, "clean", user).state == "succeeded"
    assert _perform(table, "recover", user).state == "succeeded"
    assert rows_by_key(hudi_read(uri, storage_options=opts)) == rows_by_key(Table.open(uri).read().table)


@pytest.mark.django_db(transaction=True)
def test_tables_under_an_s3_root_are_discovered_and_symlink_is_refused_everywhere(  # noqa: F811
        s3_env, tmp_path, settings, monkeypatch):  # noqa: F811
    from django.contrib.auth import get_user_model

    from webapp.tables import discovery, inputs, services

    root = f"{s3_env['bucket_uri']}/lake"
    for rel in ("sales/orders", "web/clicks"):
        _table(f"{root}/{rel}", tmp_path)
    settings.TIDEMARK_TABLE_ROOTS = [str(tmp_path), root]
    monkeypatch.setattr(services, "_dispatch", lambda run_id: None)
    report = discovery.discover(None, root, dry_run=True)
    assert sorted((c.name, c.path) for c in report.candidates) == [
        ("sales-orders", f"{root}/sales/orders"), ("web-clicks", f"{root}/web/clicks")]
    assert discovery.discover(None, root, dry_run=False).summary()["registered"] == 2

    user = get_user_model().objects.create_user("ops")
    table = services.registered_at(f"{root}/web/clicks")
    assert table is not None and table.carry_over == "copy"
    with pytest.raises(inputs.InvalidInput, match="impossible on object storage"):
        services.update_settings(user, table, {"carry_over": "symlink"})
    with pytest.raises(inputs.InvalidInput, match="impossible on object storage"):
        services.trigger_compaction(table, user, inputs.trigger_args({"carry_over": "symlink"}))
    first = services.trigger_compaction(table, user, inputs.trigger_args({"threshold": "2024-01-02T12:00:00Z"}))
    with pytest.raises(services.Conflict, match=f"compaction run {first.pk} .* is queued: one compaction at a time"):
        services.trigger_compaction(table, user, inputs.trigger_args({"threshold": "2024-01-03T12:00:00Z"}))
