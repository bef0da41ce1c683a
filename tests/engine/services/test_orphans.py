"""Files a rolled-back write left behind: `recover` and every clean remove them, and only them.

Locally the zombie is made on one host: its write is rolled back under it once its instant is inflight (as another
host does after taking the lock from a paused writer), its tasks then write, and its publish is refused. On S3
(moto) two hosts share the storage-based lock and the zombie's lease is really taken over.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import Refused, Table
from engine.cli import output
from engine.config.properties import LOCK_PROVIDER_KEY, STORAGE_LOCK_PROVIDER
from engine.errors import LOCK_LOST
from engine.io import storage
from engine.io.faults import fault_point
from engine.io.store_lock import LockData, StoreLock
from engine.logformat import encode_rollback_block
from engine.services import orphans, rollback
from engine.timeline import heartbeat
from engine.timeline.instants import DELTACOMMIT, Timeline
from engine.write import pipeline
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.other_host import as_another_host
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)
from tests.support.tables import day_file


def _files(path: str) -> dict[str, str]:
    """Every data file of the table (not `.hoodie/`) -> a digest of its bytes (a link: where it points)."""
    out = {}
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".hoodie")]
        for name in names:
            full = os.path.join(root, name)
            out[full] = ("link:" + os.readlink(full)) if os.path.islink(full) else \
                hashlib.md5(Path(full).read_bytes(), usedforsecurity=False).hexdigest()
    return out


def _zombie_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int,
                  auto_clean: bool = False) -> tuple[Table, str, set[str]]:
    """A table with a committed write, a zombie write rolled back before its tasks ran (their files left behind),
    and a committed write after it. Returns the table, the zombie's instant and the files it left (gone already
    when `auto_clean`: the clean after the last commit removed them)."""
    table = Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts", table_version=version,
                         settings={"hoodie.bucket.index.num.buckets": "2",
                                   "hoodie.clean.automatic": str(auto_clean).lower()})
    table.write(day_file(tmp_path, 0, "01", keys=4))
    zombie: list[str] = []
    before: dict[str, str] = {}
    real = pipeline.fault_point

    def rolled_back_under_it(operation: str, step: str) -> None:
        real(operation, step)
        if (operation, step) == ("write", "inflight"):
            zombie.append(next(i.timestamp for i in Timeline.load(table.path).pending() if i.action == DELTACOMMIT))
            rollback.rollback_locked(table.path, zombie[0], allow_live=True)   # what the lock's new holder does
            before.update(_files(table.path))
        if (operation, step) == ("write", "reconciled"):
            raise Refused(LOCK_LOST, "lock lost: taken over while paused")   # its publish is refused

    monkeypatch.setattr(pipeline, "fault_point", rolled_back_under_it)
    with pytest.raises(Refused):
        table.write(day_file(tmp_path, 1, "02", keys=8))
    monkeypatch.setattr(pipeline, "fault_point", real)
    left = set(_files(table.path)) - set(before)
    table.write(day_file(tmp_path, 2, "03", keys=3))
    return table, zombie[0], left


@pytest.mark.parametrize("version", [6, 8])
def test_recover_removes_what_a_rolled_back_write_left_and_nothing_else(tmp_path, monkeypatch, version) -> None:
    table, zombie, left = _zombie_table(tmp_path, monkeypatch, version)
    assert left and all(zombie in orphans.find_orphans(table.path).files[p] for p in left)
    kept_before = {p: d for p, d in _files(table.path).items() if p not in left}
    rows_before = rows_by_key(hudi_read(table.path))

    result = table.recover()

    assert sorted(result.removed_orphans) == sorted(left) and result.orphan_instants == [zombie]
    assert result.changed and f"removed {len(left)} file(s) left behind by rolled-back write(s) {zombie}" \
        in result.message
    assert _files(table.path) == kept_before                       # committed data untouched
    assert rows_by_key(hudi_read(table.path)) == rows_before       # the reader's answer unchanged
    assert {k[1]: r["seq"] for k, r in rows_before.items()} == {**{f"k{k}": 0 for k in range(4)},
                                                               **{f"k{k}": 2 for k in range(3)}}
    again = table.recover()
    assert not again.changed and again.message == "nothing to recover" and not again.removed_orphans


def test_the_automatic_clean_after_the_next_commit_removes_them(tmp_path, monkeypatch) -> None:
    table, zombie, left = _zombie_table(tmp_path, monkeypatch, 6, auto_clean=True)
    assert left and not any(os.path.exists(p) for p in left)
    assert table.recover().message == "nothing to recover"


def test_a_clean_removes_them_too_and_a_dry_run_lists_them(tmp_path, monkeypatch) -> None:
    table, zombie, left = _zombie_table(tmp_path, monkeypatch, 6)
    dry = table.clean(dry_run=True)
    assert sorted(dry.orphans) == sorted(left) and all(os.path.exists(p) for p in left)
    assert "would remove" in dry.message
    done = table.clean()
    assert sorted(done.orphans) == sorted(left) and not any(os.path.exists(p) for p in left)
    assert f"removed {len(left)} file(s) left behind by rolled-back write(s) {zombie}" in done.message


def test_links_mixed_logs_and_rollback_blocks_stay(tmp_path, monkeypatch) -> None:
    """A log is removed only when every block in it is a rolled-back write's data: a link (a carried-over log),
    a log that also holds a committed block, and one with a rollback command block all stay."""
    table, zombie, left = _zombie_table(tmp_path, monkeypatch, 6)
    zombie_log = next(p for p in sorted(left) if "/." in p)
    committed_log = next(p for p in sorted(set(_files(table.path)) - left)
                         if os.path.basename(p).startswith(".") and ".log." in p)
    pdir, data = os.path.dirname(zombie_log), Path(zombie_log).read_bytes()
    fid, base = os.path.basename(zombie_log)[1:].split(".log.")[0].split("_", 1)
    elsewhere = tmp_path / "elsewhere.log"
    elsewhere.write_bytes(data)
    link = os.path.join(pdir, f".{fid}_{base}.log.70_9-9-9")
    os.symlink(elsewhere, link)
    mixed = os.path.join(pdir, f".{fid}_{base}.log.71_9-9-9")
    Path(mixed).write_bytes(data + Path(committed_log).read_bytes())
    masked = os.path.join(pdir, f".{fid}_{base}.log.72_9-9-9")
    Path(masked).write_bytes(data + encode_rollback_block("29990101000000000", zombie))

    removed = table.recover().removed_orphans

    assert sorted(removed) == sorted(left)
    assert os.path.islink(link) and os.path.exists(mixed) and os.path.exists(masked)


def test_no_completed_rollback_means_no_listing(tmp_path, monkeypatch) -> None:
    """The clean after every commit pays nothing for this while no rollback is on the active timeline."""
    table = Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})
    table.write(day_file(tmp_path, 0, "01"))

    def no_listing(*_args, **_kwargs):
        raise AssertionError("listed the table")

    monkeypatch.setattr(orphans.FileSystemView, "partitions", no_listing)
    assert orphans.find_orphans(table.path).files == {}



def test_a_day_after_the_rollback_the_automatic_clean_stops_looking(tmp_path, monkeypatch) -> None:
    """Looking costs a listing per commit: the automatic clean looks only in the day after a rollback; recover and
    an explicit clean look whenever they run."""
    table, _, left = _zombie_table(tmp_path, monkeypatch, 6)
    monkeypatch.setattr(orphans, "WATCH_MS", -1)                   # the rollback is "older than a day" now
    table.update_settings({"hoodie.clean.automatic": "true"})
    listed: list[int] = []
    real = orphans.find_orphans
    monkeypatch.setattr(orphans, "find_orphans", lambda *a, **k: listed.append(1) or real(*a, **k))
    table.write(day_file(tmp_path, 3, "04", keys=2))
    assert not listed and all(os.path.exists(p) for p in left)
    assert sorted(table.clean().orphans) == sorted(left)            # an explicit clean still looks


def test_archiving_a_rollback_removes_its_writes_leftovers_first(tmp_path, monkeypatch) -> None:
    """Once archived, a rolled-back instant reads as committed: archival removes its leftovers just before."""
    from engine.services import archive

    table, _, left = _zombie_table(tmp_path, monkeypatch, 6)
    timeline = Timeline.load(table.path)
    rollbacks = [i for i in timeline.completed() if i.action == "rollback"]
    monkeypatch.setattr(archive, "instants_to_archive", lambda *_a: rollbacks)
    archive.run_archive(table.path)
    assert not any(os.path.exists(p) for p in left)
    assert not [i for i in Timeline.load(table.path).completed() if i.action == "rollback"]

# --- on S3, two hosts racing for the storage lock (moto) -----------------------------------------------------------

def _s3_files(uri: str) -> dict[str, str]:
    """Every data file of the table -> its ETag."""
    return {e.path: e.etag for e in storage.list_tree(uri, skip=".hoodie") if not e.is_dir}


def _paused_past_its_lease(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uri: str, zombie: list[str],
                           after: dict[str, str], then: Callable[[str, str], None] = lambda *_: None) -> None:
    """Make this host's next write a zombie: once its instant is inflight its lease is taken over (as by a host that
    found it run out while this one was paused, its heartbeat stopped too), and the other host's `recover` rolls the
    write back; `after` gets the table's files then. `then(operation, step)` runs at every later step."""
    real, main = pipeline.fault_point, threading.current_thread()
    expired = heartbeat.is_expired

    def paused(operation: str, step: str) -> None:
        real(operation, step)
        if threading.current_thread() is not main:
            return
        if (operation, step) == ("write", "inflight") and not zombie:
            zombie.append(next(i.timestamp for i in Timeline.load(uri).pending() if i.action == DELTACOMMIT))
            lock_object = StoreLock(uri).path
            _, etag = storage.read_tagged(lock_object)
            storage.replace_if_match(lock_object, LockData(False, int(time.time() * 1000) - 60_000,
                                                           "a-host-that-took-it").to_bytes(), etag)
            with monkeypatch.context() as m:   # its heartbeat stopped with it
                m.setattr(heartbeat, "is_expired", lambda base, ts, expiry, now_ms=None:
                          ts == zombie[0] or expired(base, ts, expiry, now_ms))
                as_another_host(tmp_path, monkeypatch, lambda: Table.open(uri).recover())
            after.update(_s3_files(uri))
        then(operation, step)

    monkeypatch.setattr(pipeline, "fault_point", paused)


def _s3_table(uri: str) -> Table:
    return Table.create(uri, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                        settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER, "hoodie.bucket.index.num.buckets": "2",
                                  "hoodie.clean.automatic": "false"})


def test_on_s3_recover_removes_a_zombie_writes_late_files_and_hudi_reads_the_same(s3_env, tmp_path,  # noqa: F811
                                                                                   monkeypatch) -> None:
    """Host A pauses past its lease mid-write; host B takes the lock and rolls A's write back; A resumes, its tasks
    write every file, and its publish is refused. `recover` removes exactly A's files; every other file keeps its
    ETag, and hudi 0.5.0 reads the same rows before and after."""
    monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "this-host-locks"))
    uri = f"{s3_env['bucket_uri']}/t"
    table = _s3_table(uri)
    table.write(day_file(tmp_path, 0, "01", keys=4))
    zombie: list[str] = []
    after_rollback: dict[str, str] = {}
    _paused_past_its_lease(tmp_path, monkeypatch, uri, zombie, after_rollback)
    with pytest.raises(Refused) as refused:
        table.write(day_file(tmp_path, 1, "02", keys=8))
    assert refused.value.reason == LOCK_LOST and "stopped before committing" in refused.value.message
    left = set(_s3_files(uri)) - set(after_rollback)
    monkeypatch.setattr(pipeline, "fault_point", fault_point)
    Table.open(uri).write(day_file(tmp_path, 2, "03", keys=3))   # committed after: newer logs than A's
    assert left and not Timeline.load(uri).get(zombie[0])
    kept = {p: etag for p, etag in _s3_files(uri).items() if p not in left}
    opts = s3_env["storage_options"]
    rows_before = rows_by_key(hudi_read(uri, storage_options=opts))

    result = Table.open(uri).recover()

    assert sorted(result.removed_orphans) == sorted(left) and result.orphan_instants == zombie
    assert _s3_files(uri) == kept
    assert rows_by_key(hudi_read(uri, storage_options=opts)) == rows_before
    assert {k[1]: r["seq"] for k, r in rows_before.items()} == {**{f"k{k}": 0 for k in range(4)},
                                                               **{f"k{k}": 2 for k in range(3)}}
    assert output.recover(result).splitlines()[1:] == [f"  removed {p}" for p in sorted(left)]


def test_on_s3_a_zombie_whose_tasks_fail_says_so_in_one_line(s3_env, tmp_path, monkeypatch) -> None:  # noqa: F811
    """Its tasks fail after its lease was taken over: it does not try to roll back what it no longer owns (the
    rollback plan, an instant the holder already rolled back); one line names the lock, who holds it until when,
    and the write that was not published."""
    monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "this-host-locks"))
    uri = f"{s3_env['bucket_uri']}/t"
    table = _s3_table(uri)
    table.write(day_file(tmp_path, 0, "01", keys=4))
    zombie: list[str] = []

    def tasks_fail(operation: str, step: str) -> None:
        if (operation, step) == ("write", "tasks"):
            raise OSError("No space left on device")

    _paused_past_its_lease(tmp_path, monkeypatch, uri, zombie, {}, tasks_fail)
    with pytest.raises(Refused) as refused:
        table.write(day_file(tmp_path, 1, "02", keys=8))
    message = refused.value.message
    assert refused.value.reason == LOCK_LOST and "\n" not in message
    assert message.startswith(f"lock lost: {StoreLock(uri).path} ")
    assert "ran out or was given back (last tidemark-" in message and "until 20" in message   # the other host's
    assert f"write {zombie[0]} was not published (its tasks failed: " in message and "No space left" in message
    assert "rollback plan" not in message
    monkeypatch.setattr(pipeline, "fault_point", fault_point)
    assert Table.open(uri).recover().orphan_instants == zombie
