"""What a write owes once its instant is published: Hudi's table services (automatic clean, archival), then
the catalog sync — Java's `postCommit` followed by its meta sync. `Table.write` and the streaming sink's
micro-batch commit (engine.datasource) call it; both are recorded in the result and neither raises, so the
commit before them always stands.

It stands above the services and the catalog, which know nothing of each other: the services keep the timeline,
the catalog mirrors the table's shape.
"""
from __future__ import annotations

from engine.catalog.sync import sync_after
from engine.lock import TableLock
from engine.results import WriteResult
from engine.services.table_services import AsyncClean, after_commit


def after_write(base_path: str, result: WriteResult, *, lock: TableLock | None = None,
                async_clean: AsyncClean | None = None) -> None:
    """Run the table services due after `result`'s commit (waiting for `async_clean` when one was started),
    then sync the catalog for the partitions the write touched."""
    result.services = after_commit(base_path, lock=lock, async_clean=async_clean)
    partitions = {p.rpartition("/")[0] for p in result.log_files + result.base_files}
    result.catalog_sync = sync_after(base_path, "write", partitions=partitions, instant=result.instant)
