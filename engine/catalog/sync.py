"""When and where a table is synced to its catalog, with retries, and what became of the last attempt.

`sync_catalog` is the explicit sync (`tidemark sync`, `Table.sync_catalog`): it raises nothing for a
catalog that fails — the result says `ok=False` and why. `sync_after` is what every table operation calls
once it has committed (create, writes that change the schema or add a partition, compaction, rollback,
clean) when `hoodie.datasource.hive_sync.enable` is true: it never raises at all, so a catalog that is down
never fails or undoes the operation; the failure is returned in the operation's result, warned
(`CatalogSyncWarning`, a `tidemark: warning:` line in the CLI) and recorded, and the next operation syncs
again whatever it changed. A sync is a full reconciliation (tables and every partition), so one that
succeeds repairs whatever earlier failures missed.

The outcome of the last sync is kept in `.hoodie/.aux/tidemark-catalog-sync.json` (Hudi's auxiliary
folder, which no reader lists): writes compare their schema and partitions with it to decide whether the
catalog needs them, and callers show it.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine import env
from engine import results as r
from engine.catalog import glue, hms
from engine.catalog.shape import (
    BROKEN,
    HOLDS,
    RO_COMPLETION_INSTANT,
    RO_COMPLETION_TIME,
    CatalogShape,
    RoGuarantee,
    SyncNames,
    catalog_shape,
)
from engine.config.properties import GLUE_SYNC_TOOL, HIVE_SYNC_TOOL, TableConfig, load_table_config
from engine.errors import ConfigError, TidemarkError, TidemarkWarning
from engine.io import storage
from engine.lock import FileLock, holding
from engine.timeline.instants import Timeline

ENV_URIS = "TIDEMARK_HIVE_METASTORE_URIS"
ATTEMPTS = 3
BACKOFF_S = 1.0          # doubled after each failed attempt
STATE_FILE = os.path.join(".aux", "tidemark-catalog-sync.json")
SYNC_LOCK_FILE = ".tidemark.sync.lock"
SYNC_WAIT_S = 300.0      # for another sync of the table (3 attempts at a metastore that does not answer: ~3 min)
HIVE, GLUE = "hive_metastore", "glue"


class CatalogSyncWarning(TidemarkWarning):
    """A catalog sync failed after its retries; the operation it followed is committed all the same."""


@dataclass(frozen=True)
class SyncTarget:
    kind: str                  # HIVE or GLUE
    catalog: str               # metastore URIs, or "glue" / "glue:<region>"
    names: SyncNames
    support_timestamp: bool
    glue_region: str = ""
    glue_endpoint: str = ""


def enabled(cfg: TableConfig) -> bool:
    return bool(cfg.setting("hoodie.datasource.hive_sync.enable"))


def resolve_targets(cfg: TableConfig, metastore: str | None = None) -> list[SyncTarget]:
    """Where `cfg`'s table syncs, one target per sync tool of `hoodie.meta.sync.client.tool.class` (Hudi takes a
    comma-separated list): Glue, and/or a Hive metastore at `metastore` (a thrift:// URI) if given, else
    `hoodie.datasource.hive_sync.metastore.uris`, else $TIDEMARK_HIVE_METASTORE_URIS. `metastore` given means
    that metastore is synced whatever the tools."""
    names = SyncNames(cfg.setting("hoodie.datasource.hive_sync.database") or "default",
                      cfg.setting("hoodie.datasource.hive_sync.table") or cfg.name)
    support_ts = bool(cfg.setting("hoodie.datasource.hive_sync.support_timestamp"))
    tools = cfg.setting("hoodie.meta.sync.client.tool.class")
    targets: list[SyncTarget] = []
    if metastore is not None or HIVE_SYNC_TOOL in tools:
        uris = metastore if metastore is not None else \
            cfg.setting("hoodie.datasource.hive_sync.metastore.uris") or env.text(ENV_URIS)
        hms.parse_uris(uris)   # a malformed or missing URI is a ConfigError before anything is sent
        targets.append(SyncTarget(HIVE, uris, names, support_ts))
    if GLUE_SYNC_TOOL in tools:
        region = cfg.setting("hoodie.aws.glue.region")
        targets.append(SyncTarget(GLUE, f"glue:{region}" if region else "glue", names, support_ts, region,
                                  cfg.setting("hoodie.aws.glue.endpoint")))
    return targets


def build_shape(cfg: TableConfig, target: SyncTarget) -> CatalogShape | None:
    """The tables as they should be now; None while the table has no schema (no commit yet).

    `_ro`'s completion time is the guarantee as it stands: when late data (event time at or before the published
    completion, written after the compaction) broke it, the time just before the earliest late event — everything
    up to it is in base files — and `tidemark.ro.guarantee` says `broken` (`tidemark freshness` tells the rest)."""
    import pyspark

    from engine.observe.freshness import find_late_data, ro_state
    from engine.slices.fsview import list_partitions

    timeline = Timeline.load(cfg.base_path)
    text = timeline.latest_schema() or cfg.props.get("hoodie.table.create.schema")
    if not text:
        return None
    state = ro_state(timeline, cfg)
    guarantee = None
    if state is not None:
        late = find_late_data(cfg.base_path, timeline, cfg, state)
        completion_ms = state.completion_ms
        if late.records and late.min_ms is not None:
            completion_ms = min(completion_ms, late.min_ms - 1)
        guarantee = RoGuarantee(r.iso(r.utc(completion_ms)) or "", state.instant or "",
                                BROKEN if late.records else HOLDS)
    shape = catalog_shape(cfg, timeline, list_partitions(cfg.base_path), target.names, avro_schema=json.loads(text),
                          ro_guarantee=guarantee, support_timestamp=target.support_timestamp,
                          spark_version=pyspark.__version__, glue=target.kind == GLUE)
    shape.schema_digest = schema_digest(text)
    return shape


def sync_catalog(base_path: str, *, metastore: str | None = None, reason: str = "manual",
                 attempts: int = ATTEMPTS) -> list[r.CatalogSyncResult]:
    """Register or update `<name>_ro` / `<name>_rt` now in every target, retrying each `attempts` times.

    ConfigError for a table or target that cannot be synced at all (no metastore URI, malformed URI); a
    catalog that fails is `ok=False` in its result, with the last error."""
    targets = resolve_targets(load_table_config(base_path), metastore)
    # One sync of a table at a time, each pushing the table as it is when it pushes: operations sync after they
    # released the table lock, so a retried sync of an older change must not overwrite a newer one's.
    with holding(FileLock(base_path, SYNC_LOCK_FILE), "sync the table to its catalog", timeout_s=SYNC_WAIT_S):
        synced = [_sync_one(base_path, target, reason, attempts) for target in targets]
        results = [result for result, _ in synced]
        if metastore is None:   # an ad-hoc metastore is not the table's catalog: its state stays as it was
            pushed = [shape for result, shape in synced if result.ok and shape is not None]
            _record(load_table_config(base_path), results, pushed[-1] if pushed else None)
    return results


def _sync_one(base_path: str, target: SyncTarget, reason: str,
              attempts: int) -> tuple[r.CatalogSyncResult, CatalogShape | None]:
    """The result of syncing `target`, and the shape it pushed last."""
    result = _result(target, reason)
    delay = BACKOFF_S
    shape = None
    for attempt in range(1, max(attempts, 1) + 1):
        result.attempts = attempt
        shape = build_shape(load_table_config(base_path), target)   # again each attempt: what the table is now
        if shape is None:
            result.ok, result.skipped = True, "the table has no schema until its first write"
            break
        _describe(result, shape)
        try:
            _push(target, shape)
            result.ok, result.error = True, None
            break
        except hms.MetastoreError as exc:
            result.ok, result.error = False, str(exc)
            if not exc.transient:   # the catalog refused the request: asking again gets the same answer
                break
            if attempt < attempts:
                time.sleep(delay)
                delay *= 2
    result.synced_at = dt.datetime.now(dt.UTC)
    return result, shape


def _describe(result: r.CatalogSyncResult, shape: CatalogShape) -> None:
    result.partitions = len(shape.partitions)
    result.last_commit_time_sync = shape.ro.parameters.get("last_commit_time_sync")
    result.ro_completion_instant = shape.ro.parameters.get(RO_COMPLETION_INSTANT)
    completion = shape.ro.parameters.get(RO_COMPLETION_TIME)
    result.ro_completion_time = dt.datetime.fromisoformat(completion.replace("Z", "+00:00")) if completion else None


def sync_after(base_path: str, reason: str, *, partitions: Iterable[str] | None = None,
               instant: str | None = None) -> list[r.CatalogSyncResult] | None:
    """The sync an operation that just committed owes its catalogs; None when the table does not sync or
    (a write, `instant`) nothing the catalog shows changed. Never raises: a failure is returned, warned and
    recorded."""
    try:
        cfg = load_table_config(base_path)
        if not enabled(cfg):
            return None
        if reason == "write" and not _write_changes_catalog(cfg, partitions, instant):
            return None
        results = sync_catalog(base_path, reason=reason)
    except Exception as exc:  # noqa: BLE001 — the operation is committed; a sync problem must not undo it
        results = [_failed(base_path, reason, exc)]
    for result in results:
        if not result.ok:
            where = f" to {result.catalog}" if result.catalog else ""
            warnings.warn(CatalogSyncWarning(
                f"catalog sync{where} after {reason} failed ({result.error}); the {reason} is committed, the "
                f"next operation or `tidemark sync {base_path}` retries"), stacklevel=2)
    return results


def last_sync(base_path: str) -> dict[str, Any] | None:
    """The recorded outcome of the last sync (ok, synced_at, error, target, catalog, tables), or None."""
    path = storage.join(base_path, ".hoodie", STATE_FILE)
    try:
        data: dict[str, Any] = json.loads(storage.read_bytes(path))
        return data
    except (OSError, ValueError):
        return None


def status(base_path: str) -> r.CatalogStatus:
    """The table's catalogs and its last sync; a target that cannot resolve (no URI) is named in `error`."""
    cfg = load_table_config(base_path)
    names = SyncNames(cfg.setting("hoodie.datasource.hive_sync.database") or "default",
                      cfg.setting("hoodie.datasource.hive_sync.table") or cfg.name)
    out = r.CatalogStatus(enabled=enabled(cfg), catalogs=[], tables=[f"{names.database}.{names.ro}",
                                                                     f"{names.database}.{names.rt}"])
    try:
        out.catalogs = [t.catalog for t in resolve_targets(cfg)]
    except ConfigError as exc:
        out.error = str(exc)
    state = last_sync(base_path)
    if state:
        out.ok, out.error = bool(state.get("ok")), state.get("error") or out.error
        out.synced_at, out.last_ok_at = _parse(state.get("synced_at")), _parse(state.get("last_ok_at"))
    return out


def _parse(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


# ------------------------------------------------------------------------------------------ internals

def _push(target: SyncTarget, shape: CatalogShape) -> None:
    if target.kind == GLUE:
        glue.sync_shape(glue.client(target.glue_region or storage.region(), target.glue_endpoint), shape)
    else:
        hms.sync_shape(target.catalog, shape)


def _result(target: SyncTarget, reason: str) -> r.CatalogSyncResult:
    return r.CatalogSyncResult(ok=False, target=target.kind, catalog=target.catalog, database=target.names.database,
                               tables=[target.names.ro, target.names.rt], reason=reason)


def _failed(base_path: str, reason: str, exc: Exception) -> r.CatalogSyncResult:
    message = str(exc) if isinstance(exc, TidemarkError) else f"{type(exc).__name__}: {exc}"
    result = r.CatalogSyncResult(ok=False, target="", catalog="", database="", tables=[], reason=reason,
                                 synced_at=dt.datetime.now(dt.UTC), error=message.splitlines()[0])
    try:
        _record(load_table_config(base_path), [result], None)
    except Exception:  # noqa: BLE001 — nothing more to report than the failure itself
        pass
    return result


def _schema_digest(cfg: TableConfig, timeline: Timeline) -> str:
    return schema_digest(timeline.latest_schema() or cfg.props.get("hoodie.table.create.schema") or "")


def _write_changes_catalog(cfg: TableConfig, partitions: Iterable[str] | None, instant: str | None) -> bool:
    """Does the catalog need this write? Yes after a failed or missing sync, a new schema or a new partition, and
    when the write may break `_ro`'s published guarantee (late data: `build_shape`)."""
    state = last_sync(cfg.base_path)
    timeline = Timeline.load(cfg.base_path)   # one listing serves both checks
    if not state or not state.get("ok") or state.get("schema") != _schema_digest(cfg, timeline):
        return True
    known = set(state.get("partitions") or [])
    return any(p and p not in known for p in (partitions or [])) or _may_be_late(cfg, instant, timeline)


def _may_be_late(cfg: TableConfig, instant: str | None, timeline: Timeline | None = None) -> bool:
    """Whether write `instant` may hold data at or before the RO completion time: from its commit's write stats
    (each file's min event time); deletes and files without one may, as far as the stats tell."""
    from engine.observe.freshness import ro_state

    timeline = timeline or Timeline.load(cfg.base_path)
    state = ro_state(timeline, cfg)
    written = [i for i in timeline.completed() if i.timestamp == instant]
    if state is None or not written:
        return False
    return any(stat.num_deletes or stat.min_event_time is None or stat.min_event_time <= state.completion_ms
               for stat in timeline.commit_metadata(written[0]).write_stats)


def _record(cfg: TableConfig, results: list[r.CatalogSyncResult], pushed: CatalogShape | None) -> None:
    """Keep the outcome (atomically: temp file + rename), so writes, `show` and the control plane see it.
    `pushed`: what the catalogs took, the state a write compares its own changes with — not the table as it is
    when this is recorded, which may hold a partition a write added after the push."""
    previous = last_sync(cfg.base_path) or {}
    ok = all(x.ok for x in results)
    took = ok and pushed is not None and any(x.ok and not x.skipped for x in results)
    now = r.iso(dt.datetime.now(dt.UTC))
    state = {"ok": ok, "synced_at": now, "error": next((x.error for x in results if not x.ok), None),
             "targets": [x.to_dict() for x in results],
             "schema": pushed.schema_digest if took and pushed else previous.get("schema"),
             "partitions": sorted(p.path for p in pushed.partitions) if took and pushed else previous.get("partitions", []),
             "last_ok_at": now if took else previous.get("last_ok_at")}
    path = storage.join(cfg.hoodie_dir(), STATE_FILE)
    if storage.is_remote(path):   # one PUT replaces the object whole
        storage.write_bytes(path, json.dumps(state, sort_keys=True).encode("utf-8"))
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh, sort_keys=True)
    os.replace(tmp, path)


def schema_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


__all__ = ["CatalogSyncWarning", "ConfigError", "SyncTarget", "build_shape", "enabled", "last_sync",
           "resolve_targets", "status", "sync_after", "sync_catalog"]
