"""File-system view: partitions, file groups and file slices of a v6 table as the timeline sees them.

Visibility rules (table version 6, timeline layout 1), shared with Java Hudi and hudi-rs:
- a base file counts only when its instant is a completed commit/deltacommit/replacecommit;
- a log file belongs to the slice whose base instant is in its name;
- a slice whose base instant is a *pending* compaction C has no base yet: until C completes, readers
  see the previous slice followed by the logs already written under C (Java's pending-compaction merge);
- blocks inside logs are filtered later by instant (see `engine.read.slice_reader`);
- a file group named in `partitionToReplaceFileIds` of a *completed* replacecommit (insert_overwrite,
  insert_overwrite_table, clustering) is gone for every reader, whatever slices it still has on disk; only
  the cleaner (which deletes it) and rollback (which masks blocks in it) look at replaced groups — and
  time travel to an instant before the replacecommit, when the group was still live.
- as of an instant I (time travel, incremental end), only slices whose base instant is ≤ I exist: every file
  of a slice X > I was written by X or later, and the logs a compaction X carried over into it (links or
  copies) repeat blocks the older slice still holds, so reading them too would read those blocks twice.

Table version 8 (timeline layout 2) differs in one rule, log slicing: a log file is named by the requested time
of the deltacommit that wrote it, and belongs to the slice with the greatest base instant ≤ that deltacommit's
*completion* time (Java 1.x HoodieFileGroup, hudi-rs `FileGroup::add_log_file`). `engine.slices.slicing_v8`
places them; everything else above holds for both versions.
"""
from __future__ import annotations

import os

from engine.errors import TidemarkError
from engine.io import storage
from engine.io.naming import parse_base_file_name, parse_log_file_name
from engine.slices import slicing_v8
from engine.slices.groups import BaseFile, FileGroup, FileSlice, LogFile
from engine.timeline.committed import CommittedInstants
from engine.timeline.instants import CLEAN, COMMIT, DELTACOMMIT, REPLACECOMMIT, State, Timeline
from engine.timeline.metadata import CompactionOperation

PARTITION_METAFILE = ".hoodie_partition_metadata"
# Actions whose completion makes base files (and log blocks) visible.
WRITE_ACTIONS = (COMMIT, DELTACOMMIT, REPLACECOMMIT)


def list_partitions(base_path: str) -> list[str]:
    """Relative partition paths ("" for a non-partitioned table): directories with partition metadata."""
    if storage.is_remote(base_path):
        return sorted(_remote_tree(base_path))
    found: list[str] = []
    for root, dirs, files in os.walk(base_path):
        dirs[:] = [d for d in dirs if not d.startswith(".hoodie") and not d.startswith("__MACOSX")]
        if PARTITION_METAFILE in files or any(f.startswith(PARTITION_METAFILE) for f in files):
            rel = os.path.relpath(root, base_path)
            found.append("" if rel == "." else rel.replace(os.sep, "/"))
    return sorted(found)


def _remote_tree(base_path: str) -> dict[str, list[storage.Entry]]:
    """partition -> its files, from ONE recursive listing of the table (object stores list by prefix, so
    this is a few paginated requests for the whole table, not one per folder); `.hoodie/` left out, not even
    listed on S3."""
    files: dict[str, list[storage.Entry]] = {}
    for e in storage.list_tree(base_path, skip=".hoodie"):
        if e.is_dir or e.name.startswith("__MACOSX"):
            continue
        folder, _, name = e.name.rpartition("/")
        files.setdefault(folder, []).append(storage.Entry(name, e.path, False, e.size, e.mtime_ms))
    return {p: entries for p, entries in files.items()
            if any(x.name.startswith(PARTITION_METAFILE) for x in entries)}


def ask_listing_ahead(base_path: str, keep: bool = False) -> None:
    """`storage.ask_ahead` of the one listing a view of an object-store table takes (`_remote_tree`); the caller
    holds the locks that keep it true until a view takes it."""
    storage.ask_ahead(trees=[(base_path, ".hoodie")], keep=keep)


class FileSystemView:
    """File groups of a table, built from one listing of each partition."""

    def __init__(self, base_path: str, timeline: Timeline | None = None) -> None:
        self.base_path = base_path
        self.timeline = timeline or Timeline.load(base_path)
        self._committed = self.timeline.committed_writes()
        self._pending_compactions = {i.timestamp for i in self.timeline.pending_compactions()}
        # Object stores: the one listing `partitions()` took, kept for this view (a snapshot, like the timeline).
        self._remote: dict[str, list[storage.Entry]] | None = None
        self._planned_outputs = self._pending_plan_outputs()
        self._replaced = self.timeline.replaced_file_groups()
        # The same groups by the replacecommit's completion time (v8/v9): a range ending at a completion time
        # sees a group replaced only once its replacecommit completed, not when it was requested.
        done = {i.timestamp: i.completion_time or i.timestamp for i in self.timeline.completed()}
        self._replaced_done = {key: done.get(ts, ts) for key, ts in self._replaced.items()}
        self._groups: dict[tuple[str, str], FileGroup] | None = None
        self._dangling: list[tuple[tuple[str, str], str]] = []   # (group, link path): links whose target is gone
        self._cleans: list[tuple[str, dict[str, list[str]]]] | None = None
        self._unplaced: list[LogFile] = []   # v8: the partition's logs, until every base file is known

    def _pending_plan_outputs(self) -> set[str]:
        """Log names pending compactions create in their slice: carry-overs and carry-forward logs."""
        names: set[str] = set()
        listed: dict[str, list[str]] = {}   # one listing per partition, not one per operation
        for ts in self._pending_compactions:
            for op in self.timeline.compaction_plan(ts).operations:
                names.update(s.symlink for s in op.carried)
                names.update(self._spill_names(op, ts, listed))
        return names

    def _spill_names(self, op: CompactionOperation, instant: str, listed: dict[str, list[str]]) -> list[str]:
        partition = op.partition_path
        if partition not in listed:
            if storage.is_remote(self.base_path):   # the view's one listing of the table, taken now
                self.partitions()
                listed[partition] = [e.name for e in (self._remote or {}).get(partition, [])]
            else:
                listed[partition] = storage.list_names_if_dir(self.partition_dir(partition))
        prefix = f".{op.file_id}_{instant}.log.1_"   # the carry-forward log is version 1 of slice C
        return [n for n in listed[partition] if n.startswith(prefix)]

    @property
    def committed_instants(self) -> CommittedInstants:
        return self._committed

    def remote_listings(self) -> dict[str, dict[str, int]] | None:
        """partition folder -> {file name: size} from the view's one listing of an object-store table (None
        locally, or before the view listed)."""
        if self._remote is None:
            return None
        return {self.partition_dir(p): {e.name: e.size for e in entries} for p, entries in self._remote.items()}

    def remote_entries(self, partition: str) -> list[storage.Entry] | None:
        """The files of `partition` in the view's one listing of an object-store table (None locally, or
        before the view listed)."""
        return None if self._remote is None else list(self._remote.get(partition, []))

    def partitions(self) -> list[str]:
        if storage.is_remote(self.base_path):
            if self._remote is None:
                self._remote = _remote_tree(self.base_path)
            return sorted(self._remote)
        return list_partitions(self.base_path)

    def file_groups(self) -> list[FileGroup]:
        """The live file groups: every group on disk except those a completed replacecommit replaced."""
        return [g for g in self.all_file_groups() if (g.partition_path, g.file_id) not in self._replaced]

    def replaced_file_groups(self) -> list[tuple[FileGroup, str]]:
        """Replaced file groups still on disk, each with the replacecommit that replaced it."""
        return [(g, self._replaced[(g.partition_path, g.file_id)]) for g in self.all_file_groups()
                if (g.partition_path, g.file_id) in self._replaced]

    def _groups_as_of(self, as_of: str, by_completion: bool = False) -> list[FileGroup]:
        """The groups live at instant `as_of`: one replaced by a later replacecommit was still live then."""
        return [g for g in self.all_file_groups()
                if self.live_at((g.partition_path, g.file_id), as_of, by_completion=by_completion)]

    def live_at(self, key: tuple[str, str], as_of: str, *, by_completion: bool = False) -> bool:
        """Was file group `key` live at instant `as_of` (not yet replaced by a completed replacecommit)? With
        `by_completion`, `as_of` is a completion time and the replacecommit's completion time decides."""
        return (self._replaced_done if by_completion else self._replaced).get(key, "~") > as_of

    def committed_slice_instants(self) -> dict[tuple[str, str], list[str]]:
        """(partition, fileId) -> base instants of the group's slices on disk that are completed writes."""
        return {(g.partition_path, g.file_id): [s.base_instant for s in g.slices if s.base_instant in self._committed]
                for g in self.all_file_groups()}

    def is_replaced(self, partition: str, file_id: str) -> bool:
        return (partition, file_id) in self._replaced

    def all_file_groups(self) -> list[FileGroup]:
        """Every file group on disk, replaced ones included (for the cleaner and rollback only)."""
        if self._groups is None:
            groups: dict[tuple[str, str], FileGroup] = {}
            for partition in self.partitions():
                self._load_partition(partition, groups)
            self._groups = groups
        return sorted(self._groups.values(), key=lambda g: (g.partition_path, g.file_id))

    def partition_dir(self, partition: str) -> str:
        return storage.join(self.base_path, partition) if partition else self.base_path

    def _load_partition(self, partition: str, groups: dict[tuple[str, str], FileGroup]) -> None:
        slices: dict[tuple[str, str], FileSlice] = {}
        directory = self.partition_dir(partition)
        self._unplaced = []
        if storage.is_remote(directory):
            self.partitions()
            for e in (self._remote or {}).get(partition, []):
                self._add_file(partition, e.name, e.path, e.size, slices)
        else:
            self._load_local(partition, directory, slices)
        if self._unplaced:
            slicing_v8.place_logs(self.timeline, self._pending_compactions, partition, self._unplaced, slices)
        for (file_id, _), sl in sorted(slices.items(), key=lambda kv: kv[0]):
            # name order on both versions (v6: one base instant per slice; v8: see engine.slices.slicing_v8)
            sl.log_files.sort(key=lambda lf: (lf.base_instant, *lf.sort_key))
            group = groups.setdefault((partition, file_id), FileGroup(partition, file_id))
            group.slices.append(sl)
        for group in groups.values():
            group.slices.sort(key=lambda s: s.base_instant)

    def _load_local(self, partition: str, directory: str, slices: dict[tuple[str, str], FileSlice]) -> None:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_file():   # follows symlinks: carried-over logs are links
                    dangling = parse_log_file_name(entry.name) if entry.is_symlink() else None
                    if dangling is not None:
                        self._dangling.append(((partition, dangling.file_id), entry.path))
                    continue
                self._add_file(partition, entry.name, entry.path, entry.stat().st_size, slices)

    def _add_file(self, partition: str, name: str, path: str, size: int, slices: dict[tuple[str, str], FileSlice]) -> None:
        if name.startswith("."):
            log = parse_log_file_name(name)
            if log is None:
                return
            lf = LogFile(name, path, log.file_id, log.base_instant, log.version, log.write_token, size)
            if self.timeline.uses_completion_time:
                self._unplaced.append(lf)   # placed by completion time once every base file is known
                return
            slice_ = slices.setdefault((log.file_id, log.base_instant),
                                       FileSlice(partition, log.file_id, log.base_instant))
            slice_.log_files.append(lf)
            return
        base = parse_base_file_name(name)
        if base is None or base.instant not in self._committed:
            return  # failed or in-flight writes (incl. an un-committed compaction's base) stay invisible
        slice_ = slices.setdefault((base.file_id, base.instant), FileSlice(partition, base.file_id, base.instant))
        bf = BaseFile(name, path, base.file_id, base.instant, size)
        if slice_.base_file is None or name > slice_.base_file.name:
            slice_.base_file = bf

    def cleans(self) -> list[tuple[str, dict[str, list[str]]]]:
        """(clean instant, partition -> file names its plan deletes) of every clean that started deleting:
        completed, or inflight (interrupted, or running). A requested clean has deleted nothing yet."""
        if self._cleans is None:
            self._cleans = [(i.timestamp, self.timeline.clean_plan(i.timestamp).deleted_names())
                            for i in self.timeline.instants
                            if i.action == CLEAN and i.state in (State.INFLIGHT, State.COMPLETED)]
        return self._cleans

    def dangling_links(self, as_of: str | None = None) -> list[str]:
        """Carried-over log links whose target is gone, in the groups a read now (or as of `as_of`) reads: a
        replaced group's records are gone for current readers, but time travel before its replacecommit
        still reads them, so there its broken link would lose records too. A link that a completed or inflight
        clean deletes is not lost data but a slice being cleaned (a clean killed between deleting a target and
        its link, as cleans before links-first ordering could be): reads of that slice are refused as cleaned
        (`incremental.check_not_cleaned`), every other read goes on."""
        self.all_file_groups()
        if not self._dangling:
            return []
        cleaned = {(p, n) for _, deleted in self.cleans() for p, names in deleted.items() for n in names}
        return [path for key, path in self._dangling
                if (key not in self._replaced if as_of is None else self.live_at(key, as_of))
                and (key[0], os.path.basename(path)) not in cleaned]

    def check_links(self, as_of: str | None = None) -> None:
        """Refuse to go on when a carried-over log link dangles: its records would silently be missing."""
        dangling = self.dangling_links(as_of)
        if dangling:
            raise TidemarkError("carried-over log link(s) with a missing target, their records would be lost: "
                                + ", ".join(f"{p} -> {os.readlink(p)}" for p in dangling))

    def latest_slices(self, as_of: str | None = None, *, by_completion: bool = False) -> list[FileSlice]:
        """The slice each reader should use per file group (pending compactions folded in), now or as of
        instant `as_of` (slices with a later base instant ignored; `by_completion`: slices whose base instant
        completed after `as_of` ignored — a v8 incremental range's end is a completion time)."""
        out: list[FileSlice] = []
        for group in self.file_groups() if as_of is None else self._groups_as_of(as_of, by_completion):
            sl = self.latest_of(group, as_of, by_completion=by_completion)
            if sl is not None:
                out.append(sl)
        return out

    def latest_of(self, group: FileGroup, as_of: str | None = None, *,
                  by_completion: bool = False) -> FileSlice | None:
        """The slice readers use for one file group (None when nothing in it is visible)."""
        def position(sl: FileSlice) -> str:
            return (self.timeline.completion_time(sl.base_instant) or sl.base_instant) if by_completion \
                else sl.base_instant

        visible = [s for s in group.slices
                   if self._slice_visible(s) and (as_of is None or position(s) <= as_of)]
        if not visible:
            return None
        latest = visible[-1]
        # A log-only slice under an instant that is not a committed write is either logs written during a
        # pending compaction C, or strays of a compaction rolled back or never planned: either way they
        # continue the previous slice and must not shadow it.
        continuation = latest.base_instant in self._pending_compactions or latest.base_instant not in self._committed
        if continuation and latest.base_file is None and len(visible) > 1:
            prev = visible[-2]
            # Carry-overs (and the exact-mode spill) a pending plan already made repeat prev's records.
            own = [lf for lf in latest.log_files if lf.name not in self._planned_outputs]
            return FileSlice(prev.partition_path, prev.file_id, prev.base_instant, prev.base_file,
                             prev.log_files + own)
        return latest

    def _slice_visible(self, sl: FileSlice) -> bool:
        if sl.base_file is not None:
            return True
        # Log-only slice: a first write of a new file group, or logs written under a compaction
        # instant (pending or completed). Its blocks are filtered by instant when read.
        return bool(sl.log_files)
