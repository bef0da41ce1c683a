"""Compaction history: every compaction on the active timeline, pending or completed, as typed results.

Two records describe one compaction (docs/HUDI-FORMAT.md §3.1, §3.3), both read through engine.timeline.metadata:
- the plan ``<C>.compaction.requested`` (Avro): what was scheduled — operations, compacted and carried logs,
  the tidemark.* threshold/strategy/carry-over settings and where each setting came from;
- the completed ``<C>.commit`` (JSON): what actually happened — write stats of the new base files, and
  the tidemark.* results (carried logs with their mode, RO completion/freshness times).
A completed compaction is reported from its commit where the commit says something, from the plan otherwise
(Java keeps the plan file after completion; an archived or foreign table may not).
"""
from __future__ import annotations

from engine import results as r
from engine.errors import TidemarkError
from engine.io import storage
from engine.io.naming import instant_to_millis, is_instant
from engine.timeline.compactions import CompactionRecord, carried_over_entries, compaction_records
from engine.timeline.instants import Timeline
from engine.timeline.metadata import CarriedEntry, CompactionOperation, CompactionPlanRecord, WriteStat

# ------------------------------------------------------------------------------------------ summaries

def _stats(record: CompactionRecord) -> tuple[WriteStat, ...]:
    return record.commit.write_stats if record.commit is not None else ()


def _counts(record: CompactionRecord) -> tuple[int | None, int | None, int | None]:
    """file groups / logs compacted / logs carried: from the commit when completed, else from the plan."""
    ops = record.plan.operations if record.plan is not None else None
    stats, carried = _stats(record), carried_over_entries(record)
    if record.commit is not None and stats:
        groups: int | None = len({s.key for s in stats})
        compacted: int | None = sum(s.total_log_files_compacted for s in stats)
    else:
        groups = len(ops) if ops is not None else None
        compacted = sum(len(op.delta_files) for op in ops) if ops is not None else None
    if carried is not None:
        logs_carried: int | None = len(carried)
    else:
        logs_carried = sum(len(op.carried) for op in ops) if ops is not None else None
    return groups, compacted, logs_carried


def _summary(record: CompactionRecord) -> r.CompactionSummary:
    completed = record.commit is not None
    s = record.settings
    groups, compacted, carried = _counts(record)
    return r.CompactionSummary(
        instant=record.timestamp, scheduled_at=r.from_ms(instant_to_millis(record.timestamp)), state=record.state,
        threshold=r.from_ms(s.threshold_ms), strategy=s.strategy, carry_over=s.carry_over,
        exact=s.exact if (record.plan is not None or completed) else None,
        file_groups=groups, logs_compacted=compacted, logs_carried=carried,
        records_written=record.commit.records_written if record.commit is not None else None,
        ro_completion_time=r.from_ms(record.commit.ro_completion_ms) if record.commit is not None else None,
        ro_freshness_time=r.from_ms(record.commit.ro_freshness_ms) if record.commit is not None else None)


def list_compactions(base_path: str) -> list[r.CompactionSummary]:
    """Every compaction on the active timeline (requested | inflight | completed), oldest first."""
    return [_summary(rec) for rec in compaction_records(Timeline.load(base_path))]


# ------------------------------------------------------------------------------------------ detail

Listings = dict[str, dict[str, int] | None]


def _sizes(pdir: str, names: list[str], listings: Listings) -> int | None:
    """Bytes of the named files (links followed); None when one is gone (e.g. cleaned since). On a store one
    LIST per partition for a whole report (`listings` keeps it), not one HEAD per file nor a LIST per group."""
    if storage.is_remote(pdir) and names:
        if pdir not in listings:
            try:
                listings[pdir] = {e.name: e.size for e in storage.list_entries(pdir)}
            except FileNotFoundError:
                listings[pdir] = None
        listed = listings[pdir]
        if listed is None:
            return None
        return sum(listed[n] for n in names) if all(n in listed for n in names) else None
    total = 0
    for name in names:
        try:
            total += storage.size(storage.join(pdir, name))
        except OSError:
            return None
    return total


def file_group_operation(base_path: str, op: CompactionOperation, mode: str | None,
                         carried: list[CarriedEntry] | None = None,
                         stat: WriteStat | None = None, listings: Listings | None = None) -> r.FileGroupOperation:
    """One operation as the API reports it; `carried` (the commit's record) wins over what the plan asked.
    `listings`: partition listings shared by the operations of one report."""
    listings = {} if listings is None else listings
    pdir = storage.join(base_path, op.partition_path) if op.partition_path else base_path
    logs_carried = ([r.CarriedLog(e.symlink, e.target, e.mode) for e in carried] if carried is not None
                    else [r.CarriedLog(c.symlink, c.target, mode) for c in op.carried])
    return r.FileGroupOperation(
        partition=op.partition_path, file_id=op.file_id, base_instant=op.base_instant or None,
        base_file=op.data_file, logs_compacted=list(op.delta_files), logs_carried=logs_carried,
        bytes_compacted=_sizes(pdir, list(op.delta_files), listings),
        bytes_carried=_sizes(pdir, [c.target for c in op.carried], listings),
        new_base_file=stat.file_name if stat is not None else None,
        records_written=stat.num_writes if stat is not None else None)


def _operations(base_path: str, record: CompactionRecord) -> list[r.FileGroupOperation]:
    stats = {s.key: s for s in _stats(record)}
    carried_list = carried_over_entries(record)
    carried: dict[tuple[str, str], list[CarriedEntry]] = {}
    for e in carried_list or []:
        carried.setdefault((e.partition_path, e.file_id), []).append(e)
    ops = list(record.plan.operations) if record.plan is not None else [
        # plan-less completed compaction: rebuild what we can from the write stats
        CompactionOperation(p, f, "", None, (), ()) for (p, f) in stats]
    mode = record.settings.carry_over
    listings: Listings = {}
    return [file_group_operation(base_path, op, mode, carried.get(op.key, []) if carried_list is not None else None,
                                 stats.get(op.key), listings) for op in ops]


def settings_used(plan: CompactionPlanRecord | None) -> dict[str, r.SettingUsed]:
    """The plan's recorded settings with their sources; the threshold shown as an ISO-8601 time."""
    used = (plan.settings.settings_used if plan is not None else None) or {}
    out = {}
    for name, entry in used.items():
        value = entry.get("value")
        if name == "threshold" and isinstance(value, int):
            value = r.iso(r.from_ms(value))
        out[name] = r.SettingUsed(value=value, source=str(entry.get("source")))
    return out


def plan_result(base_path: str, plan: CompactionPlanRecord, *, instant: str | None, state: str,
                message: str = "", projected_completion_ms: int | None = None,
                listings: dict[str, dict[str, int]] | None = None) -> r.CompactionPlan:
    """A plan (scheduled or previewed) as the API reports it; the projected completion time is T unless the
    planner projected it from the logs the plan leaves. `listings`: the planner's own listing of each partition
    (object stores), for the sizes: nothing is listed again."""
    s = plan.settings
    known: Listings = dict(listings or {})
    projected = projected_completion_ms if projected_completion_ms is not None else s.threshold_ms
    return r.CompactionPlan(
        instant=instant, state=state, threshold=r.from_ms(s.threshold_ms), strategy=s.strategy,
        carry_over=s.carry_over, exact=s.exact, settings_used=settings_used(plan),
        operations=[file_group_operation(base_path, op, s.carry_over, listings=known) for op in plan.operations],
        projected_ro_completion_time=r.from_ms(projected) if plan.promises_threshold else None,
        scheduled_at=r.from_ms(instant_to_millis(instant)) if instant else None,
        event_time_sources=dict(s.event_time_sources) if s.event_time_sources is not None else None,
        message=message)


def _result(record: CompactionRecord, ops: list[r.FileGroupOperation]) -> r.CompactionResult | None:
    commit = record.commit
    if commit is None:
        return None
    carried = commit.carried
    return r.CompactionResult(
        instant=record.timestamp, threshold=r.from_ms(record.settings.threshold_ms),
        base_files=[s.path for s in commit.write_stats], records_written=commit.records_written,
        logs_carried_over=len(carried) if carried is not None else sum(len(o.logs_carried) for o in ops),
        spill_logs=[], ro_completion_time=r.from_ms(commit.ro_completion_ms),
        ro_freshness_time=r.from_ms(commit.ro_freshness_ms))


def describe_compaction(base_path: str, instant: str) -> r.CompactionPlan:
    """One compaction with per-operation detail; TidemarkError if `instant` is not a compaction."""
    if not is_instant(instant):
        raise TidemarkError(f"{instant!r} is not an instant time (expected 17 digits, e.g. 20260101120000000)")
    records = compaction_records(Timeline.load(base_path))
    match = [rec for rec in records if rec.timestamp == instant]
    if not match:
        known = ", ".join(rec.timestamp for rec in records) or "none"
        raise TidemarkError(f"{instant} is not a compaction on the active timeline of {base_path} "
                            f"(compactions: {known})")
    record = match[0]
    summary = _summary(record)
    ops = _operations(base_path, record)
    return r.CompactionPlan(
        instant=instant, state=summary.state, threshold=summary.threshold, strategy=summary.strategy,
        carry_over=summary.carry_over, exact=summary.exact, settings_used=settings_used(record.plan), operations=ops,
        projected_ro_completion_time=summary.threshold if record.is_event_time else None,
        scheduled_at=summary.scheduled_at,
        event_time_sources=(dict(record.plan.settings.event_time_sources)
                            if record.plan is not None and record.plan.settings.event_time_sources is not None
                            else None),
        result=_result(record, ops))
