"""The control plane's catalog sync: a failed sync is sampled and shown on the table page, beat's retry
(tasks.catalog) syncs it once the metastore answers, and the page and API then show the tables and the
successful sync."""
from __future__ import annotations

import warnings

import pytest

from engine.catalog import hms
from engine.catalog import sync as catalog_sync
from tasks import catalog, sampling
from tasks.metastore import free_port
from tests.support.tables import create_table, day_file
from webapp.tables.models import MetricSample, RegisteredTable, Run


@pytest.fixture
def synced_table(db, tmp_path, settings, spark, monkeypatch):
    """An engine table with catalog sync on whose metastore is down, registered and sampled."""
    monkeypatch.setattr(catalog_sync, "BACKOFF_S", 0.0)
    monkeypatch.setenv("TIDEMARK_HIVE_METASTORE_URIS", f"thrift://127.0.0.1:{free_port()}")
    root = tmp_path / "tables"
    settings.TIDEMARK_TABLE_ROOTS = [str(root)]
    table = create_table(root / "orders", {"hoodie.datasource.hive_sync.enable": "true",
                                           "hoodie.datasource.hive_sync.database": "sales"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", catalog_sync.CatalogSyncWarning)
        assert not table.write(day_file(tmp_path, 0, "01")).catalog_sync[0].ok
    registered = RegisteredTable.objects.create(name="orders", path=table.path)
    sampling.refresh(registered)
    return registered


def test_a_failed_sync_is_shown_then_retried_until_the_metastore_answers(
        synced_table, operator_client, hive_metastore, monkeypatch):
    status = MetricSample.objects.filter(table=synced_table).latest("taken_at").catalog
    assert status["enabled"] and status["ok"] is False and "unreachable" in status["error"]
    assert status["tables"] == ["sales.orders_ro", "sales.orders_rt"]

    page = operator_client.get("/tables/orders/").content.decode()
    assert 'id="catalog"' in page and "sales.orders_ro" in page and "sales.orders_rt" in page
    assert '<span class="badge bad">error</span>' in page and "unreachable" in page

    # a run is active: beat leaves the table to the run's own sync
    Run.objects.create(table=synced_table, kind="clean", state="running")
    monkeypatch.setenv("TIDEMARK_HIVE_METASTORE_URIS", hive_metastore)
    assert catalog.sync_owed_tables() == []
    Run.objects.filter(table=synced_table).update(state="succeeded")

    assert catalog.sync_owed_tables() == ["orders"]
    ro = hms.read_table(hive_metastore, "sales", "orders_ro")
    assert ro.sd.inputFormat == "org.apache.hudi.hadoop.HoodieParquetInputFormat"
    assert hms.read_table(hive_metastore, "sales", "orders_rt") is not None
    status = MetricSample.objects.filter(table=synced_table).latest("taken_at").catalog
    assert status["ok"] is True and status["error"] is None and status["catalogs"] == [hive_metastore]

    page = operator_client.get("/tables/orders/").content.decode()
    assert '<span class="badge ok">ok</span>' in page and hive_metastore in page
    api = operator_client.get("/api/tables/orders").json()
    assert api["catalog"]["ok"] is True and api["catalog"]["tables"] == ["sales.orders_ro", "sales.orders_rt"]

    assert catalog.sync_if_owed(synced_table) is None   # nothing owed once it succeeded
