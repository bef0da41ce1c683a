"""`Table`: the one door to a Tidemark table for the CLI, the control plane, the demo and Python users.

    from engine import Table
    t = Table.open("/data/flights")
    t.write("batch.parquet")
    plan = t.schedule_compaction(data_latency="2h")
    t.run_compaction(plan.instant)

Paths (the table's, inputs, outputs) are resolved here, once, to absolute locations: a relative path means
the caller's working directory, never an executor's (on a cluster each executor runs in its own folder).
URIs (`s3://…`) are kept as they are; `file://` URIs become plain absolute paths.

Every operation that changes the timeline takes `lock=` (a `TableLock`; default: the table's file lock)
and raises `Refused` when the table's state or the lock does not allow it. Long operations take
`on_progress(done, total, unit)`. Results are dataclasses from `engine.results` with `to_dict()`.
"""
from __future__ import annotations

import datetime as dt
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeGuard, TypeVar

from engine import results as r
from engine.config import eventtime
from engine.config.discovery import FoundTable, enclosing_table, find_tables
from engine.config.properties import TableConfig, load_table_config, parse_duration_ms
from engine.errors import ConfigError
from engine.io import storage
from engine.io.storage import absolute_location
from engine.lock import TableLock
from engine.observe.changes import TimelineMark, timeline_mark
from engine.progress import Progress
from engine.timeline.instants import Timeline, layout_memo

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

Threshold = dt.datetime | str | int
Latency = str | dt.timedelta | int

WRITE_OPERATIONS = ("upsert", "insert", "delete", "insert_overwrite", "insert_overwrite_table")


_P = ParamSpec("_P")
_R = TypeVar("_R")
_C = TypeVar("_C", bound=type)


def _one_operation(method: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(method)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with layout_memo(), storage.operation_reads():
            return method(*args, **kwargs)
    return wrapped


def _operations_read_the_layout_once(cls: _C) -> _C:
    """Each public method is one operation: inside it the timeline's layout keys are read from hoodie.properties
    once (a GET each on an object store, which a write used to make 7 times), and hoodie.properties itself and
    the timeline's completed instants and plans once each (`storage.operation_reads`), never across operations."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(value):
            setattr(cls, name, _one_operation(value))
    return cls


@_operations_read_the_layout_once
class Table:
    """A Hudi Merge-On-Read table (table version 6, 8 or 9) managed by Tidemark."""

    def __init__(self, config: TableConfig) -> None:
        self._config = config
        # The catalog sync `create` did (None: the table does not sync); operations return theirs in their result.
        self.catalog_sync: list[r.CatalogSyncResult] | None = None

    # ------------------------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str) -> Table:
        """The table at `path`; TableNotFoundError when there is none."""
        return cls(load_table_config(absolute_location(path)))

    @classmethod
    def create(cls, path: str, *, name: str, record_keys: Sequence[str], ordering_field: str,
               event_time_field: str, partition_fields: Sequence[str] | None = None,
               merge_mode: str = "event_time", hive_style: bool = False,
               settings: Mapping[str, str] | None = None, table_version: int = 6) -> Table:
        """Create an empty MOR table at `path` (ConfigError if one exists there): table version 6 (the default),
        8 (Hudi 1.0: timeline layout 2, completion times) or 9 (Hudi 1.1)."""
        from engine.config.layout import create_table
        from engine.config.properties import validate_settings

        cfg = create_table(absolute_location(path), name=name, record_keys=list(record_keys),
                           ordering_field=ordering_field, event_time_field=event_time_field,
                           partition_fields=list(partition_fields or []), merge_mode=merge_mode, hive_style=hive_style,
                           settings=validate_settings(dict(settings or {})), table_version=table_version)
        table = cls(cfg)
        table.catalog_sync = _sync_after(table.path, "create")
        return table

    @staticmethod
    def mark(path: str) -> TimelineMark:
        """The cheap change check: a fingerprint of `.hoodie/` from one listing, without opening the table.

        Equal marks mean nothing was committed, started or rolled back in between (engine.observe.changes).
        """
        return timeline_mark(path)

    @staticmethod
    def discover(root: str) -> list[FoundTable]:
        """Every Hudi table at or under `root` (folders with `.hoodie/hoodie.properties`; metadata tables
        and a table's own partitions are not searched; engine.config.discovery)."""
        return find_tables(root)

    @property
    def path(self) -> str:
        return self._config.base_path

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def config(self) -> TableConfig:
        """The table's hoodie.properties as of the last call (re-read by every operation)."""
        return self._config

    @property
    def default_data_latency(self) -> str | None:
        """The data latency configured on the table (`hoodie.compaction.event.time.data.latency`), which a
        trigger given neither a threshold nor a latency plans with; None when none is configured."""
        from engine.config.resolve import DATA_LATENCY_KEY

        value = self._config.props.get(DATA_LATENCY_KEY, "").strip()
        return value or None

    def _reload(self) -> TableConfig:
        self._config = load_table_config(self.path)
        return self._config

    def __repr__(self) -> str:
        return f"Table({self.path!r})"

    # ------------------------------------------------------------------------------------ write / read

    def write(self, source: str | Sequence[str] | DataFrame, operation: str = "upsert", *,
              settings: Mapping[str, str] | None = None, lock: TableLock | None = None,
              on_progress: Progress | None = None, local: bool | None = None) -> r.WriteResult:
        """Write `source` as one deltacommit: a .parquet/.csv/.jsonl path (or folder of Parquet), a list of
        Parquet paths, or a Spark DataFrame.

        Files run in this process or on Spark as `engine.placement` decides: `local=True` in-process,
        False on Spark, None (default) in-process unless the input is big or SPARK_MASTER names a cluster.
        Either way the same files are written. A DataFrame is always computed by Spark; `local` and
        `engine.placement` decide whether it is collected and written here (small ones by default) or
        written by Spark tasks.

        `operation` "insert_overwrite" replaces every file group of the partitions `source` has rows in,
        "insert_overwrite_table" every file group of the table (Hudi's backfill operations): one
        replacecommit whose new file groups have base files, as Java writes it. Refused (`WriteRefused`)
        while a compaction or clustering is pending."""
        from engine.post_commit import after_write
        from engine.services import table_services

        if operation not in WRITE_OPERATIONS:
            raise ConfigError(f"unknown operation {operation!r}; use {', '.join(WRITE_OPERATIONS)}")
        self._reload()
        async_clean = table_services.start_async_clean(self.path, lock)
        try:
            out = self._write(source, operation, settings, lock, on_progress, local)
        except BaseException:
            if async_clean is not None:
                async_clean.wait()   # never leave the clean's thread behind a failed write
            raise
        after_write(self.path, out, lock=lock, async_clean=async_clean)
        return out

    def _write(self, source: str | Sequence[str] | DataFrame, operation: str, settings: Mapping[str, str] | None,
               lock: TableLock | None, on_progress: Progress | None, local: bool | None) -> r.WriteResult:
        from engine.write import pipeline

        if isinstance(source, str):
            out = pipeline.write_file(self.path, absolute_location(source), operation, settings, lock=lock,
                                      on_progress=on_progress, local=local)
        elif isinstance(source, (list, tuple)):
            out = pipeline.write_parquet(self.path, [absolute_location(str(p)) for p in source], operation, settings,
                                         lock=lock, on_progress=on_progress, local=local)
        elif _is_dataframe(source):
            out = pipeline.write_dataframe(self.path, source, operation, settings, lock=lock,
                                           on_progress=on_progress, local=local)
        else:
            raise ConfigError(f"cannot write a {type(source).__name__}: pass a file path, a list of Parquet "
                              "paths or a Spark DataFrame")
        return out

    def write_stream(self, df: DataFrame, *, checkpoint_location: str, operation: str = "upsert",
                     trigger: Mapping[str, object] | None = None, options: Mapping[str, str] | None = None,
                     query_name: str | None = None) -> StreamingQuery:
        """Start writing streaming DataFrame `df` into the table (`df.writeStream.format("tidemark")`): each
        micro-batch one deltacommit, exactly once across restarts on `checkpoint_location` (engine.write.stream).

        `trigger`: DataStreamWriter.trigger's keywords (e.g. {"processingTime": "10 seconds"} or
        {"availableNow": True}); None: Spark's default (next batch as soon as the last ended). `options`: the
        sink's options with Hudi's keys (`hoodie.datasource.write.streaming.checkpoint.identifier`, the
        `--config` write settings, ...). The query is named for the table (`query_name` otherwise), which is what
        Spark's Structured Streaming tab and job descriptions show. Returns the running query."""
        from engine.datasource import register
        from engine.write.stream import OPERATION_OPTION, STREAM_OPERATIONS, sink_from_options

        if operation not in STREAM_OPERATIONS:
            raise ConfigError(f"a stream writes with {', '.join(STREAM_OPERATIONS)}, not {operation!r}")
        given = {OPERATION_OPTION: operation, **dict(options or {}),
                 "path": self.path, "checkpointLocation": absolute_location(checkpoint_location)}
        sink_from_options(given)   # refused here, in the caller's thread, rather than in the first batch
        register(df.sparkSession)
        writer = df.writeStream.format("tidemark").options(**given).queryName(query_name or f"tidemark:{self.name}")
        if trigger:
            writer = writer.trigger(**trigger)  # type: ignore[call-overload]  # Spark checks its own keywords
        return writer.start()

    def stream_status(self) -> r.StreamStatus | None:
        """The table's streaming writer as its timeline shows it: last batch, query, watermark, lag (None when no
        streaming commit is on the active timeline)."""
        from engine.observe.stream import stream_status

        return stream_status(self.path)

    def read(self, query: str = "snapshot", *, begin: str | None = None, end: str | None = None,
             as_of: str | None = None, output: str | None = None, local: bool | None = None,
             skip_corrupt: bool = False, on_progress: Progress | None = None) -> r.ReadResult:
        """Run `query`: into one Parquet file at `output`, or (no output) in-process into an Arrow table
        (`result.table`). Queries: "snapshot", "read_optimized", "time_travel" (the snapshot as of instant
        `as_of`) and "incremental" (the records written in (`begin`, `end`]; begin defaults to the start,
        end to the latest commit). A bad instant or range is a ConfigError, raised before anything is written.

        A read into `output` runs in this process or on Spark as `engine.placement` decides: `local=True`
        in-process, False on Spark, None (default) in-process unless the files to read are big or
        SPARK_MASTER names a cluster. Without `output` it always runs in-process.

        A corrupt log block of a committed instant hides its records: the in-process read warns
        (CorruptLogBlockWarning, naming file and offset) and goes on; a read into `output` raises
        CorruptLogBlockError and writes nothing, unless `skip_corrupt` (then it warns and goes on too)."""
        from engine.export import export_query
        from engine.read.query import QuerySpec, read_arrow

        spec = QuerySpec(query, begin=begin, end=end, as_of=as_of)
        if output is not None:
            output = absolute_location(output)
            _refuse_output_inside_a_table(output)
            rows = export_query(self.path, spec, output, local=local, on_progress=on_progress,
                                skip_corrupt=skip_corrupt)
            return r.ReadResult(query=query, rows=rows, output=output, begin_instant=begin, end_instant=end,
                                as_of_instant=as_of)
        table = read_arrow(self.path, spec, on_progress=on_progress)
        return r.ReadResult(query=query, rows=table.num_rows, output=None, begin_instant=begin, end_instant=end,
                            as_of_instant=as_of, table=table)

    def head(self, query: str = "snapshot", *, limit: int = 20, begin: str | None = None, end: str | None = None,
             as_of: str | None = None, skip_corrupt: bool = False) -> r.ReadResult:
        """The first `limit` rows of `query` (as `read`'s), in this process, in `result.table`; `result.more` says
        whether rows follow. Only as many file slices are read as the rows need. A corrupt log block of a
        committed instant raises CorruptLogBlockError, as a read into a file does, unless `skip_corrupt`."""
        from engine.read.query import QuerySpec, head_arrow

        table, more = head_arrow(self.path, QuerySpec(query, begin=begin, end=end, as_of=as_of), limit,
                                 fail_on_corrupt=not skip_corrupt)
        return r.ReadResult(query=query, rows=table.num_rows, output=None, begin_instant=begin, end_instant=end,
                            as_of_instant=as_of, table=table, more=more)

    # ------------------------------------------------------------------------------------ compaction

    def plan_compaction(self, *, strategy: str | None = None, threshold: Threshold | None = None,
                        data_latency: Latency | None = None, carry_over: str | None = None,
                        exact: bool | None = None, settings: Mapping[str, str] | None = None) -> r.CompactionPlan:
        """What `schedule_compaction` would plan now; writes nothing (the plan's instant is None)."""
        return self._schedule(strategy, threshold, data_latency, carry_over, exact, settings, None, preview=True)

    def schedule_compaction(self, *, strategy: str | None = None, threshold: Threshold | None = None,
                            data_latency: Latency | None = None, carry_over: str | None = None,
                            exact: bool | None = None, settings: Mapping[str, str] | None = None,
                            lock: TableLock | None = None) -> r.CompactionPlan:
        """Plan and write a compaction (`<C>.compaction.requested`). Arguments left None come from the
        table's settings. Refused while anything else is pending; state "nothing_to_do" when no log
        qualifies (then no instant is written)."""
        return self._schedule(strategy, threshold, data_latency, carry_over, exact, settings, lock, preview=False)

    def _schedule(self, strategy: str | None, threshold: Threshold | None, data_latency: Latency | None,
                  carry_over: str | None, exact: bool | None, settings: Mapping[str, str] | None,
                  lock: TableLock | None, preview: bool) -> r.CompactionPlan:
        from engine.compaction.history import plan_result
        from engine.compaction.plan import schedule_compaction

        self._reload()
        if threshold is not None and data_latency is not None:
            raise ConfigError("pass either threshold or data_latency, not both")
        planned = schedule_compaction(self.path, strategy=strategy, threshold_ms=threshold_ms(threshold),
                                      data_latency_ms=latency_ms(data_latency), carry_over=carry_over, exact=exact,
                                      settings=settings, lock=lock, preview=preview)
        if planned.record is None:
            resolved = planned.settings
            return r.CompactionPlan(
                instant=None, state="nothing_to_do", threshold=r.from_ms(planned.threshold_ms),
                strategy=str(resolved.strategy.value) if resolved else strategy,
                carry_over=str(resolved.carry_over.value) if resolved else carry_over,
                exact=bool(resolved.exact.value) if resolved else exact, message=planned.message)
        return plan_result(self.path, planned.record, instant=planned.instant,
                           state="preview" if preview else "requested", message=planned.message,
                           projected_completion_ms=planned.projected_completion_ms, listings=planned.listings)

    def run_compaction(self, instant: str | None = None, *, lock: TableLock | None = None,
                       on_progress: Progress | None = None,
                       should_stop: Callable[[], bool] | None = None,
                       local: bool | None = None) -> r.CompactionResult:
        """Execute the pending compaction (or `instant`) and commit it: on Spark, or in this process when the
        plan is small and no Spark runs here (`engine.placement`; `local` forces either way).

        One run per table at a time (the compaction lock, never waited for); writers go on meanwhile.
        `lock`, when given, is held in addition for the whole run. `should_stop` is polled while file
        groups are written: once True no further file group starts (on Spark, no further task: the small groups
        sharing a running task finish), the plan is rolled back and `Cancelled` is raised (nothing committed).
        """
        from engine.compaction.execute import run_compaction
        from engine.services.table_services import after_commit

        # The settings are read under the compaction lock, in flight with the run's first listings (`_ask_first`).
        out = run_compaction(self.path, instant=instant, lock=lock, on_progress=on_progress, should_stop=should_stop,
                             local=local)
        self._reload()
        out.services = after_commit(self.path, lock=lock)
        out.catalog_sync = _sync_after(self.path, "compaction")
        return out

    def rollback(self, instant: str, *, lock: TableLock | None = None,
                 on_progress: Progress | None = None) -> r.RollbackResult:
        """Roll back a deltacommit (pending, failed or latest) or a compaction (pending or latest completed)
        as rollback instant R; Refused (`rollback_dependency`, ...) when a later instant depends on it."""
        from engine.services.rollback import rollback

        out = rollback(self.path, instant, lock=lock, on_progress=on_progress)
        out.catalog_sync = _sync_after(self.path, "rollback")
        return out

    def validate_compaction(self, instant: str) -> r.PlanValidation:
        """`compaction validate`: per file group of pending compaction `instant`, Valid, or Error with the reasons
        (a file it names is missing or does not decode its headers, or its slice changed)."""
        from engine.compaction.admin import validate_plan

        return validate_plan(self.path, instant)

    def unschedule_compaction(self, instant: str, *, file_id: str | None = None, partition: str | None = None,
                              dry_run: bool = False, lock: TableLock | None = None) -> r.UnscheduleResult:
        """`compaction unschedule`: take pending compaction `instant` back, whole or (`file_id`) one file group;
        logs written into its slice since it was planned move to the previous slice and stay read."""
        from engine.compaction.admin import unschedule

        return unschedule(self.path, instant, file_id=file_id, partition=partition, dry_run=dry_run, lock=lock)

    def repair_compaction(self, instant: str, *, dry_run: bool = False,
                          lock: TableLock | None = None) -> r.RepairResult:
        """`compaction repair`: after an interrupted unschedule, move the logs it moved back where the plan
        expects them; a dry run lists the renames and changes nothing."""
        from engine.compaction.admin import repair

        return repair(self.path, instant, dry_run=dry_run, lock=lock)

    # ------------------------------------------------------------------------------------ services

    def clean(self, *, retain_commits: int | None = None, retain_versions: int | None = None,
              retain_hours: int | None = None, dry_run: bool = False, lock: TableLock | None = None,
              on_progress: Progress | None = None) -> r.CleanResult:
        """Delete file slices no longer needed; carried-over link targets are kept. The policy is the one whose
        retention is given — KEEP_LATEST_COMMITS (`retain_commits`), KEEP_LATEST_FILE_VERSIONS (`retain_versions`),
        KEEP_LATEST_BY_HOURS (`retain_hours`) — else the table's `hoodie.cleaner.policy` and its retention."""
        from engine.services.clean import KEEP_LATEST_BY_HOURS, KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, run_clean

        given = {KEEP_LATEST_COMMITS: retain_commits, KEEP_LATEST_FILE_VERSIONS: retain_versions,
                 KEEP_LATEST_BY_HOURS: retain_hours}
        policies = [p for p, v in given.items() if v is not None]
        if len(policies) > 1:
            raise ConfigError("pass at most one of retain_commits, retain_versions and retain_hours")
        out = run_clean(self.path, retain_commits=retain_commits, retain_versions=retain_versions,
                        retain_hours=retain_hours, policy=policies[0] if policies else None, dry_run=dry_run,
                        lock=lock, on_progress=on_progress)
        out.catalog_sync = None if out.dry_run else _sync_after(self.path, "clean")
        return out

    def recover(self, *, dry_run: bool = False, lock: TableLock | None = None) -> r.RecoverResult:
        """Finish or undo what crashed operations left (rollbacks, dead writes, stalled compaction runs,
        cleans, temporary files); idempotent. Live writers and running compactions are left alone.
        `dry_run`: what it would do, changing nothing."""
        from engine.services.recovery import preview_recover, recover

        if dry_run:
            return preview_recover(self.path)
        out = recover(self.path, lock=lock)
        out.catalog_sync = _sync_after(self.path, "recover") if out.changed else None
        return out

    def update_settings(self, settings: Mapping[str, str], *, lock: TableLock | None = None) -> TableConfig:
        """Store write/sync settings (`--config` keys, e.g. `hoodie.datasource.hive_sync.enable`) in the table's
        hoodie.properties, under the table lock; ConfigError for an unknown key or a malformed value. Returns
        the new configuration. Turning catalog sync on does not sync by itself: the next operation, or
        `sync_catalog()`, does."""
        from engine.config.properties import TABLE_ONLY_SETTINGS, save_table_config, validate_settings
        from engine.config.resolve import refuse_impossible_settings
        from engine.lock import holding, table_lock_of

        checked = validate_settings(dict(settings))
        if checked.keys() & TABLE_ONLY_SETTINGS:   # the lock's rules, checked against the table as it will be
            stored = self._reload().props
            refuse_impossible_settings(self.path, {**{k: stored[k] for k in TABLE_ONLY_SETTINGS if k in stored},
                                                   **checked})
        else:
            refuse_impossible_settings(self.path, checked)
        with holding(table_lock_of(self.path, lock), "update the table's settings"):
            cfg = self._reload()
            cfg.props.update(checked)
            save_table_config(cfg)
        return self._reload()

    def catalog_status(self) -> r.CatalogStatus:
        """The catalogs the table syncs to (`<db>.<name>_ro` / `_rt`) and how its last sync went."""
        from engine.catalog.sync import status

        return status(self.path)

    def sync_catalog(self, *, metastore: str | None = None) -> list[r.CatalogSyncResult]:
        """Register or update `<name>_ro` / `<name>_rt` now in each of the table's catalogs (HiveSyncTool's
        shape), whether or not `hoodie.datasource.hive_sync.enable` is set: one result per target. `metastore`
        (thrift://host:port) names the Hive metastore to use; a catalog that fails after the retries is
        `ok=False` in its result (ConfigError when there is no metastore to sync to)."""
        from engine.catalog.sync import sync_catalog

        return sync_catalog(self.path, metastore=metastore)

    # ------------------------------------------------------------------------------------ observing

    def describe(self) -> r.TableDescription:
        """Timeline, file groups, slices and logs (with their min event time), from headers only."""
        from engine.observe.describe import describe_table

        return describe_table(self.path)

    def activity(self, *, now: dt.datetime | None = None) -> r.TableActivity:
        """Housekeeping (clean policy and retention, last clean, archival, active timeline size) and ingestion
        (last write, lag to `now`, a stream's query/batch/watermark) from one timeline load; no data file read."""
        from engine.observe.activity import table_activity

        return table_activity(self.path, now=now)

    def freshness(self) -> r.Freshness:
        """The RO view's event-time guarantee, checked against late data in the logs."""
        from engine.observe.freshness import freshness_report

        return freshness_report(self.path)

    def metrics(self) -> r.BacklogMetrics:
        """Compaction backlog of the latest file slices."""
        from engine.observe.metrics import backlog_metrics

        return backlog_metrics(self.path)

    def timeline(self, *, archived: bool = False) -> list[r.InstantInfo]:
        """The active timeline, oldest first; with `archived`, preceded by the instants in the table's archive
        (`archived=True` on each: Hudi CLI's `commits show --archived`)."""
        from engine.observe.describe import instant_infos
        from engine.services.archive import archived_instants

        timeline = Timeline.load(self.path)
        old = instant_infos(archived_instants(timeline)) if archived else []
        for info in old:
            info.archived = True
        return old + instant_infos(timeline.instants)

    def archive(self, *, lock: TableLock | None = None) -> r.ArchiveResult:
        """Archive the active timeline's oldest instants as Hudi does after a commit (`hoodie.keep.min.commits` /
        `.max.commits`); the automatic archival after each write and compaction runs the same."""
        from engine.services.archive import run_archive

        return run_archive(self.path, lock=lock)

    def timeline_details(self) -> list[r.InstantDetail]:
        """The active timeline, oldest first, with the files, records and bytes each completed commit wrote."""
        from engine.observe.describe import instant_details

        return instant_details(Timeline.load(self.path))

    def compactions(self) -> list[r.CompactionSummary]:
        """Every compaction on the active timeline (pending or completed), oldest first."""
        from engine.compaction.history import list_compactions

        return list_compactions(self.path)

    def compaction(self, instant: str) -> r.CompactionPlan:
        """One compaction with its operations per file group (and its result once completed)."""
        from engine.compaction.history import describe_compaction

        return describe_compaction(self.path, instant)

    def tide(self, bucket: Latency = "1h", *, by_partition: bool = False) -> list[r.TideBucket]:
        """Uncompacted log records and bytes per event-time bucket of the logs' min event time, from block
        headers and write stats (no data decoded): how much a threshold past each bucket would compact.
        `by_partition`: per partition and bucket (`PartitionTideBucket`), the backlog heatmap's cells."""
        from engine.observe.tide import tide

        return tide(self.path, latency_ms(bucket) or 0, by_partition=by_partition)

    def freshness_lag(self, *, freshness: r.Freshness | None = None,
                      buckets: list[r.TideBucket] | None = None) -> dt.timedelta | None:
        """How far the RO view trails the newest logged data in event time (engine.observe.tide.freshness_lag),
        from `freshness` and `buckets` when the caller has them (else `freshness()` and `tide()`); the CLI's
        `tide` prints it and the dashboard stores it."""
        from engine.observe.tide import freshness_lag

        fresh = self.freshness() if freshness is None else freshness
        return freshness_lag(fresh.ro_completion_time, self.tide() if buckets is None else buckets)


# ------------------------------------------------------------------------------------------ argument parsing

def threshold_ms(value: Threshold | None) -> int | None:
    """A threshold (tz-aware datetime, ISO-8601 string or epoch millis) as epoch millis."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"threshold must be a datetime, an ISO-8601 string or epoch millis, got {value!r}")
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ConfigError(f"threshold {value!r} has no time zone; pass a tz-aware datetime")
        ms = r.to_ms(value)
        assert ms is not None
        return ms
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return eventtime.parse_time(value, "threshold")
    raise ConfigError(f"threshold must be a datetime, an ISO-8601 string or epoch millis, got {value!r}")


def compaction_threshold(value: Threshold) -> dt.datetime:
    """A compaction threshold T as `schedule_compaction` accepts it (ISO-8601 string — naive is UTC —,
    tz-aware datetime or epoch millis, from 1970 to the end of year 9999), as a UTC datetime; ConfigError
    naming the value otherwise. Callers validating input up front use this, so they refuse exactly what
    the engine would refuse later."""
    ms = threshold_ms(value)
    assert ms is not None
    if not 0 <= ms <= eventtime.MAX_MS:
        raise ConfigError(f"threshold {value!r} is out of range: a compaction threshold is an event time "
                          "from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z")
    when = r.from_ms(ms)
    assert when is not None
    return when


def latency_ms(value: Latency | None) -> int | None:
    """A duration ("2h"-style string, timedelta or int millis) as millis."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"duration must be like '2h', a timedelta or millis, got {value!r}")
    if isinstance(value, dt.timedelta):
        return int(value / dt.timedelta(milliseconds=1))
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return parse_duration_ms(value)
        except ValueError as exc:  # its message already names the value and what is wrong with it
            raise ConfigError(str(exc)) from None
    raise ConfigError(f"duration must be like '2h', a timedelta or millis, got {value!r}")


# ------------------------------------------------------------------------------------------ conversions

def _refuse_output_inside_a_table(output: str) -> None:
    """A query result written into a Hudi table would be taken for one of its files (a Parquet file in a partition
    is a base file to Java and hudi-rs; one under `.hoodie/` may replace its properties or timeline)."""
    table = enclosing_table(output)
    if table is not None:
        raise ConfigError(f"{output} is inside the Hudi table at {table}: write the result outside any table")


def _sync_after(path: str, reason: str, partitions: set[str] | None = None,
                instant: str | None = None) -> list[r.CatalogSyncResult] | None:
    """The catalog sync an operation owes once committed (never raises; see engine.catalog.sync)."""
    from engine.catalog.sync import sync_after

    return sync_after(path, reason, partitions=partitions, instant=instant)


def _is_dataframe(source: object) -> TypeGuard[DataFrame]:
    from pyspark.sql import DataFrame

    return isinstance(source, DataFrame)
