"""What the engine API returns: one dataclass per result, each serialising itself with `to_dict()`.

Times are tz-aware UTC `datetime`s in Python and ISO-8601 UTC strings ("2013-01-20T00:00:00.000Z") in
`to_dict()`. A class lists in `_MS_FIELDS` the times a caller needs as integers too; `to_dict()` then adds
`<name>_ms` (epoch millis) beside the ISO string.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def utc(ms: int) -> dt.datetime:
    """Epoch millis -> tz-aware UTC datetime."""
    return _EPOCH + dt.timedelta(milliseconds=int(ms))


def from_ms(ms: int | None) -> dt.datetime | None:
    """Epoch millis -> tz-aware UTC datetime (None stays None)."""
    return None if ms is None else utc(ms)


def to_ms(value: dt.datetime | None) -> int | None:
    """tz-aware datetime -> epoch millis (None stays None)."""
    return None if value is None else int((value - _EPOCH) / dt.timedelta(milliseconds=1))


def iso(value: dt.datetime | None) -> str | None:
    """ISO-8601 UTC with millisecond precision and a Z suffix, as every JSON output of Tidemark prints it."""
    if value is None:
        return None
    utc = value.astimezone(dt.UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return iso(value)
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


# Fields present in JSON only when set: a table without catalog sync keeps its results' shape.
_OMIT_NONE = ("catalog_sync", "services", "spark_tasks")


class Result:
    """Base of every result: `to_dict()` walks the dataclass fields (skipping `_SKIP`)."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ()
    _SKIP: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name in self._SKIP or (f.name in _OMIT_NONE and getattr(self, f.name) is None):
                continue
            value = getattr(self, f.name)
            out[f.name] = _jsonable(value)
            if f.name in self._MS_FIELDS:
                out[f"{f.name}_ms"] = to_ms(value)
        return out


# ------------------------------------------------------------------------------------------ write / read

@dataclass
class WriteResult(Result):
    """One write: a deltacommit, or (insert_overwrite[_table]) a replacecommit."""

    instant: str
    operation: str
    records_written: int
    log_files: list[str]
    file_groups: int
    committed_at: dt.datetime
    action: str = "deltacommit"
    base_files: list[str] = field(default_factory=list)          # an overwrite's new file groups' base files
    replaced_file_groups: dict[str, list[str]] = field(default_factory=dict)   # partition -> file ids replaced
    catalog_sync: list[CatalogSyncResult] | None = None                # set when the table syncs to a catalog
    services: TableServicesResult | None = None                        # the clean/archival that followed


@dataclass
class StreamStatus(Result):
    """A table's streaming writer as the active timeline records it (its newest streaming deltacommit)."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("last_write", "watermark")

    query_id: str | None        # Spark's query id (None: written by Java's sink, which records none)
    identifier: str             # hoodie.datasource.write.streaming.checkpoint.identifier
    last_batch_id: int
    last_instant: str
    last_write: dt.datetime     # when that deltacommit completed
    watermark: dt.datetime | None   # greatest event time the query has written so far
    lag: dt.timedelta           # now - last_write
    lag_ms: int = 0


@dataclass
class ReadResult(Result):
    """A query result: exported to `output`, or (no output) held in `table` as Arrow."""

    _SKIP: ClassVar[tuple[str, ...]] = ("table",)

    query: str
    rows: int
    output: str | None
    begin_instant: str | None = None   # incremental: the range (begin, end] as asked (None: start / latest)
    end_instant: str | None = None
    as_of_instant: str | None = None   # time travel: the instant
    table: pa.Table | None = None
    more: bool = False                 # `Table.head`: rows beyond the `rows` shown follow


# ------------------------------------------------------------------------------------------ compaction

@dataclass
class SettingUsed(Result):
    """A setting a compaction plan was made with, and where its value came from."""

    value: Any
    source: str  # "argument" | "table" | "default" | "store" (object storage: copy carry-over)


@dataclass
class CarriedLog(Result):
    """A log a compaction does not merge but carries into the new slice under a new name."""

    name: str          # its name in the new slice
    target: str        # the file it carries (relative to the partition)
    mode: str | None   # "symlink" | "copy"


@dataclass
class FileGroupOperation(Result):
    """What a compaction does to one file group."""

    partition: str
    file_id: str
    base_instant: str | None
    base_file: str | None
    logs_compacted: list[str]
    logs_carried: list[CarriedLog]
    bytes_compacted: int | None = None
    bytes_carried: int | None = None
    new_base_file: str | None = None     # completed compactions only
    records_written: int | None = None   # completed compactions only


@dataclass
class CompactionResult(Result):
    """A compaction run that committed."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("threshold", "ro_completion_time", "ro_freshness_time")

    instant: str
    threshold: dt.datetime | None
    base_files: list[str]
    records_written: int
    logs_carried_over: int
    spill_logs: list[str]
    ro_completion_time: dt.datetime | None
    ro_freshness_time: dt.datetime | None
    catalog_sync: list[CatalogSyncResult] | None = None
    services: TableServicesResult | None = None   # the clean/archival that followed
    spark_tasks: list[SparkTaskFigures] | None = None   # a run on Spark: what each of its tasks measured


@dataclass
class SparkTaskFigures(Result):
    """What one Spark task of a compaction run measured in its Python worker over its work: where a run's time went
    task by task (bench_cluster_compaction's critical path; a cluster's slow executor)."""

    partition: int | None   # the task's index in its stage (None when not known)
    groups: int             # file groups it compacted
    python_cpu_s: float     # the worker process's CPU seconds over the work, every thread's
    python_wall_s: float


@dataclass
class CompactionPlan(Result):
    """A compaction: a preview (instant None), a scheduled plan, or (with `result`) a completed one."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("threshold",)

    instant: str | None
    state: str                       # "preview" | "requested" | "inflight" | "completed" | "nothing_to_do"
    threshold: dt.datetime | None
    strategy: str | None
    carry_over: str | None
    exact: bool | None
    settings_used: dict[str, SettingUsed] = field(default_factory=dict)
    operations: list[FileGroupOperation] = field(default_factory=list)
    projected_ro_completion_time: dt.datetime | None = None
    scheduled_at: dt.datetime | None = None
    event_time_sources: dict[str, int] | None = None
    result: CompactionResult | None = None
    message: str = ""

    @property
    def file_groups(self) -> int:
        return len(self.operations)


@dataclass
class CompactionSummary(Result):
    """One line of the compaction history."""

    instant: str
    scheduled_at: dt.datetime | None
    state: str
    threshold: dt.datetime | None
    strategy: str | None
    carry_over: str | None
    exact: bool | None
    file_groups: int | None
    logs_compacted: int | None
    logs_carried: int | None
    records_written: int | None
    ro_completion_time: dt.datetime | None
    ro_freshness_time: dt.datetime | None


@dataclass
class RollbackResult(Result):
    """A rollback instant: what it undid (`instant`, a deltacommit or compaction) and how."""

    instant: str
    deleted_files: list[str]
    removed_instant_files: list[str]
    action: str = ""                      # "deltacommit" or "compaction"
    rollback_instant: str = ""            # R (R.rollback on the timeline)
    was_completed: bool = False
    rollback_log_files: list[str] = field(default_factory=list)   # logs holding the rollback command blocks
    restored_ro: dict[str, str] | None = None                     # the RO guarantee put back (compactions)
    expired_writes: list[str] = field(default_factory=list)       # dead writers' writes rolled back first
    catalog_sync: list[CatalogSyncResult] | None = None


# ------------------------------------------------------------------------------------------ pending-plan admin

@dataclass
class FileGroupValidation(Result):
    """One operation of a pending plan checked against the files (`compaction validate`): Valid or Error."""

    partition: str
    file_id: str
    valid: bool
    errors: list[str]                      # why not, one line each (empty when valid)
    base_file: str | None = None           # the old base the plan merges into (None: a log-only group)
    logs_compacted: int = 0
    logs_carried: int = 0
    logs_written_since: list[str] = field(default_factory=list)   # logs written into slice C since planning

    @property
    def status(self) -> str:
        return "Valid" if self.valid else "Error"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "status": self.status}


@dataclass
class PlanValidation(Result):
    """`compaction validate`: every file a pending plan names still exists and decodes its headers."""

    instant: str
    state: str                             # requested | inflight
    valid: bool
    file_groups: list[FileGroupValidation]


@dataclass
class LogRename(Result):
    """One log moved between slices (names relative to the partition folder)."""

    partition: str
    file_id: str
    source: str
    target: str
    done: bool = False                     # False in a dry run


@dataclass
class UnscheduleResult(Result):
    """`compaction unschedule`: a whole pending plan, or one file group, taken back; logs written into the plan's
    slice since it was scheduled are renamed into the previous slice, so every reader keeps reading them."""

    instant: str
    dry_run: bool
    renames: list[LogRename]
    unscheduled_file_groups: list[str]     # "<partition>/<fileId>"
    remaining_file_groups: int             # operations left in the plan (0: the plan is gone)
    rollback_instant: str | None = None    # the rollback instant that removed a plan left empty
    reverted_inflight: bool = False        # an inflight plan went back to requested first
    message: str = ""


@dataclass
class RepairResult(Result):
    """`compaction repair`: logs an interrupted unschedule moved are put back where the plan expects them."""

    instant: str
    dry_run: bool
    renames: list[LogRename]
    validation: PlanValidation | None
    message: str = ""


# ------------------------------------------------------------------------------------------ services

@dataclass
class CleanResult(Result):
    """A clean (or its dry run: `instant` None, `files_to_delete` what would go)."""

    instant: str | None
    dry_run: bool
    policy: str
    retained: int
    earliest_instant_to_retain: str | None
    files_to_delete: dict[str, list[str]]
    deleted: dict[str, list[str]]
    failed: dict[str, list[str]]
    kept_link_targets: dict[str, list[str]]
    skipped_file_groups: list[dict[str, str]]
    errors: list[str]
    resumed: list[str]
    message: str
    catalog_sync: list[CatalogSyncResult] | None = None
    # files rolled-back writes left behind (engine.services.orphans): removed, or for a dry run to be removed
    orphans: list[str] = field(default_factory=list)

    @property
    def total_deleted(self) -> int:
        return sum(len(v) for v in self.deleted.values())

    @property
    def total_planned(self) -> int:
        return sum(len(v) for v in self.files_to_delete.values())

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "total_deleted": self.total_deleted, "total_planned": self.total_planned}


# ------------------------------------------------------------------------------------------ catalog


@dataclass
class ArchiveResult(Result):
    """An archival of the active timeline (engine.services.archive): the instants moved to the archive."""

    archived: list[str]
    files_written: list[str]
    files_deleted: int
    message: str


@dataclass
class TableServicesResult(Result):
    """The table services a commit ran after it (engine.services.table_services): each one's result when it ran,
    why one was skipped, what failed (the commit stands either way)."""

    clean: CleanResult | None = None
    archive: ArchiveResult | None = None
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class CatalogSyncResult(Result):
    """One catalog sync of `<table>_ro` / `<table>_rt` (HiveSyncTool's shape) — or why none happened.

    `ok` False with `error` set is a failed sync: the table operation it followed still committed; the next
    operation (or `tidemark sync`, or the control plane) retries it. `skipped` names why nothing was sent."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("ro_completion_time", "synced_at")

    ok: bool
    target: str                          # "hive_metastore" | "glue"
    catalog: str                         # the metastore URIs, or "glue[:region]"
    database: str
    tables: list[str]
    reason: str                          # what triggered it: create, write, compaction, rollback, clean, manual
    synced_at: dt.datetime | None = None
    attempts: int = 0
    partitions: int = 0
    last_commit_time_sync: str | None = None
    ro_completion_time: dt.datetime | None = None
    ro_completion_instant: str | None = None
    error: str | None = None
    skipped: str | None = None


@dataclass
class CatalogStatus(Result):
    """Where a table syncs and how its last sync went (from the table's settings and its recorded outcome)."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("synced_at", "last_ok_at")

    enabled: bool                        # hoodie.datasource.hive_sync.enable
    catalogs: list[str]                  # metastore URIs / "glue:<region>"; empty when none is configured
    tables: list[str]                    # "<database>.<name>_ro", "<database>.<name>_rt"
    synced_at: dt.datetime | None = None # the last attempt
    ok: bool | None = None               # None: never synced
    error: str | None = None
    last_ok_at: dt.datetime | None = None


@dataclass
class RecoverResult(Result):
    """What `recover` finished or undid after crashes; `changed` False means the table was quiescent."""

    _SKIP: ClassVar[tuple[str, ...]] = ("rollbacks",)

    rolled_back: list[str]                # writes of dead writers (expired heartbeats), rolled back
    message: str
    changed: bool = False                 # a dry run: whether the real run would change anything
    dry_run: bool = False                 # a preview: every list says what would be done, nothing was
    resumed_rollbacks: list[str] = field(default_factory=list)     # instants whose interrupted rollback finished
    live_writes: list[str] = field(default_factory=list)           # pending writes whose heartbeat has not expired
    # instant -> when its heartbeat expires, for live writes that already missed a beat (perhaps killed)
    stale_writes: dict[str, dt.datetime] = field(default_factory=dict)
    reverted_compactions: list[str] = field(default_factory=list)  # inflight -> requested (outputs removed)
    running_compactions: list[str] = field(default_factory=list)
    finished_cleans: list[str] = field(default_factory=list)
    republished_guarantee: str | None = None
    removed_files: list[str] = field(default_factory=list)
    # files rolled-back writes left behind (engine.services.orphans), and the rolled-back instants they held
    removed_orphans: list[str] = field(default_factory=list)
    orphan_instants: list[str] = field(default_factory=list)
    catalog_sync: list[CatalogSyncResult] | None = None
    # Python callers only (not in to_dict): the rollbacks it resumed, then those of dead writes, in full.
    rollbacks: list[RollbackResult] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ observing

@dataclass
class Freshness(Result):
    """The RO view's event-time guarantee and the late data breaking it."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("ro_completion_time", "ro_freshness_time", "threshold")

    table: str
    ro_completion_time: dt.datetime | None
    ro_freshness_time: dt.datetime | None
    threshold: dt.datetime | None
    compaction_instant: str | None
    source: str | None
    late_records: int
    late_deletes: int   # of late_records, how many are deletes (a late delete breaks the promise too)
    late_min_event_time: dt.datetime | None
    late_instants: list[str]
    late_unknown_blocks: int
    guarantee: str   # "holds" | "broken" | "none"
    message: str


@dataclass
class BacklogMetrics(Result):
    """The compaction backlog of the latest file slices (header scans only)."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("min_event_time",)

    table: str
    min_event_time: dt.datetime | None
    file_slices: int
    file_slices_with_logs: int
    remaining_log_files: int
    remaining_log_bytes: int
    carried_over_log_files: int
    logs_with_unknown_event_time: int
    log_event_time_sources: dict[str, int]
    pending_compactions: int
    pending_compaction_instants: list[str]
    # Corrupt blocks of committed instants in the remaining logs (framing and content prefixes; see describe).
    corrupt_log_blocks: int = 0
    # The earliest committed write still waiting in a remaining log (its instant): the backlog's wall-clock age.
    oldest_log_instant: str | None = None


@dataclass
class InstantInfo(Result):
    """One instant of the active timeline."""

    instant: str
    action: str
    state: str
    time: dt.datetime | None   # the instant time read as a UTC time
    completion_time: str | None = None   # table version 8: when a completed instant completed (its file name)
    archived: bool = False               # read from the archive (`timeline(archived=True)`), no longer active


@dataclass
class InstantDetail(InstantInfo):
    """An instant with what its commit metadata says (None where an instant has no commit metadata: a
    requested or inflight one, a clean, a rollback): files, records, deletes and bytes written."""

    files: int | None = None
    records: int | None = None       # records written (inserts and updates)
    deletes: int | None = None       # delete records written
    bytes: int | None = None
    # A completed compaction (commit): what Hudi's metrics report for it, from its write stats.
    log_files_compacted: int | None = None
    log_bytes_compacted: int | None = None
    records_updated: int | None = None


@dataclass
class TideBucket(Result):
    """Uncompacted log data whose min event time falls in [start, end): what moving T past `end` compacts.

    `start`/`end` are None for logs whose event time is unknown from headers and write stats.
    """

    start: dt.datetime | None
    end: dt.datetime | None
    log_files: int
    log_records: int | None   # None when no write stat names the logs
    log_bytes: int
    newest_event_time: dt.datetime | None = None   # the newest event of these logs (their max), when known


@dataclass
class PartitionTideBucket(TideBucket):
    """A tide bucket of one partition ("" for a non-partitioned table): the backlog heatmap's cell."""

    partition: str = ""


@dataclass
class LogFileInfo(Result):
    name: str
    size: int
    blocks: int
    corrupt_blocks: int        # of committed instants: their records are missing from every read
    min_event_time: dt.datetime | None
    instants: list[str]
    torn_blocks: int = 0       # torn tails of failed writes, skipped silently (as Java does)


@dataclass
class SliceInfo(Result):
    base_instant: str
    base_file: str | None
    log_files: list[LogFileInfo]


@dataclass
class FileGroupInfo(Result):
    partition: str
    file_id: str
    slices: list[SliceInfo]


@dataclass
class ReplacedGroupInfo(Result):
    """A file group a completed replacecommit replaced, still on disk until a clean deletes it."""

    partition: str
    file_id: str
    replaced_by: str


@dataclass
class LockInfo(Result):
    """How the table is locked across hosts: Hudi's storage-based lock (`provider` "storage": its lock object and
    who holds it now) or this host's file lock ("host": other hosts need the control plane's lease)."""

    provider: str
    lock_object: str | None = None
    state: str | None = None          # "held", "free" (given back or never taken), "expired" (a lease run out) or
                                      # "unreadable" (not a Hudi lock object: no one can take it)
    owner: str | None = None
    valid_until: dt.datetime | None = None


@dataclass
class SettingInfo(Result):
    """One housekeeping setting as the table has it: its Hudi key, value, and whether the table sets it
    (`table`) or Hudi's default applies (`default`)."""

    key: str
    value: str
    source: str


@dataclass
class Housekeeping(Result):
    """Cleaning and archival of the table: the settings in force and what the timeline shows they did."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("last_clean_at",)

    clean_policy: str                      # KEEP_LATEST_COMMITS | KEEP_LATEST_FILE_VERSIONS | KEEP_LATEST_BY_HOURS
    clean_retained: int | None             # commits, file versions or hours, as the policy counts
    clean_retained_unit: str               # "commits" | "file versions" | "hours"
    clean_retained_key: str | None         # the Hudi key of that retention
    clean_automatic: bool
    clean_async: bool
    archive_automatic: bool
    archive_min_commits: int | None
    archive_max_commits: int | None
    active_instants: int                   # instants on the active timeline
    active_instant_files: int              # their files (requested, inflight and completed each count)
    archived: bool                         # anything archived: `.hoodie/archived/` (v6) or the LSM history (v8/v9)
    last_clean: str | None = None          # the latest completed clean's instant
    last_clean_at: dt.datetime | None = None   # when it completed
    last_clean_files_deleted: int | None = None   # its HoodieCleanMetadata totalFilesDeleted
    settings: list[SettingInfo] = field(default_factory=list)

    def source(self, key: str | None) -> str | None:
        """"table" or "default" for a setting shown (None for another key)."""
        return next((s.source for s in self.settings if s.key == key), None)


@dataclass
class StreamProgress(Result):
    """What a streaming writer recorded with its deltacommit (extraMetadata)."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("watermark",)

    query_id: str | None
    batch_id: int | None
    watermark: dt.datetime | None          # the max event time written so far
    checkpoint: str | None = None          # Hudi's `_hudi_streaming_sink_checkpoint`, as written


@dataclass
class Ingestion(Result):
    """The table's latest write (deltacommit, or an overwrite's replacecommit; table services are not writes)."""

    _MS_FIELDS: ClassVar[tuple[str, ...]] = ("last_write_at", "checked_at")

    checked_at: dt.datetime                # the "now" the lag is measured from
    last_write: str | None = None
    last_write_action: str | None = None
    last_write_operation: str | None = None
    last_write_at: dt.datetime | None = None   # its completion time
    lag_seconds: float | None = None       # checked_at - last_write_at
    stream: StreamProgress | None = None   # set when the last write came from a stream


@dataclass
class TableActivity(Result):
    """Housekeeping and ingestion facts of a table, from one timeline load and hoodie.properties."""

    housekeeping: Housekeeping
    ingestion: Ingestion


@dataclass
class TableDescription(Result):
    """The table as its timeline and file-system view see it (headers only, no data decoded)."""

    table: str
    path: str
    table_version: int
    record_key: list[str]
    partition_fields: list[str]
    ordering_field: str | None
    event_time_field: str | None
    merge_mode: str
    timeline: list[InstantInfo]
    file_groups: list[FileGroupInfo]
    replaced_file_groups: list[ReplacedGroupInfo] = field(default_factory=list)   # hidden from readers
    corrupt_log_blocks: int = 0   # corrupt blocks of committed instants over every log file listed
    lock: LockInfo | None = None
    activity: TableActivity | None = None
