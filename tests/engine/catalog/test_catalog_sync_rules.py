"""What a sync pushes and when it retries: the table as it is at each attempt, a refusal not retried, late data
lowering `_ro`'s guarantee, a catalog table of one name kept from another table, and Glue's request limits."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table, post_commit
from engine.catalog import hms
from engine.catalog import sync as catalog_sync
from engine.catalog.shape import Partition
from engine.errors import ConfigError
from tests.support.catalogs import glue_endpoint, hive_metastore  # noqa: F401  (fixtures)

DAY_MS = 86_400_000
DAY0 = 1_704_067_200_000   # 2024-01-01T00:00:00Z


def _rows(tmp_path, name: str, days: list[int], seq: int = 1) -> str:
    n = len(days)
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({"id": [f"k{i}" for i in range(n)], "day": [f"{d:02d}" for d in days],
                             "seq": pa.array([seq] * n, pa.int64()),
                             "ts": pa.array([DAY0 + (d - 1) * DAY_MS for d in days], pa.int64())
                             .cast(pa.timestamp("ms", "UTC"))}), path)
    return str(path)


def _table(tmp_path, name: str = "t", **settings: str) -> Table:
    return Table.create(str(tmp_path / name), name=name, record_keys=["id"], ordering_field="seq",
                        event_time_field="ts", partition_fields=["day"],
                        settings={"hoodie.bucket.index.num.buckets": "1", **settings})


def test_a_retried_sync_pushes_the_table_as_it_is_at_that_attempt(tmp_path, monkeypatch):
    t = _table(tmp_path)
    t.write(_rows(tmp_path, "a", [1]), local=True)
    pushed: list[int] = []

    def push(target, shape):
        pushed.append(len(shape.partitions))
        if len(pushed) == 1:   # the catalog is out; meanwhile a write adds a partition
            t.write(_rows(tmp_path, "b", [2]), local=True)
            raise hms.MetastoreError("metastore unreachable: connection refused")

    monkeypatch.setattr(catalog_sync, "_push", push)
    monkeypatch.setattr(catalog_sync, "BACKOFF_S", 0.0)
    [result] = catalog_sync.sync_catalog(t.path, metastore="thrift://127.0.0.1:1")
    assert pushed == [1, 2] and result.ok and result.attempts == 2 and result.partitions == 2


def test_a_catalog_that_refuses_is_not_asked_again(tmp_path, monkeypatch):
    t = _table(tmp_path)
    t.write(_rows(tmp_path, "a", [1]), local=True)
    calls = []

    def push(target, shape):
        calls.append(1)
        raise hms.MetastoreError("MetaException: Invalid partition key & values", transient=False)

    monkeypatch.setattr(catalog_sync, "_push", push)
    [result] = catalog_sync.sync_catalog(t.path, metastore="thrift://127.0.0.1:1")
    assert (result.ok, result.attempts, len(calls)) == (False, 1, 1) and "Invalid partition" in result.error


def test_late_data_lowers_the_published_guarantee_and_a_late_write_syncs(tmp_path):
    t = _table(tmp_path)
    t.write(_rows(tmp_path, "a", [1, 2, 3]), local=True)
    done = t.run_compaction(t.schedule_compaction(threshold="2024-01-02T12:00:00Z").instant, local=True)
    target = catalog_sync.resolve_targets(t.config, "thrift://127.0.0.1:1")[0]
    ro = catalog_sync.build_shape(t.config, target).ro.parameters
    assert (ro["tidemark.ro.completion.time"], ro["tidemark.ro.guarantee"]) == (
        "2024-01-02T23:59:59.999Z", "holds")
    assert done.ro_completion_time.isoformat().startswith("2024-01-02T23:59:59.999")

    on_time = t.write(_rows(tmp_path, "b", [4], seq=2), local=True)
    late = t.write(_rows(tmp_path, "c", [2], seq=3), local=True)   # event time 2024-01-02: at or before completion
    cfg = t.config
    assert not catalog_sync._may_be_late(cfg, on_time.instant) and catalog_sync._may_be_late(cfg, late.instant)
    ro = catalog_sync.build_shape(cfg, target).ro.parameters
    # everything before the late record's event time is still in base files: that is what `_ro` can promise now
    assert (ro["tidemark.ro.completion.time"], ro["tidemark.ro.guarantee"], ro["tidemark.ro.completion.instant"]) == (
        "2024-01-01T23:59:59.999Z", "broken", done.instant)


def test_metastore_ports_are_checked_before_anything_is_sent(tmp_path):
    with pytest.raises(ConfigError, match="port must be 1-65535"):
        hms.parse_uris("thrift://127.0.0.1:99999")
    with pytest.raises(ConfigError, match="no metastore URI"):
        catalog_sync.resolve_targets(_table(tmp_path).config, "")   # an empty --metastore is not "the default"
    with pytest.raises(ConfigError, match="port must be 1-65535"):
        _table(tmp_path, "u", **{"hoodie.datasource.hive_sync.metastore.uris": "thrift://127.0.0.1:99999"})


def test_a_catalog_table_of_another_table_is_not_taken_over_and_the_servers_answer_is_shown(
        tmp_path, hive_metastore, monkeypatch):  # noqa: F811
    settings = {"hoodie.datasource.hive_sync.enable": "true", "hoodie.datasource.hive_sync.metastore.uris": hive_metastore,
                "hoodie.datasource.hive_sync.database": "rules", "hoodie.datasource.hive_sync.table": "trips"}
    first, second = _table(tmp_path, "first", **settings), _table(tmp_path, "second", **settings)
    assert all(s.ok for s in first.write(_rows(tmp_path, "a", [1]), local=True).catalog_sync)
    with pytest.warns(catalog_sync.CatalogSyncWarning):
        [refused] = second.write(_rows(tmp_path, "b", [1]), local=True).catalog_sync
    assert not refused.ok and refused.attempts == 1
    assert "rules.trips_ro is registered for file:" in refused.error and "first" in refused.error
    assert hms.read_table(hive_metastore, "rules", "trips_ro").sd.location.endswith("/first")

    # the metastore's own answer (a frozen Thrift exception) reaches the caller as one line, not retried
    target = catalog_sync.resolve_targets(first.config)[0]
    shape = catalog_sync.build_shape(first.config, target)
    shape.partitions.append(Partition("01/x", ["01", "x"], shape.partitions[0].location + "/x"))   # two values, one key
    with pytest.raises(hms.MetastoreError) as raised:
        hms.sync_shape(hive_metastore, shape)
    assert not raised.value.transient and "MetaException" in str(raised.value)


def test_glue_deletes_partitions_25_at_a_time_and_takes_the_region_from_aws_region(
        tmp_path, glue_endpoint, monkeypatch):  # noqa: F811
    from engine.catalog import glue

    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_REGION", "us-east-1")   # as the README sets up S3 tables: no AWS_DEFAULT_REGION
    t = _table(tmp_path, **{"hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
                            "hoodie.aws.glue.endpoint": glue_endpoint, "hoodie.datasource.hive_sync.database": "rules"})
    t.write(_rows(tmp_path, "a", list(range(1, 31))), local=True)
    [target] = catalog_sync.resolve_targets(t.config)
    shape = catalog_sync.build_shape(t.config, target)
    catalog_sync._push(target, shape)
    sizes: list[int] = []
    real = glue.client

    def counting(*args, **kwargs):
        c = real(*args, **kwargs)
        delete = c.batch_delete_partition
        c.batch_delete_partition = lambda **kw: sizes.append(len(kw["PartitionsToDelete"])) or delete(**kw)
        return c

    monkeypatch.setattr(glue, "client", counting)
    shape.partitions = shape.partitions[:2]   # 28 partitions gone from storage (as a clean or an overwrite leaves)
    catalog_sync._push(target, shape)
    assert sorted(sizes) == [3, 3, 25, 25]   # both tables: 28 = 25 + 3 each
    assert shape.ro.parameters["hudi.metadata-listing-enabled"] == "false"


def test_the_recorded_state_is_what_was_pushed_not_what_came_after(tmp_path, monkeypatch):
    t = _table(tmp_path, **{"hoodie.datasource.hive_sync.enable": "true",
                            "hoodie.datasource.hive_sync.metastore.uris": "thrift://127.0.0.1:1"})
    t.write(_rows(tmp_path, "a", [1]), local=True)   # its sync fails: nothing is listening
    added = []

    def push(target, shape):
        if not added:   # the push took day 01; a write adds day 02 before the outcome is recorded
            with monkeypatch.context() as m:
                # its own sync would wait (300 s) for the lock this sync holds
                m.setattr(post_commit, "sync_after", lambda *a, **k: None)
                added.append(t.write(_rows(tmp_path, "b", [2]), local=True))

    monkeypatch.setattr(catalog_sync, "_push", push)
    [result] = catalog_sync.sync_catalog(t.path)
    assert added[0].catalog_sync is None, "the inner write synced: the patch above missed post_commit's import"
    assert result.ok and result.partitions == 1
    assert catalog_sync.last_sync(t.path)["partitions"] == ["01"]
    # so the write that added day 02 is still owed a sync
    assert catalog_sync._write_changes_catalog(t.config, ["02", "day=02"], added[0].instant)


def test_what_counts_as_worth_another_attempt():
    from pymetastore.hive_metastore.ttypes import AlreadyExistsException, MetaException
    from thrift.transport.TTransport import TTransportException

    assert hms._error(TTransportException(message="timed out")).transient
    assert hms._error(AlreadyExistsException(message="lake.t_ro exists")).transient   # another syncer, meanwhile
    assert not hms._error(MetaException(message="Invalid partition key & values")).transient


def test_one_table_reached_through_a_link_is_the_same_table(tmp_path, hive_metastore):  # noqa: F811
    settings = {"hoodie.datasource.hive_sync.enable": "true", "hoodie.datasource.hive_sync.metastore.uris": hive_metastore,
                "hoodie.datasource.hive_sync.database": "rules", "hoodie.datasource.hive_sync.table": "linked"}
    t = _table(tmp_path, "real", **settings)
    assert all(s.ok for s in t.write(_rows(tmp_path, "a", [1]), local=True).catalog_sync)
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    via_link = Table.open(str(tmp_path / "alias"))
    assert all(s.ok for s in via_link.write(_rows(tmp_path, "b", [2]), local=True).catalog_sync)
