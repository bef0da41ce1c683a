"""The active timeline of a Hudi table: version 6 (timeline layout 1, files directly in `.hoodie/`) or
version 8 (layout 2, `.hoodie/timeline/`, completed files `<requested>_<completion>.<action>`: the names are
in `engine.timeline.layout_v8`; everything else here is shared).

Instant files (docs/HUDI-FORMAT.md §3.1):
  deltacommit:   <ts>.deltacommit.requested (empty) -> <ts>.deltacommit.inflight -> <ts>.deltacommit (JSON)
  compaction:    <ts>.compaction.requested (Avro plan) -> <ts>.compaction.inflight (empty) -> <ts>.commit (JSON)
  commit (COW):  <ts>.commit.requested -> <ts>.inflight -> <ts>.commit
  replacecommit: <ts>.replacecommit.requested (Avro HoodieRequestedReplaceMetadata) -> .inflight (JSON)
                 -> <ts>.replacecommit (JSON, with partitionToReplaceFileIds); insert_overwrite or clustering
  clean/rollback: <ts>.<action>.requested / .inflight / <ts>.<action>, all Avro
Java keeps the requested/inflight files after completion, so one instant has up to three files; the
timeline keeps one entry per instant with its most advanced state.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engine.config.properties import HOODIE_DIR
from engine.errors import ALREADY_PUBLISHED, UNSAFE_PUBLISH, Refused, TableNotFoundError, TidemarkError, UnsupportedTableError
from engine.io import storage
from engine.io.faults import fault_point
from engine.io.naming import instant_to_millis, is_instant, new_instant_time
from engine.io.threads import requests_pool, settle
from engine.timeline import avro_models, layout_v8, metadata_table
from engine.timeline.actions import Action
from engine.timeline.actions import State as State  # re-exported: the timeline's users import it from here
from engine.timeline.committed import CommittedInstants
from engine.timeline.metadata import (
    CleanPlanRecord,
    CleanRecord,
    CommitMetadata,
    CompactionPlanRecord,
    RequestedReplaceMetadata,
    RollbackRecord,
)

_T = TypeVar("_T")


# The actions by name, as the modules that work with them import them (engine.timeline.actions has the enum).
COMMIT = Action.COMMIT
DELTACOMMIT = Action.DELTACOMMIT
COMPACTION = Action.COMPACTION
CLEAN = Action.CLEAN
ROLLBACK = Action.ROLLBACK
REPLACECOMMIT = Action.REPLACECOMMIT
CLUSTERING = Action.CLUSTERING
LOGCOMPACTION = Action.LOGCOMPACTION
INDEXING = Action.INDEXING
SAVEPOINT = Action.SAVEPOINT
RESTORE = Action.RESTORE

ACTIONS: frozenset[str] = frozenset(Action)
# Actions whose metadata is JSON HoodieCommitMetadata in layout 1.
COMMIT_ACTIONS: frozenset[str] = frozenset({COMMIT, DELTACOMMIT, REPLACECOMMIT})
# The action a pending table service completes as (HoodieTimeline: compaction -> commit, ...).
_COMPLETES_AS: dict[str, str] = {COMPACTION: COMMIT, LOGCOMPACTION: DELTACOMMIT, CLUSTERING: REPLACECOMMIT}

# <ts>.<action>[.requested|.inflight], plus the COW commit inflight spelled "<ts>.inflight".
_INSTANT_FILE_RE = re.compile(r"^(?P<ts>\d{14}|\d{17})\.(?P<rest>[a-z]+(?:\.(?:requested|inflight))?)$")


class TimelineError(TidemarkError):
    """An instant file is missing, already present, or unreadable."""


class InstantExistsError(TimelineError, Refused):
    """A timeline file we were about to create already exists (another writer got there first): the
    operation is refused (`already_published`), the other writer's instant stands."""

    def __init__(self, message: str) -> None:
        Refused.__init__(self, ALREADY_PUBLISHED, message)




def instant_file_name(ts: str, action: str, state: State) -> str:
    """Layout-1 file name of an instant in a given state."""
    if state is State.COMPLETED:
        return f"{ts}.{_COMPLETES_AS.get(action, action)}"
    if state is State.INFLIGHT and action == COMMIT:
        return f"{ts}.inflight"  # HoodieTimeline.INFLIGHT_COMMIT_EXTENSION has no action part
    return f"{ts}.{action}.{state.value}"


@dataclass(frozen=True, order=True)
class Instant:
    """One instant; a completed compaction appears as action ``commit``, like in Java. `completion_time` is
    set for completed instants of layout 2 (table version 8) only; instants are ordered by requested time."""

    timestamp: str
    action: str
    state: State
    completion_time: str | None = field(default=None, compare=False)

    @property
    def file_name(self) -> str:
        if self.completion_time is not None and self.state is State.COMPLETED:
            return layout_v8.completed_name(self.timestamp, self.completion_time,
                                            _COMPLETES_AS.get(self.action, self.action))
        return instant_file_name(self.timestamp, self.action, self.state)

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED


def parse_instant_file_name(name: str, layout: int = 1) -> Instant | None:
    """Parse an instant file name of `layout`; None for anything else (properties, temp files, dirs)."""
    if layout == layout_v8.LAYOUT_VERSION:
        done = layout_v8.parse_completed_name(name)
        if done is not None:
            return Instant(done.timestamp, Action(done.action), State.COMPLETED, done.completion_time) \
                if done.action in ACTIONS else None
    m = _INSTANT_FILE_RE.match(name)
    if m is None:
        return None
    parts = m.group("rest").split(".")
    if parts == [State.INFLIGHT]:
        return Instant(m.group("ts"), COMMIT, State.INFLIGHT)
    if parts[0] not in ACTIONS:
        return None
    action = Action(parts[0])
    state = State(parts[1]) if len(parts) == 2 else State.COMPLETED
    if state is State.COMPLETED and (action in _COMPLETES_AS or layout != 1):
        return None  # "<ts>.compaction" is never a completed file name; layout 2 names completion times
    return Instant(m.group("ts"), action, state)


def _family(action: str) -> str:
    """Group key so that <ts>.compaction.requested and <ts>.commit are the same instant."""
    return _COMPLETES_AS.get(action, action)


def _merge_latest(instants: list[Instant]) -> list[Instant]:
    """Keep one entry per (ts, action family): the most advanced state wins."""
    best: dict[tuple[str, str], Instant] = {}
    for inst in instants:
        key = (inst.timestamp, _family(inst.action))
        cur = best.get(key)
        if cur is None or inst.state > cur.state:
            best[key] = inst
    return sorted(best.values())


ARCHIVE_FOLDER_KEY = "hoodie.archivelog.folder"
DEFAULT_ARCHIVE_FOLDER = "archived"
ARCHIVE_FILE_PREFIX = ".commits_.archive."   # Java's archive logs: file id `commits`, extension `archive`
_TIMELINE_KEYS = ("hoodie.timeline.layout.version", "hoodie.timeline.path", "hoodie.timeline.history.path",
                  ARCHIVE_FOLDER_KEY)


def _timeline_properties(text: str) -> dict[str, str]:
    """The timeline keys of hoodie.properties (plain key=value: their values need no unescaping)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip() in _TIMELINE_KEYS:
            out[key.strip()] = value.strip()
    return out


# Inside one table operation (`layout_memo`) the timeline keys of a table's hoodie.properties are read once:
# they name its layout and folders, which stay fixed for the table's life (only an upgrade changes them, and
# Java too reads them once per operation, through its meta client). On an object store each read is a GET, and
# a write asked for them 7 times. Outside a scope every call reads the file. Keyed by the `.hoodie` folder.
_LAYOUT_MEMO: ContextVar[dict[str, dict[str, str]] | None] = ContextVar("tidemark_layout_memo", default=None)


@contextlib.contextmanager
def layout_memo() -> Iterator[None]:
    """Read each table's timeline keys at most once inside the block (nested blocks share the outer one)."""
    if _LAYOUT_MEMO.get() is not None:
        yield
        return
    token = _LAYOUT_MEMO.set({})
    try:
        yield
    finally:
        _LAYOUT_MEMO.reset(token)


def _timeline_keys(hoodie: str) -> dict[str, str] | None:
    """The timeline keys of `<hoodie>/hoodie.properties` (its backup on a store mid-update); None if neither exists."""
    memo = _LAYOUT_MEMO.get()
    if memo is not None and hoodie in memo:
        return memo[hoodie]
    path = storage.join(hoodie, "hoodie.properties")
    data = storage.read_shared(path)   # the operation's one read of it (engine.config.properties reads it too)
    if data is None and storage.is_remote(path):   # between the delete and the put of Hudi's backup protocol
        data = storage.read_shared(path + ".backup")
    if data is None:
        return None
    keys = _timeline_properties(data.decode("utf-8", "replace"))
    if memo is not None:
        memo[hoodie] = keys
    return keys


def _held_timeline_keys(hoodie: str) -> dict[str, str] | None:
    """`_timeline_keys` when this operation holds them already (read, or remembered), else None: nothing read."""
    memo = _LAYOUT_MEMO.get()
    if memo is not None and hoodie in memo:
        return memo[hoodie]
    return _timeline_keys(hoodie) if storage.has_shared_read(storage.join(hoodie, "hoodie.properties")) else None


def _read_layout_version(props: dict[str, str]) -> int | None:
    try:
        return int(props["hoodie.timeline.layout.version"])
    except (KeyError, ValueError):
        return None


@dataclass
class Timeline:
    """A snapshot of `.hoodie/` taken by `load`; call `load` again to see later changes."""

    base_path: str
    instants: list[Instant] = field(default_factory=list)
    layout: int = 1
    # Layout 2: the folder of the instant files and of the LSM history (layout 1: `.hoodie/`, no history).
    folder: str | None = None
    history_folder: str | None = None
    # How many instant files the listing held (requested, inflight and completed files each count): the active
    # timeline's size as Hudi's archival sees it grow.
    instant_files: int = 0
    _archived_completions: dict[str, str] | None = field(default=None, repr=False)
    _history_files: list[str] = field(default_factory=list, repr=False)
    _history_read: set[str] = field(default_factory=set, repr=False)
    _active_completions: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, base_path: str) -> Timeline:
        hoodie = storage.join(base_path, HOODIE_DIR)
        props = storage.join(hoodie, "hoodie.properties")
        held = _held_timeline_keys(hoodie)
        if held is not None and _read_layout_version(held) == layout_v8.LAYOUT_VERSION:
            # The operation's read of the properties proves the table exists, and a layout-2 timeline lives in a
            # folder of its own: listing .hoodie/ would tell nothing more (one LIST less on a store).
            return cls._load_layout_2(base_path, hoodie, held)
        # One listing of .hoodie/ tells both whether the table exists and its instants (one LIST on S3).
        names = storage.list_names_validated(hoodie)
        if "hoodie.properties" not in names and not (storage.is_remote(hoodie)
                                                     and "hoodie.properties.backup" in names):
            raise TableNotFoundError(f"no Hudi table at {base_path}: {props} does not exist")
        keys = _timeline_keys(hoodie) or {}
        layout = _read_layout_version(keys)
        if layout == layout_v8.LAYOUT_VERSION:
            return cls._load_layout_2(base_path, hoodie, keys)
        if layout is not None and layout != 1:
            raise UnsupportedTableError(
                f"{props}: hoodie.timeline.layout.version={layout}; only layouts 1 (table version 6) and 2 "
                "(table version 8) are supported"
            )
        found = [inst for inst in map(parse_instant_file_name, names) if inst is not None]
        return cls(base_path, _merge_latest(found), instant_files=len(found))

    @classmethod
    def _load_layout_2(cls, base_path: str, hoodie: str, keys: dict[str, str]) -> Timeline:
        folder = layout_v8.timeline_dir(hoodie, keys)
        layout = layout_v8.LAYOUT_VERSION
        found = [inst for inst in (parse_instant_file_name(n, layout) for n in storage.list_names_validated(folder))
                 if inst is not None]
        return cls(base_path, _merge_latest(found), layout, folder, layout_v8.history_dir(folder, keys),
                   instant_files=len(found))

    # -- queries -------------------------------------------------------------------------------

    @property
    def hoodie_path(self) -> str:
        return storage.join(self.base_path, HOODIE_DIR)

    @property
    def timeline_path(self) -> str:
        """The folder holding the instant files: `.hoodie/` (layout 1) or `.hoodie/timeline/` (layout 2)."""
        return self.folder or self.hoodie_path

    @property
    def uses_completion_time(self) -> bool:
        """Layout 2 (table version 8): logs join slices, and incremental ranges select, by completion time."""
        return self.layout == layout_v8.LAYOUT_VERSION

    def completion_time(self, ts: str) -> str | None:
        """When instant `ts` completed (layout 2: active timeline, then LSM history); None when it is pending,
        unknown, or the layout records no completion times (1)."""
        if not self.uses_completion_time:
            return None
        if self._active_completions is None:
            self._active_completions = {i.timestamp: i.completion_time for i in self.instants
                                        if i.completion_time is not None}
        if ts in self._active_completions:
            return self._active_completions[ts]
        if any(i.timestamp == ts for i in self.instants):
            return None   # pending
        return self._archived_completion(ts)

    def _archived_completion(self, ts: str) -> str | None:
        """`ts`'s completion time from the LSM history: only the files whose instant range holds it are read, each
        at most once per Timeline, so a lookup costs the same however long the history grew."""
        if self.history_folder is None:
            return None
        if self._archived_completions is None:
            self._archived_completions = {}
            self._history_files = layout_v8.manifest_files(self.history_folder)
            self._history_read = set()
        if ts not in self._archived_completions:
            for name in layout_v8.history_files_covering(self._history_files, ts):
                if name not in self._history_read:
                    self._history_read.add(name)
                    self._archived_completions.update(
                        layout_v8.history_file_completion_times(storage.join(self.history_folder, name)))
        return self._archived_completions.get(ts)

    def completed_at_ms(self, inst: Instant) -> int | None:
        """When completed instant `inst` completed, epoch millis: layout 2 names it; layout 1 has its completed
        file's modification time, as Hudi takes it. None when that file is gone since the listing."""
        if inst.completion_time is not None and is_instant(inst.completion_time):
            return instant_to_millis(inst.completion_time)
        try:
            return storage.mtime_ms(self.instant_path(inst))
        except (FileNotFoundError, OSError):
            return None

    def committed_writes(self) -> CommittedInstants:
        """Completed commits/deltacommits/replacecommits, and — once instants were archived — every instant before
        the first of them still on the active timeline (engine.timeline.committed)."""
        # hudi-rs's boundary: commit, deltacommit and replacecommit instants in any state (not pending compactions).
        start = min((i.timestamp for i in self.instants if i.action in COMMIT_ACTIONS), default=None)
        return CommittedInstants((i.timestamp for i in self.completed() if i.action in COMMIT_ACTIONS), start,
                                 self.has_archive)

    def has_archive(self) -> bool:
        """Whether instants left the active timeline: layout 2's LSM history has a snapshot, or (layout 1) the
        archive folder holds an archive log (`.commits_.archive.*`)."""
        if self.uses_completion_time:
            return self.has_history()
        return any(n.startswith(ARCHIVE_FILE_PREFIX) for n in storage.list_names_if_dir(self.archive_folder))

    @property
    def archive_folder(self) -> str:
        """Layout 1's archive folder, `.hoodie/<hoodie.archivelog.folder>` (default `archived`)."""
        keys = _timeline_keys(self.hoodie_path) or {}
        return storage.join(self.hoodie_path, keys.get(ARCHIVE_FOLDER_KEY) or DEFAULT_ARCHIVE_FOLDER)

    def has_history(self) -> bool:
        """Layout 2: whether instants were archived into the LSM history."""
        return self.history_folder is not None and layout_v8.has_history(self.history_folder)

    def path_of(self, ts: str, action: str, state: State) -> str:
        """The file of instant `ts` in `state` (a completed layout-2 file is named by its completion time too)."""
        if state is State.COMPLETED and self.uses_completion_time:
            done = self.completion_time(ts)
            if done is not None:
                return storage.join(self.timeline_path,
                                    layout_v8.completed_name(ts, done, _COMPLETES_AS.get(action, action)))
        return storage.join(self.timeline_path, instant_file_name(ts, action, state))

    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.state is State.COMPLETED]

    def pending(self) -> list[Instant]:
        return [i for i in self.instants if i.state is not State.COMPLETED]

    def completed_timestamps(self) -> set[str]:
        return {i.timestamp for i in self.instants if i.state is State.COMPLETED}

    def is_completed(self, ts: str) -> bool:
        return any(i.timestamp == ts and i.state is State.COMPLETED for i in self.instants)

    def last_completed(self, actions: frozenset[str] | None = None) -> Instant | None:
        done = [i for i in self.completed() if actions is None or i.action in actions]
        return done[-1] if done else None

    def get(self, ts: str) -> list[Instant]:
        """All instants with this timestamp (normally one)."""
        return [i for i in self.instants if i.timestamp == ts]

    def pending_compactions(self) -> list[Instant]:
        return [i for i in self.pending() if i.action == COMPACTION]

    def pending_clustering(self) -> list[Instant]:
        """Pending clusterings: layout 2's `clustering` action, or (layout 1) pending replacecommits whose requested
        metadata says operationType=cluster."""
        return [i for i in self.pending() if i.action == CLUSTERING
                or (i.action == REPLACECOMMIT and self._is_clustering(i.timestamp))]

    def pending_overwrites(self) -> list[Instant]:
        """Pending replacecommits that are writes (insert_overwrite[_table]), not clustering."""
        return [i for i in self.pending() if i.action == REPLACECOMMIT and not self._is_clustering(i.timestamp)]

    def _is_clustering(self, ts: str) -> bool:
        return self.requested_replace(ts).is_clustering

    def requested_replace(self, ts: str) -> RequestedReplaceMetadata:
        """The requested metadata of replacecommit (or, layout 2, clustering) `ts` (empty when the file is missing
        or empty)."""
        path = self.path_of(ts, REPLACECOMMIT, State.REQUESTED)
        data = _read_optional(path)
        if data is None and self.uses_completion_time:
            path = self.path_of(ts, CLUSTERING, State.REQUESTED)
            data = _read_optional(path)
        try:
            return RequestedReplaceMetadata.from_bytes(data or b"")
        except avro_models.AvroInstantError as exc:
            raise TimelineError(f"{path}: unreadable requested replace metadata: {exc}") from exc

    def replaced_file_groups(self) -> dict[tuple[str, str], str]:
        """(partition, fileId) -> the completed replacecommit that replaced it (the earliest, if several).

        Java's and hudi-rs's file-system views drop these groups from every query; a pending replacecommit
        (clustering, or an overwrite still being written) replaces nothing yet."""
        out: dict[tuple[str, str], str] = {}
        for inst in self.completed():
            if inst.action == REPLACECOMMIT:
                for key in self.commit_metadata(inst).replaced_file_groups:
                    out.setdefault(key, inst.timestamp)
        return out

    # -- content ---------------------------------------------------------------------------------

    def instant_path(self, instant: Instant) -> str:
        return storage.join(self.timeline_path, instant.file_name)

    def read_commit_metadata(self, instant: Instant) -> dict[str, Any]:
        """The JSON HoodieCommitMetadata of a completed or inflight commit/deltacommit/replacecommit.

        A completed compaction reads from `<ts>.commit`. An empty file (e.g. a fresh inflight) gives {}.
        """
        if _family(instant.action) not in COMMIT_ACTIONS or instant.state is State.REQUESTED:
            raise TimelineError(f"{instant.file_name}: no JSON commit metadata for {instant.state.value} {instant.action}")
        path = self.instant_path(instant)
        # A completed instant's file never changes once it exists: read once by the process (this timeline's
        # listing found it: a deleted one is not asked for). An inflight one may be rewritten: always read.
        data = _read_required(path, immutable=instant.state is State.COMPLETED)
        if not data.strip():
            return {}
        if data.startswith(b"Obj\x01"):   # layout 2: HoodieCommitMetadata as Avro (same field names as the JSON)
            try:
                return avro_models.read_avro_instant(data)
            except avro_models.AvroInstantError as exc:
                raise TimelineError(f"{path}: invalid commit metadata: {exc}") from exc
        try:
            doc: dict[str, Any] = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise TimelineError(f"{path}: invalid commit metadata JSON: {exc}") from exc
        return doc

    def read_ahead(self, instants: Iterable[Instant]) -> None:
        """Fetch the metadata files of completed `instants` together (on a store, in parallel) for the
        operation's reads of them that follow (`storage.read_shared_all`); nothing is read ahead locally."""
        storage.read_shared_all([self.instant_path(i) for i in instants if i.state is State.COMPLETED],
                                immutable=True)

    def read_compaction_plan(self, ts: str) -> dict[str, Any]:
        """The HoodieCompactionPlan of compaction `ts` (Hudi < 0.14 may keep it in `.aux/` only)."""
        name = instant_file_name(ts, COMPACTION, State.REQUESTED)
        path = storage.join(self.timeline_path, name)
        # Read as a completed instant is (`storage.read_immutable`): once per operation (a run asks for its plan
        # at the start and again at the commit), and on S3 not at all when this process scheduled it or read it
        # before and the timeline's listing shows that same object (a rewritten plan is another object: its
        # ETag differs; one this process rewrites, unschedule's, is updated by the storage layer).
        data = storage.read_immutable(path)
        if data is None:
            data = _read_optional(storage.join(self.hoodie_path, ".aux", name))
        if data is None:
            raise TimelineError(f"{path}: compaction plan for instant {ts} not found")
        try:
            return avro_models.read_compaction_plan(data)
        except avro_models.AvroInstantError as exc:
            raise TimelineError(f"{path}: {exc}") from exc

    def compaction_plan(self, ts: str) -> CompactionPlanRecord:
        """The typed plan of compaction `ts` (see `read_compaction_plan`)."""
        return CompactionPlanRecord.from_avro(self.read_compaction_plan(ts))

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """The typed commit metadata of a completed or inflight commit (see `read_commit_metadata`)."""
        return CommitMetadata.from_json(self.read_commit_metadata(instant))

    def rollback_record(self, ts: str) -> RollbackRecord:
        """What completed rollback `ts` undid."""
        return self._decoded(ts, ROLLBACK, State.COMPLETED, RollbackRecord.from_bytes)

    def clean_plan(self, ts: str) -> CleanPlanRecord:
        """The plan of clean `ts` (its requested file, which Java and Tidemark keep after completion)."""
        return self._decoded(ts, CLEAN, State.REQUESTED, CleanPlanRecord.from_bytes)

    def clean_record(self, ts: str) -> CleanRecord:
        """What completed clean `ts` did (its HoodieCleanMetadata)."""
        return self._decoded(ts, CLEAN, State.COMPLETED, CleanRecord.from_bytes)

    def _decoded(self, ts: str, action: str, state: State, decode: Callable[[bytes], _T]) -> _T:
        """One Avro instant file, decoded; a file that does not decode is named in the TimelineError."""
        path = self.path_of(ts, action, state)
        try:
            return decode(_read_required(path))
        except avro_models.AvroInstantError as exc:
            raise TimelineError(f"{path}: {exc}") from exc

    def latest_schema(self) -> str | None:
        """extraMetadata.schema of the latest completed commit/deltacommit/replacecommit carrying one."""
        for inst in reversed(self.completed()):
            if inst.action not in COMMIT_ACTIONS:
                continue
            schema = self.commit_metadata(inst).schema
            if schema:
                return schema
        return None


def _read_optional(path: str) -> bytes | None:
    return storage.read_optional(path)


def _read_required(path: str, immutable: bool = False) -> bytes:
    data = storage.read_immutable(path) if immutable else _read_optional(path)
    if data is None:
        raise TimelineError(f"{path}: instant file does not exist")
    return data


# ---------------------------------------------------------------------------------------------
# Writing the timeline


@dataclass(frozen=True)
class _Folder:
    """Where a table's instant files are written, and in which layout."""

    path: str
    layout: int

    def file(self, ts: str, action: str, state: State) -> str | None:
        """The existing file of instant `ts` in `state`, or None. A completed layout-2 file also names its
        completion time, which only a listing finds. The operation's own listing of the folder answers when it has
        one (`storage.listed_names`): no request."""
        listed = storage.listed_names(self.path)
        if state is State.COMPLETED and self.layout == layout_v8.LAYOUT_VERSION:
            for name in listed if listed is not None else storage.list_names_if_dir(self.path):
                done = layout_v8.parse_completed_name(name)
                if done is not None and done.timestamp == ts and done.action == _COMPLETES_AS.get(action, action):
                    return storage.join(self.path, name)
            return None
        path = storage.join(self.path, instant_file_name(ts, action, state))
        if listed is not None:
            return path if instant_file_name(ts, action, state) in listed else None
        return path if storage.file_exists(path) else None

    def named(self, ts: str, action: str, state: State) -> str:
        """The path a pending file of instant `ts` has (and a completed one in layout 1)."""
        return storage.join(self.path, instant_file_name(ts, action, state))


def _folder(base_path: str) -> _Folder:
    """The timeline folder of a table Tidemark changes: `.hoodie/` (layout 1) or `.hoodie/timeline/` (layout 2)."""
    hoodie = storage.join(base_path, HOODIE_DIR)
    keys = _timeline_keys(hoodie)
    if keys is None:
        raise TableNotFoundError(f"no Hudi table at {base_path}: {hoodie}/hoodie.properties does not exist")
    if _read_layout_version(keys) == layout_v8.LAYOUT_VERSION:
        return _Folder(layout_v8.timeline_dir(hoodie, keys), layout_v8.LAYOUT_VERSION)
    return _Folder(hoodie, 1)


def ask_ahead(base_path: str, instant: tuple[str, str, Sequence[State]] | None = None, listing: bool = True,
              keep: bool = False) -> None:
    """`storage.ask_ahead` of the listing `Timeline.load` makes (unless not `listing`) and, given (ts, action,
    states), of the HEADs publishing instant ts checks its files in `states` with (`create_requested`,
    `transition_to_inflight`, `complete`) — all but a layout-2 completed file, which a listing finds. The caller
    holds the locks that keep them true until used (`storage.ask_ahead`)."""
    if not storage.is_remote(base_path):
        return
    folder = _folder(base_path)
    # the listing asked now, or the one this operation has, answers the publish's checks (`_Folder.file`): no HEADs
    heads = [] if instant is None or listing or storage.listed_names(folder.path) is not None else [
        folder.named(instant[0], instant[1], state) for state in instant[2]
        if not (state is State.COMPLETED and folder.layout == layout_v8.LAYOUT_VERSION)]
    # a layout-2 table's .hoodie/ is not listed: the properties `_folder` read prove the table (`Timeline.load`)
    children = ([folder.path] if folder.layout == layout_v8.LAYOUT_VERSION
                else [storage.join(base_path, HOODIE_DIR)]) if listing else []
    storage.ask_ahead(children=children, heads=heads, keep=keep)


def completed_file(base_path: str, ts: str, action: str) -> str | None:
    """The completed file of instant `ts` (either layout), or None when it has not completed."""
    return _folder(base_path).file(ts, action, State.COMPLETED)


def pending_file(base_path: str, ts: str, action: str, state: State) -> str:
    """Where the requested or inflight file of instant `ts` lives (either layout), present or not."""
    return _folder(base_path).named(ts, action, state)


def _layout_content(folder: _Folder, action: str, content: bytes) -> bytes:
    """Layout 2 keeps commit metadata as Avro, where layout 1 keeps JSON: the one conversion, for every writer."""
    if folder.layout != layout_v8.LAYOUT_VERSION or _family(action) not in COMMIT_ACTIONS \
            or not content.strip() or content.startswith(b"Obj\x01"):
        return content
    try:
        doc = json.loads(content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TimelineError(f"{action} metadata is neither JSON nor Avro: {exc}") from None
    return avro_models.commit_metadata_avro(doc)


def _atomic_create(path: str, content: bytes, fault_step: str | None = None) -> None:
    """Create `path` with `content` all at once; fail if it already exists.

    Readers list `.hoodie/` concurrently, so a half-written instant file must never be visible, and of two
    writers publishing the same instant exactly one may win. Local: a dot-temp file (ignored by Java and
    hudi-rs) hard-linked into place, which refuses to overwrite a file another writer created. Object
    stores: one conditional PUT (`If-None-Match: *`), the store refusing the loser; a store without
    conditional writes is refused unless a lock outside the store serialises publishers (`engine.lock`).
    """
    if storage.is_remote(path):
        if not storage.conditional_put(path):
            from engine.lock import holds_lock_outside_store

            if not holds_lock_outside_store():
                raise Refused(UNSAFE_PUBLISH, f"{path}: this store has no conditional put (If-None-Match), so a "
                              "completed instant could be published twice; pass a lock outside the store "
                              "(the control plane's database lease, lock=)")
        if fault_step is not None:
            fault_point("commit", fault_step)
        try:
            # kept for this process's next operations when they read it back: completed instants, plans
            storage.create_exclusive(path, content, keep=path.endswith(".compaction.requested")
                                     or not path.endswith((".requested", ".inflight")))
        except storage.PublishConflict:
            raise InstantExistsError(f"{path}: instant file already exists (another writer published it first)") \
                from None
        return
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".temp-{uuid.uuid4().hex}")
    with open(tmp, "wb") as fh:
        fh.write(content)
        fh.flush()
        os.fsync(fh.fileno())
    if fault_step is not None:
        fault_point("commit", fault_step)
    try:
        storage.link_no_clobber(tmp, path)
    except storage.PublishConflict:
        raise InstantExistsError(f"{path}: instant file already exists") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _require(folder: _Folder, ts: str, action: str, state: State) -> None:
    _judge_required(folder, ts, action, state, folder.file(ts, action, state))


def _judge_required(folder: _Folder, ts: str, action: str, state: State, found: str | None) -> None:
    if found is None:
        raise TimelineError(f"{folder.named(ts, action, state)}: expected {state.value} {action} instant {ts} is missing")


def _refuse_if_completed(folder: _Folder, ts: str, action: str) -> None:
    _judge_completed(ts, action, folder.file(ts, action, State.COMPLETED))


def _judge_completed(ts: str, action: str, found: str | None) -> None:
    if found is not None:
        raise TimelineError(f"{found}: {action} instant {ts} is already completed")


def _files(folder: _Folder, ts: str, action: str, states: tuple[State, ...]) -> list[str | None]:
    """`_Folder.file` of each state; on an object store asked at once (one round trip for the HEADs, not one
    per state: publishing an instant checks two of its states first)."""
    if not storage.is_remote(folder.path):
        return [folder.file(ts, action, state) for state in states]
    pool = requests_pool()
    # in this operation's context: a HEAD it asked ahead (`ask_ahead`) answers instead of a request
    asked = [pool.submit(contextvars.copy_context().run, folder.file, ts, action, state) for state in states]
    try:
        return [f.result() for f in asked]
    finally:
        settle(asked)


def create_requested(base_path: str, instant_ts: str, action: str, content: bytes = b"") -> str:
    """Write `<ts>.<action>.requested`; fails if any file of this instant exists. Returns the path."""
    _check_action(action)
    folder = _folder(base_path)
    if folder.layout == layout_v8.LAYOUT_VERSION:
        metadata_table.disable(base_path)
    for other in _files(folder, instant_ts, action, (State.INFLIGHT, State.COMPLETED)):
        if other is not None:
            raise InstantExistsError(f"{other}: instant {instant_ts} already exists")
    path = folder.named(instant_ts, action, State.REQUESTED)
    _atomic_create(path, content)
    return path


def transition_to_inflight(base_path: str, ts: str, action: str, content: bytes = b"") -> str:
    """requested -> inflight (the requested file stays, as Java leaves it)."""
    _check_action(action)
    folder = _folder(base_path)
    requested, completed = _files(folder, ts, action, (State.REQUESTED, State.COMPLETED))
    _judge_required(folder, ts, action, State.REQUESTED, requested)
    _judge_completed(ts, action, completed)
    path = folder.named(ts, action, State.INFLIGHT)
    _atomic_create(path, _layout_content(folder, action, content))
    return path


def complete(base_path: str, ts: str, action: str, content: bytes) -> str:
    """inflight -> completed; for ``compaction`` this writes `<ts>.commit` (layout 2: `<ts>_<completion>.commit`,
    the completion time taken now, after the requested time; commit metadata as Avro)."""
    _check_action(action)
    folder = _folder(base_path)
    _require(folder, ts, action, State.INFLIGHT)
    if folder.layout == layout_v8.LAYOUT_VERSION:
        _refuse_if_completed(folder, ts, action)   # the name is new each time: no create-if-absent clash
        name = layout_v8.completed_name(ts, new_instant_time(after=ts), _COMPLETES_AS.get(action, action))
        path = storage.join(folder.path, name)
    else:
        path = folder.named(ts, action, State.COMPLETED)
    _atomic_create(path, _layout_content(folder, action, content), fault_step="temp_written")
    return path


def revert_compaction_inflight(base_path: str, ts: str) -> None:
    """Undo `transition_to_inflight` of a compaction, keeping its plan (docs/HUDI-FORMAT.md §6.2)."""
    folder = _folder(base_path)
    _refuse_if_completed(folder, ts, COMPACTION)
    _require(folder, ts, COMPACTION, State.REQUESTED)
    inflight = folder.named(ts, COMPACTION, State.INFLIGHT)
    if not storage.exists(inflight):
        raise TimelineError(f"{inflight}: compaction {ts} is not inflight")
    storage.remove(inflight)


def delete_instant_files(base_path: str, ts: str, action: str) -> list[str]:
    """Delete the pending (inflight, then requested) files of an instant; refuses completed instants.

    Inflight goes first so a crash in between leaves a plain requested instant, never an orphan inflight.
    """
    _check_action(action)
    folder = _folder(base_path)
    _refuse_if_completed(folder, ts, action)
    removed = []
    for state in (State.INFLIGHT, State.REQUESTED):
        path = folder.named(ts, action, state)
        if storage.exists(path):
            storage.remove(path)
            removed.append(path)
    return removed


def _check_action(action: str) -> None:
    if action not in ACTIONS:
        raise TimelineError(f"unknown timeline action {action!r}")


# ---------------------------------------------------------------------------------------------
# v6 JSON commit metadata (key order as Jackson writes it; fixture v6_trips_8i1u)


def commit_metadata_json(
    partition_to_write_stats: dict[str, list[dict[str, Any]]],
    *,
    schema: str,
    operation_type: str,
    compacted: bool = False,
    extra: dict[str, str] | None = None,
    partition_to_replace_file_ids: dict[str, list[str]] | None = None,
) -> bytes:
    """v6 JSON HoodieCommitMetadata bytes. extraMetadata.schema is always set: hudi-rs needs it."""
    if not schema:
        raise TimelineError("commit metadata needs the table schema (extraMetadata.schema)")
    extra_metadata = {"schema": schema, **(extra or {})}
    extra_metadata["schema"] = schema  # `extra` must not blank the schema out
    doc: dict[str, Any] = {
        "partitionToWriteStats": partition_to_write_stats,
        "compacted": compacted,
        "extraMetadata": extra_metadata,
        "operationType": operation_type,
    }
    if partition_to_replace_file_ids is not None:
        doc["partitionToReplaceFileIds"] = partition_to_replace_file_ids
    # Jackson's pretty printer style ("key" : value); parsers don't care, humans diffing do.
    return json.dumps(doc, indent=2, separators=(",", " : ")).encode("utf-8")
