"""Recovering from failures of writers: failed task attempts and writes that died without cleaning up.

- A Spark task may run more than once (retry, speculation). Every attempt writes the same file groups and
  log versions (file ids of new groups are derived from instant, partition and bucket) under its own
  write token; before the deltacommit completes, the logs of attempts whose stats were not committed are
  deleted (Hudi's marker reconciliation, done from the write stats).
- A writer killed between `inflight` and `completed` leaves a pending deltacommit that would block the
  serial compaction trigger and the cleaner forever. The next writer, holding the table lock, rolls it
  back (Hudi's EAGER failed-writes policy): the logs holding only its blocks are deleted, then its instant
  files. Its blocks were never visible, so no reader's result changes.
"""
from __future__ import annotations

import os
from typing import Iterable

from engine import logformat
from engine.fsview import FileSystemView
from engine.naming import parse_log_file_name
from engine.timeline import Timeline, delete_instant_files


def reconcile_attempts(base_path: str, stats: Iterable[dict]) -> list[str]:
    """Delete logs that duplicate a committed log's (file group, version) under another attempt's token."""
    committed_by_dir: dict[str, dict[tuple[str, str, int], str]] = {}
    for stat in stats:
        log = parse_log_file_name(os.path.basename(stat["path"]))
        if log is not None:
            directory = os.path.join(base_path, os.path.dirname(stat["path"]))
            committed_by_dir.setdefault(directory, {})[(log.file_id, log.base_instant, log.version)] = log.write_token
    removed: list[str] = []
    for directory, committed in committed_by_dir.items():   # one listing per partition
        for name in os.listdir(directory):
            other = parse_log_file_name(name)
            if other is None:
                continue
            token = committed.get((other.file_id, other.base_instant, other.version))
            if token is not None and other.write_token != token:
                os.unlink(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
    return removed


def rollback_failed_writes(base_path: str) -> list[str]:
    """Roll back every pending deltacommit (call only while holding the table lock); returns their instants."""
    timeline = Timeline.load(base_path)
    failed = {i.timestamp for i in timeline.pending() if i.action == "deltacommit"}
    if not failed:
        return []
    view = FileSystemView(base_path, timeline)
    for group in view.file_groups():
        for sl in group.slices:
            for lf in sl.log_files:
                _delete_if_only(lf.path, failed)
    for instant in sorted(failed):
        delete_instant_files(base_path, instant, "deltacommit")
    return sorted(failed)


def _delete_if_only(path: str, instants: set[str]) -> None:
    """Delete a log whose every block belongs to one of `instants` (a file Tidemark wrote for that write)."""
    if os.path.islink(path):
        return  # a carried-over link belongs to a compaction, never to a write
    scan = logformat.scan_log_file(path)
    if scan.blocks and not scan.corrupt and all(b.instant_time in instants for b in scan.blocks):
        os.unlink(path)
