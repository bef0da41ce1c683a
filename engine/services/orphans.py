"""Files a rolled-back write left behind, found and removed by `recover` and by the automatic clean.

A writer that lost its lock while paused (a zombie) can resume after another host rolled its instant back, and its
tasks write on: base and log files of an instant that will never complete. No reader takes them — their instant is
rolled back — but nothing else would ever delete them either: the rollback that undid the instant did not know
them, and a clean only deletes what committed slices replaced.

An orphan is a file of an instant a completed rollback on the active timeline undid, that the rollback did not
keep on purpose (its metadata names the logs it masked and the command logs it wrote; a file it deleted that is
back, or one it failed to delete, is an orphan), that no commit on the active timeline and no pending compaction
plan names, and that is not a carried-over link. A log counts as the dead instant's only when
every block in it is (a header scan; a log with a damaged region never counts): a log the rollback masked with a
command block stays, as Java Hudi leaves it. Only rollbacks still on the active timeline are considered: a
rollback is archived long after the next recover or clean has run (both come after every commit), so its orphans
are gone by then; orphans of one archived earlier stay undetected.
"""
from __future__ import annotations

import json

from engine import logformat
from engine.io import storage
from engine.io.naming import parse_base_file_name, parse_log_file_name
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import ROLLBACK, Timeline


def find_orphans(base_path: str, timeline: Timeline) -> list[str]:
    """The paths of every orphan of a rolled-back write in the table (see the module's rules)."""
    records = [timeline.rollback_record(i.timestamp) for i in timeline.completed() if i.action == ROLLBACK]
    on_timeline = {i.timestamp for i in timeline.instants}
    dead = {x for rec in records for x in rec.rolled_back if x not in on_timeline}
    if not dead:
        return []
    handled = {name for rec in records for name in rec.kept_files} | _named_by_timeline(timeline)
    view = FileSystemView(base_path, timeline)
    found: list[str] = []
    for partition in view.partitions():
        pdir = view.partition_dir(partition)
        for name in storage.list_names_if_dir(pdir):
            if name not in handled and _of_dead_instant(storage.join(pdir, name), name, dead):
                found.append(storage.join(pdir, name))
    return sorted(found)


def remove_orphans(base_path: str, timeline: Timeline) -> list[str]:
    """Delete the orphans (under the caller's table lock); returns the paths deleted."""
    removed = []
    for path in find_orphans(base_path, timeline):
        try:
            storage.remove(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def _of_dead_instant(path: str, name: str, dead: set[str]) -> bool:
    base = parse_base_file_name(name)
    if base is not None:
        return base.instant in dead
    log = parse_log_file_name(name)
    if log is None or storage.is_link(path):   # a carried-over link belongs to a compaction
        return False
    scan = logformat.scan_log_file(path)
    if scan.corrupt or not scan.blocks:
        return False
    return all((b.target_instant_time if b.block_type is logformat.BlockType.COMMAND else b.instant_time) in dead
               for b in scan.blocks)


def _named_by_timeline(timeline: Timeline) -> set[str]:
    """File names the active timeline's commits wrote and its pending compaction plans read: never orphans."""
    names: set[str] = set()
    for instant in timeline.completed():
        if instant.action in ("commit", "deltacommit", "replacecommit"):
            names.update(stat.path.rsplit("/", 1)[-1] for stat in timeline.commit_metadata(instant).write_stats)
    for pending in timeline.pending_compactions():
        for op in timeline.compaction_plan(pending.timestamp).operations:
            names.update(op.delta_files)
            names.update(n.rsplit("/", 1)[-1] for c in op.carried for n in (c.symlink, c.target))
            if op.data_file:
                names.add(op.data_file)
    return names


# The newest rollback whose orphans were swept, so the automatic clean looks again only after a new rollback.
SWEPT_MARK = ".hoodie/.aux/tidemark-orphans.json"


def sweep_after_new_rollback(base_path: str, timeline: Timeline) -> list[str]:
    """The automatic clean's share: remove orphans once per completed rollback (under the clean's lock). Free
    when the active timeline holds no rollback; one small read when it holds only rollbacks already swept."""
    newest = max((i.timestamp for i in timeline.completed() if i.action == ROLLBACK), default=None)
    if newest is None:
        return []
    mark = storage.join(base_path, SWEPT_MARK)
    try:
        swept = str(json.loads(storage.read_bytes(mark)).get("swept_through", ""))
    except (FileNotFoundError, ValueError, AttributeError):
        swept = ""
    if swept >= newest:
        return []
    removed = remove_orphans(base_path, timeline)
    storage.make_dirs(storage.parent(mark))
    storage.write_replace(mark, json.dumps({"swept_through": newest}).encode())
    return removed
