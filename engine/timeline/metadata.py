"""Typed timeline metadata: the one reader and the one writer of each on-disk form Tidemark interprets.

- compaction plans (`<C>.compaction.requested`, Avro HoodieCompactionPlan + the RFC's symlinkOperations),
  with Tidemark's settings in extraMetadata (`tidemark.*`, keys defined here only);
- commit metadata (`<ts>.deltacommit` / `<ts>.commit`, JSON HoodieCommitMetadata) and its write stats,
  with a compaction's results in extraMetadata (carried logs, RO times);
- replace commits (`<ts>.replacecommit`: commit metadata plus `partitionToReplaceFileIds`) and their
  requested metadata (Avro HoodieRequestedReplaceMetadata: empty for insert_overwrite, a clustering plan
  for clustering);
- clean plans (Avro HoodieCleanerPlan).
Everything else reads these dataclasses, never the raw dicts: a derived fact such as "is this an
exact-mode plan?" is a property here, defined once.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.config.choices import CarryOver
from engine.timeline import avro_models
from engine.timeline.actions import State

# extraMetadata keys written by Tidemark's compaction (plan and commit).
THRESHOLD = "tidemark.threshold"
STRATEGY = "tidemark.strategy"
CARRY_OVER = "tidemark.carryOver"          # plan: the mode; commit: JSON list of carried logs
EXACT = "tidemark.exact"
EVENT_TIME_SOURCES = "tidemark.eventTimeSources"
SETTINGS_USED = "tidemark.settingsUsed"
UNSCHEDULED = "tidemark.unscheduledFileGroups"   # plan: JSON ["<partition>/<fileId>", ...] taken out of it
RO_COMPLETION = "tidemark.roCompletionTime"
RO_FRESHNESS = "tidemark.roFreshnessTime"
SCHEMA = "schema"
CLEAN_RETAINED = "tidemark.retained"
COMPACT_OPERATION = "COMPACT"
# WriteOperationType names of the replacecommits Tidemark writes (operationType in the commit JSON).
INSERT_OVERWRITE = "INSERT_OVERWRITE"
INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"
CLUSTER_OPERATION = "cluster"   # WriteOperationType.CLUSTER.value() in the requested metadata
# Operation metrics (map<string, double>) a Tidemark plan adds about the logs it carries over, known when
# planning from their headers: whether the run needs their records (1: a delete may be among the operation's
# logs, folded or carried; 0: none is), and each one's event times (epoch ms) by its position in
# symlinkOperations. A plan without them (older, or Java's) says nothing: read them.
# A deltacommit's extraMetadata: JSON {"<log path relative to the table>": "<MD5 hex of its bytes>"} for the log
# objects it created whole on an object store. A single-part object's ETag is that MD5 (a server-side copy keeps
# it), so a listing shows, with no read, whether a log is still byte for byte what its write committed.
LOG_MD5 = "tidemark.logMd5"
# The same, on one write stat while it travels from a write task to the driver (never published).
STAT_MD5 = "_tidemarkMd5"
# A deltacommit's extraMetadata on an object store: compact JSON {"<partition>": {"<log name>": [min event time ms,
# max event time ms, 1 if it holds deletes else 0, size in bytes, MD5 hex (when recorded)]}} for the logs of the
# table's latest file slices as of that commit whose event times Tidemark knows (engine/slices/pending_log_times.py).
PENDING_LOG_TIMES = "tidemark.pendingLogEventTimes"
# operationType of the commits table services make (WriteOperationType values): everything else is a write.
SERVICE_OPERATIONS = frozenset({"compact", "log_compact", "cluster"})
CARRIED_NEEDED = "tidemark.carriedLogsNeeded"
CARRIED_MIN = "tidemark.carriedMinEventTime."
CARRIED_MAX = "tidemark.carriedMaxEventTime."


def _millis(value: object) -> int | None:
    """Epoch-millis strings as written in extraMetadata; empty or junk gives None."""
    if value is None or value == "":
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _str(value: int | None) -> str:
    return "" if value is None else str(value)


def _json(raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------ compaction plans

@dataclass(frozen=True)
class SymlinkOperation:
    """A log carried into slice C: `symlink` is its new name there, `target` the file it carries."""

    symlink: str
    target: str


@dataclass(frozen=True)
class CompactionOperation:
    """One file group of a compaction plan."""

    partition_path: str
    file_id: str
    base_instant: str
    data_file: str | None                 # the old base file's name, None for a log-only group
    delta_files: tuple[str, ...]          # logs merged into the new base, in log order
    carried: tuple[SymlinkOperation, ...]  # logs carried over, in log order
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.partition_path, self.file_id)

    @property
    def carried_needed(self) -> bool:
        """Whether the run needs the carried logs' records: a delete may be among the operation's logs (True
        unless the plan recorded that none is)."""
        return self.metrics.get(CARRIED_NEEDED, 1.0) != 0.0

    @property
    def carried_event_times(self) -> dict[str, tuple[int, int]]:
        """Carried log's name in slice C -> (min, max) event time, for those the plan recorded."""
        out = {}
        for i, s in enumerate(self.carried):
            lo, hi = self.metrics.get(f"{CARRIED_MIN}{i}"), self.metrics.get(f"{CARRIED_MAX}{i}")
            if lo is not None and hi is not None:
                out[s.symlink] = (int(lo), int(hi))
        return out

    @staticmethod
    def carried_metrics(needed: bool, times: list[tuple[int | None, int | None]]) -> dict[str, float]:
        """The metrics recording what the plan knows of its carried logs (`times` in carried order)."""
        out = {CARRIED_NEEDED: 1.0 if needed else 0.0}
        for i, (lo, hi) in enumerate(times):
            if lo is not None and hi is not None:
                out[f"{CARRIED_MIN}{i}"], out[f"{CARRIED_MAX}{i}"] = float(lo), float(hi)
        return out

    @classmethod
    def from_avro(cls, op: Mapping[str, Any]) -> CompactionOperation:
        return cls(
            partition_path=op.get("partitionPath") or "",
            file_id=op["fileId"],
            base_instant=op.get("baseInstantTime") or "",
            data_file=op.get("dataFilePath") or None,
            delta_files=tuple(op.get("deltaFilePaths") or ()),
            carried=tuple(SymlinkOperation(s["symlink"], s.get("target") or "")
                          for s in op.get("symlinkOperations") or () if s.get("symlink")),
            metrics=dict(op.get("metrics") or {}),
        )

    def to_avro(self) -> dict[str, Any]:
        return avro_models.compaction_operation(
            base_instant=self.base_instant, file_id=self.file_id, partition_path=self.partition_path,
            delta_file_names=list(self.delta_files), data_file_name=self.data_file, metrics=dict(self.metrics),
            symlink_operations=[(s.symlink, s.target) for s in self.carried])


@dataclass(frozen=True)
class PlanSettings:
    """Tidemark's settings of a plan (extraMetadata). None/"" where a foreign plan says nothing."""

    threshold_ms: int | None = None
    strategy: str | None = None
    carry_over: str | None = None
    exact: bool = False
    event_time_sources: Mapping[str, int] | None = None
    settings_used: Mapping[str, Mapping[str, Any]] | None = None
    # File groups `compaction unschedule --file-group` took out of the plan ("<partition>/<fileId>"): their
    # logs at or before T stay outside the base, so the plan no longer promises T itself.
    unscheduled: tuple[str, ...] = ()

    @property
    def promises_threshold(self) -> bool:
        """Only an event-time plan promises its threshold T to the RO view."""
        return self.strategy == "event_time" and self.threshold_ms is not None

    @classmethod
    def from_extra(cls, extra: Mapping[str, str]) -> PlanSettings:
        mode = extra.get(CARRY_OVER)
        return cls(threshold_ms=_millis(extra.get(THRESHOLD)), strategy=extra.get(STRATEGY) or None,
                   carry_over=mode if mode in tuple(CarryOver) else None,
                   exact=str(extra.get(EXACT) or "").lower() == "true",
                   event_time_sources=_json(extra.get(EVENT_TIME_SOURCES)),
                   settings_used=_json(extra.get(SETTINGS_USED)),
                   unscheduled=tuple(_json(extra.get(UNSCHEDULED)) or ()))

    def to_extra(self) -> dict[str, str]:
        extra = {THRESHOLD: _str(self.threshold_ms), STRATEGY: self.strategy or "",
                 CARRY_OVER: self.carry_over or "", EXACT: "true" if self.exact else "false"}
        if self.event_time_sources is not None:
            extra[EVENT_TIME_SOURCES] = json.dumps(dict(self.event_time_sources))
        if self.settings_used is not None:
            extra[SETTINGS_USED] = json.dumps({k: dict(v) for k, v in self.settings_used.items()})
        if self.unscheduled:
            extra[UNSCHEDULED] = json.dumps(list(self.unscheduled))
        return extra


@dataclass(frozen=True)
class CompactionPlanRecord:
    """A HoodieCompactionPlan as Tidemark reads and writes it."""

    operations: tuple[CompactionOperation, ...]
    settings: PlanSettings
    strategy_class: str | None = None
    strategy_params: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_exact(self) -> bool:
        """Exact mode: records with event time > T were kept out of the base (spill log version 1)."""
        return self.settings.exact

    @property
    def promises_threshold(self) -> bool:
        """Only an event-time plan promises its threshold T to the RO view."""
        return self.settings.promises_threshold

    @property
    def completion_floor(self) -> int | None:
        """The least completion time the commit may publish: T, unless file groups were unscheduled from the
        plan (their logs at or before T stay in logs; the completion time then follows the logs left alone)."""
        return self.settings.threshold_ms if self.promises_threshold and not self.settings.unscheduled else None

    @classmethod
    def from_avro(cls, plan: Mapping[str, Any]) -> CompactionPlanRecord:
        strategy = plan.get("strategy") or {}
        return cls(operations=tuple(CompactionOperation.from_avro(op) for op in plan.get("operations") or ()),
                   settings=PlanSettings.from_extra(plan.get("extraMetadata") or {}),
                   strategy_class=strategy.get("compactorClassName"),
                   strategy_params=dict(strategy.get("strategyParams") or {}))

    def to_avro(self) -> dict[str, Any]:
        return {
            "operations": [op.to_avro() for op in self.operations],
            "extraMetadata": self.settings.to_extra(),
            "strategy": {"compactorClassName": self.strategy_class, "strategyParams": dict(self.strategy_params),
                         "version": 1},
            "preserveHoodieMetadata": True,
            "missingSchedulePartitions": None,
        }

    def to_bytes(self) -> bytes:
        return avro_models.write_compaction_plan(self.to_avro())

    @classmethod
    def from_bytes(cls, data: bytes) -> CompactionPlanRecord:
        return cls.from_avro(avro_models.read_compaction_plan(data))


# ------------------------------------------------------------------------------------------ commit metadata

@dataclass(frozen=True)
class WriteStat:
    """A HoodieWriteStat: one file written by a commit (path relative to the table)."""

    file_id: str
    path: str
    partition_path: str
    prev_commit: str = "null"   # the string "null" for a new file group, exactly as Java writes it
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    total_write_bytes: int = 0
    file_size: int = 0          # written as total_write_bytes when 0
    total_log_records: int = 0
    total_log_files_compacted: int = 0
    total_log_size_compacted: int = 0
    total_updated_records_compacted: int = 0
    min_event_time: int | None = None
    max_event_time: int | None = None
    log_files: tuple[str, ...] = ()
    base_file: str | None = None
    # A HoodieDeltaWriteStat's logOffset: where this commit's bytes start in its log (`path`); with
    # `file_size` (the bytes it appended there) that is the log's committed extent. None: not a log append.
    log_offset: int | None = None
    # A HoodieDeltaWriteStat (a log append) has a log version; None: a base file's stat.
    log_version: int | None = None
    prev_base_file: str | None = None   # a compaction's stat: the base file it replaced
    total_write_errors: int = 0
    total_log_blocks: int = 0
    total_corrupt_log_block: int = 0
    total_rollback_blocks: int = 0
    runtime_stats: Mapping[str, int] = field(default_factory=dict)

    @property
    def committed_extent(self) -> tuple[int, int] | None:
        """[start, end) of the bytes this commit appended to its log `path`, or None for a base file."""
        if self.log_offset is None or self.file_size <= 0:
            return None
        return (self.log_offset, self.log_offset + self.file_size)

    @property
    def key(self) -> tuple[str, str]:
        return (self.partition_path, self.file_id)

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def records(self) -> int:
        """Records this stat's file holds for its commit: written plus deleted."""
        return self.num_writes + self.num_deletes

    @property
    def names(self) -> set[str]:
        """Every file name the stat names (Java appends to a log across commits: `logFiles`)."""
        return {n for n in (self.file_name, *self.log_files) if n}

    def to_json(self) -> dict[str, Any]:
        """The stat as Java 0.14/0.15 serialises it (key order too): a HoodieDeltaWriteStat when it has a log
        version (logVersion/logOffset/baseFile/logFiles/recordsStats added), else a HoodieWriteStat (a
        compaction's with prevBaseFile/baseFile)."""
        stat: dict[str, Any] = {
            "fileId": self.file_id, "path": self.path, "cdcStats": None, "prevCommit": self.prev_commit,
            "numWrites": self.num_writes, "numDeletes": self.num_deletes, "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts, "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": self.total_write_errors, "tempPath": None, "partitionPath": self.partition_path,
            "totalLogRecords": self.total_log_records, "totalLogFilesCompacted": self.total_log_files_compacted,
            "totalLogSizeCompacted": self.total_log_size_compacted,
            "totalUpdatedRecordsCompacted": self.total_updated_records_compacted,
            "totalLogBlocks": self.total_log_blocks, "totalCorruptLogBlock": self.total_corrupt_log_block,
            "totalRollbackBlocks": self.total_rollback_blocks,
            "fileSizeInBytes": self.file_size or self.total_write_bytes,
            "minEventTime": self.min_event_time, "maxEventTime": self.max_event_time,
            "runtimeStats": {"totalScanTime": 0, "totalUpsertTime": 0, "totalCreateTime": 0, **self.runtime_stats},
        }
        if self.log_version is not None:
            stat["logVersion"] = self.log_version
            stat["logOffset"] = self.log_offset or 0
            stat["baseFile"] = self.base_file or ""   # Java: "" for log-only groups
            stat["logFiles"] = list(self.log_files)
            stat["recordsStats"] = {"val": None}
        elif self.base_file is not None:
            stat["prevBaseFile"] = self.prev_base_file
            stat["baseFile"] = self.base_file
        return stat

    @classmethod
    def from_json(cls, s: Mapping[str, Any]) -> WriteStat:
        def num(key: str) -> int:
            return int(s.get(key) or 0)

        return cls(file_id=s.get("fileId") or "", path=s.get("path") or "", partition_path=s.get("partitionPath") or "",
                   prev_commit=str(s.get("prevCommit") or "null"), num_writes=num("numWrites"),
                   num_deletes=num("numDeletes"), num_update_writes=num("numUpdateWrites"),
                   num_inserts=num("numInserts"), total_write_bytes=num("totalWriteBytes"),
                   file_size=num("fileSizeInBytes"), total_log_records=num("totalLogRecords"),
                   total_log_files_compacted=num("totalLogFilesCompacted"),
                   total_log_size_compacted=num("totalLogSizeCompacted"),
                   total_updated_records_compacted=num("totalUpdatedRecordsCompacted"),
                   min_event_time=_millis(s.get("minEventTime")), max_event_time=_millis(s.get("maxEventTime")),
                   log_files=tuple(s.get("logFiles") or ()), base_file=s.get("baseFile") or None,
                   log_offset=int(s["logOffset"]) if s.get("logOffset") is not None else None,
                   log_version=int(s["logVersion"]) if s.get("logVersion") is not None else None,
                   prev_base_file=s.get("prevBaseFile") or None, total_write_errors=num("totalWriteErrors"),
                   total_log_blocks=num("totalLogBlocks"), total_corrupt_log_block=num("totalCorruptLogBlock"),
                   total_rollback_blocks=num("totalRollbackBlocks"),
                   runtime_stats=dict(s.get("runtimeStats") or {}))


def log_extents(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, int, int]]:
    """(partition, log name, start, end) of every log append in a commit's JSON metadata: the bytes
    [logOffset, logOffset + fileSizeInBytes) of `path` (WriteStat.committed_extent, without building every stat:
    a read asks this of every commit on the timeline)."""
    for partition, stats in (doc.get("partitionToWriteStats") or {}).items():
        for s in stats or ():
            offset, size = s.get("logOffset"), s.get("fileSizeInBytes") or 0
            if offset is not None and size > 0 and s.get("path"):
                yield (s.get("partitionPath") or partition or "", s["path"].rsplit("/", 1)[-1], int(offset),
                       int(offset) + int(size))


@dataclass(frozen=True)
class CarriedEntry:
    """A compaction commit's record of one carried-over log."""

    partition_path: str
    file_id: str
    symlink: str
    target: str
    mode: str | None

    def to_json(self) -> dict[str, Any]:
        return {"partitionPath": self.partition_path, "fileId": self.file_id, "symlink": self.symlink,
                "target": self.target, "mode": self.mode}

    @classmethod
    def from_json(cls, e: Mapping[str, Any]) -> CarriedEntry:
        return cls(e.get("partitionPath") or "", e.get("fileId") or "", e.get("symlink") or "",
                   e.get("target") or "", e.get("mode") or None)


@dataclass(frozen=True)
class CommitMetadata:
    """A HoodieCommitMetadata (deltacommit, commit, replacecommit)."""

    write_stats: tuple[WriteStat, ...]
    operation_type: str | None
    compacted: bool
    extra: Mapping[str, str]
    # A replacecommit's partitionToReplaceFileIds: partition -> file ids it replaced (empty elsewhere).
    replaced_file_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> CommitMetadata:
        stats = tuple(WriteStat.from_json(s) for per in (doc.get("partitionToWriteStats") or {}).values()
                      for s in per or ())
        replaced = {p: tuple(ids or ()) for p, ids in (doc.get("partitionToReplaceFileIds") or {}).items()}
        return cls(stats, doc.get("operationType"), bool(doc.get("compacted")), dict(doc.get("extraMetadata") or {}),
                   replaced)

    @property
    def replaced_file_groups(self) -> set[tuple[str, str]]:
        """(partition, fileId) of every file group this replacecommit replaced."""
        return {(p, fid) for p, ids in self.replaced_file_ids.items() for fid in ids}

    @property
    def schema(self) -> str | None:
        return self.extra.get(SCHEMA) or None

    @property
    def is_compaction(self) -> bool:
        return self.operation_type == COMPACT_OPERATION or self.compacted

    @property
    def carried(self) -> list[CarriedEntry] | None:
        """The compaction's carried-over logs; None when the commit does not record them."""
        entries = _json(self.extra.get(CARRY_OVER))
        if not isinstance(entries, list):
            return None
        return [CarriedEntry.from_json(e) for e in entries if isinstance(e, dict)]

    @property
    def settings(self) -> PlanSettings:
        """The tidemark.* settings a compaction commit repeats from its plan."""
        return PlanSettings.from_extra({k: v for k, v in self.extra.items() if k != CARRY_OVER})

    @property
    def ro_completion_ms(self) -> int | None:
        return _millis(self.extra.get(RO_COMPLETION))

    @property
    def ro_freshness_ms(self) -> int | None:
        return _millis(self.extra.get(RO_FRESHNESS))

    @property
    def records_written(self) -> int:
        return sum(s.num_writes for s in self.write_stats)


def compaction_commit_extra(settings: PlanSettings, carried: list[CarriedEntry], ro_completion_ms: int | None,
                            ro_freshness_ms: int | None) -> dict[str, str]:
    """extraMetadata of a compaction's `<C>.commit` (beside the schema, which commit_metadata_json adds)."""
    return {THRESHOLD: _str(settings.threshold_ms), STRATEGY: settings.strategy or "",
            CARRY_OVER: json.dumps([c.to_json() for c in carried]), EXACT: "true" if settings.exact else "false",
            RO_COMPLETION: _str(ro_completion_ms), RO_FRESHNESS: _str(ro_freshness_ms)}


def inflight_commit_json(operation_type: str) -> bytes:
    """The inflight file of a write as Java 0.14 leaves it (a HoodieCommitMetadata workload profile); we
    record no per-partition profile, which no reader needs, only the operation."""
    doc = {"partitionToWriteStats": {}, "compacted": False, "extraMetadata": {}, "operationType": operation_type}
    return json.dumps(doc, indent=2, separators=(",", " : ")).encode("utf-8")


# ------------------------------------------------------------------------------------------ replace requests

@dataclass(frozen=True)
class ClusteringSlice:
    """One input slice of a clustering plan (file names relative to the partition)."""

    partition_path: str
    file_id: str
    file_names: tuple[str, ...]


@dataclass(frozen=True)
class RequestedReplaceMetadata:
    """`<ts>.replacecommit.requested` (Avro HoodieRequestedReplaceMetadata).

    Java 0.14/0.15 writes an all-null record for insert_overwrite[_table] (`new
    HoodieRequestedReplaceMetadata()`, seen in the hudi-rs fixture), an older Java an empty file, and
    clustering `operationType=cluster` with the plan's input slices.
    """

    operation_type: str | None = None
    slices: tuple[ClusteringSlice, ...] = ()

    @property
    def is_clustering(self) -> bool:
        return (self.operation_type or "").lower() == CLUSTER_OPERATION

    @classmethod
    def from_bytes(cls, data: bytes) -> RequestedReplaceMetadata:
        if not data:
            return cls()
        record = avro_models.read_requested_replace(data)
        slices = []
        for group in (record.get("clusteringPlan") or {}).get("inputGroups") or ():
            for sl in group.get("slices") or ():
                names = [sl.get("dataFilePath"), *(sl.get("deltaFilePaths") or ())]
                slices.append(ClusteringSlice(sl.get("partitionPath") or "", sl.get("fileId") or "",
                                              tuple(n.rsplit("/", 1)[-1] for n in names if n)))
        return cls(record.get("operationType"), tuple(slices))

    def to_bytes(self) -> bytes:
        """Only the insert_overwrite form is written by Tidemark: every field null, as Java writes it."""
        if self.slices:
            raise ValueError("Tidemark does not write clustering plans")
        return avro_models.write_requested_replace({"operationType": self.operation_type, "clusteringPlan": None,
                                                    "extraMetadata": None, "version": None})


# ------------------------------------------------------------------------------------------ rollbacks

@dataclass(frozen=True)
class RollbackRecord:
    """A completed rollback's HoodieRollbackMetadata, as far as readers need it: what it undid, and the files it
    kept on purpose, by name: the logs whose blocks it masked with a command block, and the command logs it wrote
    (Java leaves both; engine.services.orphans never deletes them)."""

    rolled_back: tuple[str, ...]
    kept_files: frozenset[str] = frozenset()

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> RollbackRecord:
        instants = list(record.get("commitsRollback") or ())
        instants += [i["commitTime"] for i in record.get("instantsRollback") or () if i.get("commitTime")]
        kept: set[str] = set()
        for partition in (record.get("partitionMetadata") or {}).values():
            for key in ("rollbackLogFiles", "logFilesFromFailedCommit"):
                kept.update(str(path).rstrip("/").rsplit("/", 1)[-1] for path in partition.get(key) or ())
        return cls(tuple(dict.fromkeys(instants)), frozenset(kept))

    @classmethod
    def from_bytes(cls, data: bytes) -> RollbackRecord:
        return cls.from_avro(avro_models.read_rollback_metadata(data))


# ------------------------------------------------------------------------------------------ cleans

@dataclass(frozen=True)
class CleanRecord:
    """A completed clean's HoodieCleanMetadata, as far as observers need it."""

    policy: str
    files_deleted: int
    earliest_commit_to_retain: str

    @classmethod
    def from_bytes(cls, data: bytes) -> CleanRecord:
        record = avro_models.read_clean_metadata(data)
        return cls(policy=record.get("policy") or "", files_deleted=int(record.get("totalFilesDeleted") or 0),
                   earliest_commit_to_retain=record.get("earliestCommitToRetain") or "")


@dataclass(frozen=True)
class CleanPlanRecord:
    """A HoodieCleanerPlan: which files a clean instant deletes, per partition.

    `file_paths` is v2's full paths per partition; `file_names` is v1's (Java < 0.8) names per partition.
    """

    policy: str
    last_completed_commit: str
    earliest_instant_to_retain: tuple[str, str] | None   # (timestamp, action)
    file_paths: Mapping[str, list[str]] = field(default_factory=dict)
    file_names: Mapping[str, list[str]] = field(default_factory=dict)
    retained: int | None = None

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> CleanPlanRecord:
        earliest = record.get("earliestInstantToRetain")
        return cls(
            policy=record["policy"], last_completed_commit=record.get("lastCompletedCommitTimestamp") or "",
            earliest_instant_to_retain=(earliest["timestamp"], earliest["action"]) if earliest else None,
            file_paths={p: [i["filePath"] for i in infos if i.get("filePath")]
                        for p, infos in (record.get("filePathsToBeDeletedPerPartition") or {}).items()},
            file_names={p: list(names) for p, names in (record.get("filesToBeDeletedPerPartition") or {}).items()},
            retained=_millis((record.get("extraMetadata") or {}).get(CLEAN_RETAINED)))

    def deleted_names(self) -> dict[str, list[str]]:
        """Partition -> names of the files this plan deletes (v2 paths and v1 names alike)."""
        out: dict[str, list[str]] = {p: [path.rstrip("/").rsplit("/", 1)[-1] for path in paths]
                                     for p, paths in self.file_paths.items()}
        for partition, names in self.file_names.items():
            out.setdefault(partition, []).extend(names)
        return out

    def to_avro(self) -> dict[str, Any]:
        """v2: full file paths per partition; the deprecated name map stays empty, as Java leaves it."""
        earliest = self.earliest_instant_to_retain
        return {
            "earliestInstantToRetain": ({"timestamp": earliest[0], "action": earliest[1], "state": State.COMPLETED.name}
                                        if earliest else None),
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "policy": self.policy,
            "filesToBeDeletedPerPartition": {p: list(n) for p, n in self.file_names.items()},
            "filePathsToBeDeletedPerPartition": {p: [{"filePath": path, "isBootstrapBaseFile": False} for path in paths]
                                                 for p, paths in self.file_paths.items()},
            "partitionsToBeDeleted": [],
            "extraMetadata": {CLEAN_RETAINED: _str(self.retained)},
        }

    def to_bytes(self) -> bytes:
        return avro_models.write_clean_plan(self.to_avro())

    @classmethod
    def from_bytes(cls, data: bytes) -> CleanPlanRecord:
        return cls.from_avro(avro_models.read_clean_plan(data))
