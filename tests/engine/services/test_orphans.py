"""Files a rolled-back write left behind: `recover` and every clean remove them, and only them.

The zombie is made on one host: its write is rolled back under it once its instant is inflight (as another host
does after taking the lock from a paused writer), its tasks then write, and its publish is refused. The same on
S3, with two hosts racing for the storage lock, is in tests/integration/test_s3_orphans.py.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from engine import Refused, Table
from engine.errors import LOCK_LOST
from engine.logformat import encode_rollback_block
from engine.services import orphans, rollback
from engine.timeline.instants import DELTACOMMIT, Timeline
from engine.write import pipeline
from tests.support.oracle import hudi_read, rows_by_key
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
