"""A living table's housekeeping and ingestion, as `tidemark show` and the control plane show them.

Read from hoodie.properties and ONE load of the active timeline; no data file is read. What it costs beyond the
listing: the latest completed clean's metadata, the newest commits' metadata until one is a write (a compaction
or clustering commit is a table service, not a write), a listing of `.hoodie/archived/` (v6) or the LSM
history's version file (v8/v9), and, on layout 1, one stat of each of the two completed files whose completion
time is asked: layout 1 names no completion time, and Hudi 1.x takes a layout-1 instant's completion time from
its file's modification time too.

The settings are Hudi's keys (`hoodie.clean.*`, `hoodie.cleaner.*`, `hoodie.archive.automatic`, `hoodie.keep.*`):
a key the table does not set shows Hudi's default, with `source` "default".
"""
from __future__ import annotations

import datetime as dt

from engine.config.properties import HOODIE_DIR, WRITE_SETTINGS, TableConfig, load_table_config
from engine.config.resolve import DEFAULT, TABLE
from engine.io import storage
from engine.results import Housekeeping, Ingestion, SettingInfo, StreamProgress, TableActivity, from_ms
from engine.timeline.instants import CLEAN, COMMIT_ACTIONS, Instant, Timeline, TimelineError
from engine.timeline.metadata import (
    SERVICE_OPERATIONS,
    CommitMetadata,
)
from engine.timeline.stream_checkpoint import BATCH_ID_KEY, QUERY_ID_KEY, SINK_CHECKPOINT_KEY, sink_batches, watermark_of

CLEAN_AUTOMATIC = "hoodie.clean.automatic"
CLEAN_ASYNC = "hoodie.clean.async"
CLEANER_POLICY = "hoodie.cleaner.policy"
ARCHIVE_AUTOMATIC = "hoodie.archive.automatic"
KEEP_MIN_COMMITS = "hoodie.keep.min.commits"
KEEP_MAX_COMMITS = "hoodie.keep.max.commits"
# The retention each policy counts, and in what.
RETAINED_BY_POLICY: dict[str, tuple[str, str]] = {
    "KEEP_LATEST_COMMITS": ("hoodie.cleaner.commits.retained", "commits"),
    "KEEP_LATEST_FILE_VERSIONS": ("hoodie.cleaner.fileversions.retained", "file versions"),
    "KEEP_LATEST_BY_HOURS": ("hoodie.cleaner.hours.retained", "hours"),
}
SHOWN_SETTINGS = (CLEAN_AUTOMATIC, CLEAN_ASYNC, CLEANER_POLICY, *(key for key, _ in RETAINED_BY_POLICY.values()),
                  ARCHIVE_AUTOMATIC, KEEP_MIN_COMMITS, KEEP_MAX_COMMITS)
ARCHIVE_FOLDER_KEY = "hoodie.archivelog.folder"
_ARCHIVE_FILE_PREFIX = ".commits_.archive"   # Java's archive log files: .commits_.archive.<n>_<token>


def table_activity(base_path: str, *, timeline: Timeline | None = None, cfg: TableConfig | None = None,
                   now: dt.datetime | None = None) -> TableActivity:
    """Housekeeping and ingestion of the table at `base_path`; a caller that loaded the timeline and the table's
    configuration already passes them (`tidemark show` does), so the timeline is listed once. `now` is the time
    the lag is measured to (default: the clock)."""
    cfg = cfg or load_table_config(base_path)
    timeline = timeline or Timeline.load(base_path)
    now = now or dt.datetime.now(dt.UTC)
    return TableActivity(housekeeping=housekeeping(timeline, cfg), ingestion=ingestion(timeline, now))


def housekeeping(timeline: Timeline, cfg: TableConfig) -> Housekeeping:
    settings = {key: _setting(cfg, key) for key in SHOWN_SETTINGS}
    policy = settings[CLEANER_POLICY].value
    retained_key, unit = RETAINED_BY_POLICY.get(policy, (None, ""))
    out = Housekeeping(
        clean_policy=policy, clean_retained=_int(settings[retained_key].value) if retained_key else None,
        clean_retained_unit=unit, clean_retained_key=retained_key, clean_automatic=_true(settings[CLEAN_AUTOMATIC].value),
        clean_async=_true(settings[CLEAN_ASYNC].value), archive_automatic=_true(settings[ARCHIVE_AUTOMATIC].value),
        archive_min_commits=_int(settings[KEEP_MIN_COMMITS].value),
        archive_max_commits=_int(settings[KEEP_MAX_COMMITS].value),
        active_instants=len(timeline.instants), active_instant_files=timeline.instant_files,
        archived=_archived(timeline, cfg), settings=list(settings.values()))
    clean = timeline.last_completed(frozenset({CLEAN}))
    if clean is not None:
        out.last_clean, out.last_clean_at = clean.timestamp, _completed_at(timeline, clean)
        try:
            out.last_clean_files_deleted = timeline.clean_record(clean.timestamp).files_deleted
        except TimelineError:   # unreadable metadata: the clean still happened; the count stays unknown
            out.last_clean_files_deleted = None
    return out


def ingestion(timeline: Timeline, now: dt.datetime) -> Ingestion:
    out = Ingestion(checked_at=now)
    found = _last_write(timeline)
    if found is None:
        return out
    inst, commit = found
    done = _completed_at(timeline, inst)
    out.last_write, out.last_write_action, out.last_write_operation = inst.timestamp, inst.action, commit.operation_type
    out.last_write_at = done
    out.lag_seconds = max(0.0, (now - done).total_seconds()) if done is not None else None
    out.stream = stream_progress(commit)
    return out


def stream_progress(commit: CommitMetadata) -> StreamProgress | None:
    """The stream facts a streaming writer recorded with `commit`; None when it did not come from a stream."""
    extra = commit.extra
    batches = sink_batches(extra)
    query_id, batch = extra.get(QUERY_ID_KEY) or None, _int(extra.get(BATCH_ID_KEY))
    if len(batches) == 1 and (query_id is None or batch is None):   # a Hudi sink alone: its checkpoint names both
        (writer, value), = batches.items()
        query_id, batch = query_id or writer, batch if batch is not None else value
    watermark = watermark_of(extra)
    if query_id is None and batch is None and watermark is None and not extra.get(SINK_CHECKPOINT_KEY):
        return None
    return StreamProgress(query_id=query_id, batch_id=batch, watermark=from_ms(watermark),
                          checkpoint=extra.get(SINK_CHECKPOINT_KEY) or None)


def _last_write(timeline: Timeline) -> tuple[Instant, CommitMetadata] | None:
    """The latest completed write (by completion time where the layout names it) with its commit metadata:
    newest commits are read until one is not a table service's."""
    done = [i for i in timeline.completed() if i.action in COMMIT_ACTIONS]
    if timeline.uses_completion_time:
        done.sort(key=lambda i: (i.completion_time or i.timestamp, i.timestamp))
    for inst in reversed(done):
        try:
            commit = timeline.commit_metadata(inst)
        except TimelineError:
            continue   # unreadable: not shown as the last write; describe/show report the timeline's damage
        if not commit.compacted and (commit.operation_type or "").lower() not in SERVICE_OPERATIONS:
            return inst, commit
    return None


def _completed_at(timeline: Timeline, inst: Instant) -> dt.datetime | None:
    return from_ms(timeline.completed_at_ms(inst))


def _archived(timeline: Timeline, cfg: TableConfig) -> bool:
    """Whether instants left the active timeline: the LSM history has a snapshot (layout 2), or Java's archiver
    wrote `.commits_.archive.*` files into `.hoodie/<hoodie.archivelog.folder>` (layout 1)."""
    if timeline.uses_completion_time:
        return timeline.has_history()
    folder = storage.join(cfg.base_path, HOODIE_DIR, cfg.props.get(ARCHIVE_FOLDER_KEY) or "archived")
    return any(n.startswith(_ARCHIVE_FILE_PREFIX) for n in storage.list_names_if_dir(folder))


def _setting(cfg: TableConfig, key: str) -> SettingInfo:
    """The table's value of `key` as written (a malformed one shown as it is: describing never fails on it), or
    Hudi's default."""
    stored = cfg.props.get(key)
    if stored:
        return SettingInfo(key=key, value=stored, source=TABLE)
    return SettingInfo(key=key, value=WRITE_SETTINGS[key][1], source=DEFAULT)


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _true(value: str) -> bool:
    return value.strip().lower() == "true"

