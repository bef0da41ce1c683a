"""Catalog sync: `<name>_ro` / `<name>_rt` in a Hive Metastore (Thrift) or AWS Glue, as Hudi's sync tools
register them. `shape` says what the tables look like, `hms` and `glue` put them in a catalog, `sync`
decides when and records how it went."""
from engine.catalog.sync import CatalogSyncWarning, last_sync, sync_after, sync_catalog

__all__ = ["CatalogSyncWarning", "last_sync", "sync_after", "sync_catalog"]
