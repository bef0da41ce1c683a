"""Compaction history: every compaction on the active timeline, pending or completed, as JSON-ready dicts.

Two records describe one compaction (format facts §3.1, §3.3):
- the plan ``<C>.compaction.requested`` (Avro): what was scheduled — operations, compacted and carried logs,
  the tidemark.* threshold/strategy/carry-over settings in extraMetadata;
- the completed ``<C>.commit`` (JSON): what actually happened — write stats of the new base files, and
  the tidemark.* results (carried logs with their mode, RO completion/freshness times).
A completed compaction is reported from its commit where the commit says something, from the plan otherwise
(Java keeps the plan file after completion; an archived or foreign table may not).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from engine.errors import TidemarkError
from engine.eventtime import iso
from engine.naming import instant_to_millis, is_instant
from engine.timeline import COMMIT, COMPACTION, Instant, State, Timeline, TimelineError, instant_file_name

# extraMetadata keys written by Tidemark's compaction (plan and commit).
THRESHOLD = "tidemark.threshold"
STRATEGY = "tidemark.strategy"
CARRY_OVER = "tidemark.carryOver"
EXACT = "tidemark.exact"
EVENT_TIME_SOURCES = "tidemark.eventTimeSources"
RO_COMPLETION = "tidemark.roCompletionTime"
RO_FRESHNESS = "tidemark.roFreshnessTime"
COMPACT_OPERATION = "COMPACT"


@dataclass(frozen=True)
class CompactionRecord:
    """The raw timeline records of one compaction instant."""

    instant: Instant
    plan: dict[str, Any] | None      # None when the plan file is gone (archived/foreign tables)
    commit: dict[str, Any] | None    # None unless completed

    @property
    def timestamp(self) -> str:
        return self.instant.timestamp

    @property
    def state(self) -> str:
        return self.instant.state.value

    @property
    def plan_extra(self) -> dict[str, str]:
        return dict((self.plan or {}).get("extraMetadata") or {})

    @property
    def commit_extra(self) -> dict[str, str]:
        return dict((self.commit or {}).get("extraMetadata") or {})

    def setting(self, key: str) -> str | None:
        """A tidemark.* value: the commit's (what ran) before the plan's (what was asked)."""
        value = self.commit_extra.get(key)
        return value if value not in (None, "") else self.plan_extra.get(key)


# ------------------------------------------------------------------------------------------ discovery

def _plan_exists(timeline: Timeline, ts: str) -> bool:
    name = instant_file_name(ts, COMPACTION, State.REQUESTED)
    return any(os.path.exists(os.path.join(timeline.hoodie_path, d, name)) for d in ("", ".aux"))


def _is_compaction_commit(timeline: Timeline, inst: Instant, metadata: dict[str, Any]) -> bool:
    # In a MOR table a completed `commit` is a compaction; the plan file or COMPACT operation proves it.
    if _plan_exists(timeline, inst.timestamp):
        return True
    return metadata.get("operationType") == COMPACT_OPERATION or bool(metadata.get("compacted"))


def _read_plan(timeline: Timeline, ts: str) -> dict[str, Any] | None:
    try:
        return timeline.read_compaction_plan(ts)
    except TimelineError:
        if _plan_exists(timeline, ts):
            raise  # present but unreadable: say so rather than report a plan-less compaction
        return None


def compaction_records(timeline: Timeline) -> list[CompactionRecord]:
    """Every compaction on the active timeline, oldest first."""
    out: list[CompactionRecord] = []
    for inst in timeline.instants:
        if inst.action == COMPACTION:
            out.append(CompactionRecord(inst, _read_plan(timeline, inst.timestamp), None))
        elif inst.action == COMMIT and inst.is_completed:
            metadata = timeline.read_commit_metadata(inst)
            if _is_compaction_commit(timeline, inst, metadata):
                out.append(CompactionRecord(inst, _read_plan(timeline, inst.timestamp), metadata))
    return out


def last_completed_event_time_compaction(records: list[CompactionRecord]) -> CompactionRecord | None:
    """The latest completed compaction that recorded an event-time threshold (the RO guarantee's source)."""
    done = [r for r in records if r.commit is not None and _millis(r.setting(THRESHOLD)) is not None
            and r.setting(STRATEGY) == "event_time"]
    return done[-1] if done else None


# ------------------------------------------------------------------------------------------ parsing helpers

def _millis(value: object) -> int | None:
    """Epoch-millis strings as written in extraMetadata / hoodie.properties; junk gives None."""
    if value is None or value == "":
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _bool(value: str | None) -> bool | None:
    return None if value is None else str(value).strip().lower() == "true"


def carried_over_entries(record: CompactionRecord) -> list[dict[str, Any]] | None:
    """The commit's tidemark.carryOver list ({partitionPath, fileId, symlink, target, mode}); None if absent."""
    raw = record.commit_extra.get(CARRY_OVER)
    if not raw:
        return None
    try:
        entries = json.loads(raw)
    except ValueError:
        return None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else None


def _carry_over_mode(record: CompactionRecord) -> str | None:
    planned = record.plan_extra.get(CARRY_OVER)
    if planned in ("symlink", "copy"):
        return planned
    modes = {e.get("mode") for e in carried_over_entries(record) or [] if e.get("mode")}
    return modes.pop() if len(modes) == 1 else ("mixed" if modes else None)


def _write_stats(record: CompactionRecord) -> list[dict[str, Any]]:
    per_partition = (record.commit or {}).get("partitionToWriteStats") or {}
    return [s for stats in per_partition.values() for s in stats or []]


def _operations(record: CompactionRecord) -> list[dict[str, Any]]:
    return list((record.plan or {}).get("operations") or [])


# ------------------------------------------------------------------------------------------ summaries

def _counts(record: CompactionRecord) -> dict[str, int | None]:
    """file_groups / logs_compacted / logs_carried: from the commit when completed, else from the plan."""
    ops, stats, carried = _operations(record), _write_stats(record), carried_over_entries(record)
    plan_known = record.plan is not None
    if record.commit is not None and stats:
        groups: int | None = len({(s.get("partitionPath"), s.get("fileId")) for s in stats})
        compacted: int | None = sum(int(s.get("totalLogFilesCompacted") or 0) for s in stats)
    else:
        groups = len(ops) if plan_known else None
        compacted = sum(len(op.get("deltaFilePaths") or []) for op in ops) if plan_known else None
    if carried is not None:
        logs_carried: int | None = len(carried)
    else:
        logs_carried = sum(len(op.get("symlinkOperations") or []) for op in ops) if plan_known else None
    return {"file_groups": groups, "logs_compacted": compacted, "logs_carried": logs_carried}


def _summary(record: CompactionRecord) -> dict[str, Any]:
    completed = record.commit is not None
    stats = _write_stats(record)
    return {
        "instant": record.timestamp,
        "scheduled_at": iso(instant_to_millis(record.timestamp)),
        "state": record.state,
        "threshold": iso(_millis(record.setting(THRESHOLD))),
        "strategy": record.setting(STRATEGY),
        "carry_over": _carry_over_mode(record),
        "exact": _bool(record.setting(EXACT)),
        **_counts(record),
        "records_written": sum(int(s.get("numWrites") or 0) for s in stats) if completed else None,
        "ro_completion_time": iso(_millis(record.commit_extra.get(RO_COMPLETION))) if completed else None,
        "ro_freshness_time": iso(_millis(record.commit_extra.get(RO_FRESHNESS))) if completed else None,
    }


def list_compactions(base_path: str) -> list[dict[str, Any]]:
    """Every compaction on the active timeline (requested | inflight | completed), oldest first."""
    return [_summary(r) for r in compaction_records(Timeline.load(base_path))]


# ------------------------------------------------------------------------------------------ detail

def _carried_by_group(record: CompactionRecord) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in carried_over_entries(record) or []:
        key = (e.get("partitionPath") or "", e.get("fileId") or "")
        out.setdefault(key, []).append({"symlink": e.get("symlink"), "target": e.get("target"), "mode": e.get("mode")})
    return out


def _stats_by_group(record: CompactionRecord) -> dict[tuple[str, str], dict[str, Any]]:
    return {(s.get("partitionPath") or "", s.get("fileId") or ""): s for s in _write_stats(record)}


def _operation_detail(op: dict[str, Any], stat: dict[str, Any] | None,
                      carried: list[dict[str, Any]] | None, default_mode: str | None) -> dict[str, Any]:
    planned = [{"symlink": s.get("symlink"), "target": s.get("target"), "mode": default_mode}
               for s in op.get("symlinkOperations") or []]
    return {
        "partition": op.get("partitionPath") or "",
        "file_id": op.get("fileId"),
        "base_instant": op.get("baseInstantTime"),
        "base_file": op.get("dataFilePath"),
        "compacted_logs": list(op.get("deltaFilePaths") or []),
        # What the commit says was carried wins over what the plan asked for.
        "carried_logs": carried if carried is not None else planned,
        **_stat_detail(stat),
    }


def _stat_detail(stat: dict[str, Any] | None) -> dict[str, Any]:
    if stat is None:
        return {"new_base_file": None, "records_written": None, "log_records_merged": None}
    return {"new_base_file": os.path.basename(stat.get("path") or "") or None,
            "records_written": int(stat.get("numWrites") or 0),
            "log_records_merged": int(stat.get("totalLogRecords") or 0)}


def _operations_detail(record: CompactionRecord) -> list[dict[str, Any]]:
    stats, carried, mode = _stats_by_group(record), _carried_by_group(record), _carry_over_mode(record)
    has_carry_list = carried_over_entries(record) is not None
    ops = _operations(record)
    if not ops:  # plan-less completed compaction: rebuild what we can from the write stats
        ops = [{"partitionPath": p, "fileId": f} for (p, f) in stats]
    return [_operation_detail(op, stats.get(_key(op)),
                              carried.get(_key(op), []) if has_carry_list else None, mode) for op in ops]


def _key(op: dict[str, Any]) -> tuple[str, str]:
    return (op.get("partitionPath") or "", op.get("fileId") or "")


def _event_time_sources(record: CompactionRecord) -> Any:
    raw = record.plan_extra.get(EVENT_TIME_SOURCES)
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # keep what the plan says rather than drop it


def describe_compaction(base_path: str, instant: str) -> dict[str, Any]:
    """One compaction with per-operation detail; TidemarkError if `instant` is not a compaction."""
    if not is_instant(instant):
        raise TidemarkError(f"{instant!r} is not an instant time (expected 17 digits, e.g. 20260101120000000)")
    records = compaction_records(Timeline.load(base_path))
    match = [r for r in records if r.timestamp == instant]
    if not match:
        known = ", ".join(r.timestamp for r in records) or "none"
        raise TidemarkError(f"{instant} is not a compaction on the active timeline of {base_path} "
                            f"(compactions: {known})")
    record = match[0]
    return {**_summary(record), "event_time_sources": _event_time_sources(record),
            "operations": _operations_detail(record)}
