"""The control plane's share of catalog sync: retry a sync the engine could not finish.

The engine syncs `<name>_ro` / `<name>_rt` itself after every operation it commits (the run's result holds
`catalog_sync`), and a catalog that is down never fails the run. What is left here is the retry: after
each run, and every minute on beat for every idle table
(`TIDEMARK_CATALOG_SYNC_SECONDS`), a table whose sync is enabled and whose last sync failed (or
never happened) is synced again, until its catalog answers. Nothing here raises.
"""
from __future__ import annotations

import logging

from tasks import location as locations
from webapp.tables.models import MetricSample, RegisteredTable, Run

log = logging.getLogger(__name__)


def sync_if_owed(table: RegisteredTable) -> bool | None:
    """Sync `table` when its last sync did not succeed; True/False how it went, None when nothing was owed."""
    try:
        engine_table = locations.open_table(table.path)   # the allow-list holds here too
        status = engine_table.catalog_status()
    except Exception as exc:  # no table there (any more): the run or the sample says so, not us
        log.debug("no catalog status for table %s: %s", table.name, exc)
        return None
    if not status.enabled or status.ok:
        return None
    try:
        results = engine_table.sync_catalog()
    except Exception:
        log.exception("catalog sync of table %s could not run", table.name)
        return False
    ok = all(x.ok for x in results)
    # The newest sample shows the outcome at once (the catalog status is a state, not a time series).
    latest = MetricSample.objects.filter(table=table).order_by("-taken_at").values_list("pk", flat=True).first()
    if latest is not None:
        MetricSample.objects.filter(pk=latest).update(catalog=engine_table.catalog_status().to_dict())
    for failed in (x for x in results if not x.ok):
        log.warning("catalog sync of table %s to %s failed: %s", table.name, failed.catalog, failed.error)
    return ok


def sync_owed_tables() -> list[str]:
    """Beat's retry: `sync_if_owed` for every table with no queued or running run (a run syncs after
    itself; a sync beside it could publish the state before it). Returns the tables synced successfully."""
    busy = set(Run.objects.filter(state__in=(Run.State.QUEUED, Run.State.RUNNING)).values_list("table_id", flat=True))
    synced = []
    for table in RegisteredTable.objects.exclude(pk__in=busy).order_by("pk"):
        if sync_if_owed(table):
            synced.append(table.name)
    return synced
