"""Writer heartbeats (case 8): a killed writer never blocks the table, a live one is never rolled back."""
from __future__ import annotations

import os
import time

import pytest

from engine import Table
from engine.cli import main
from engine.compaction import schedule_compaction
from engine.config import eventtime
from engine.config.properties import load_table_config, save_table_config
from engine.errors import CompactionRefused
from engine.io import faults
from engine.io.naming import parse_log_file_name
from engine.results import iso, utc
from engine.services.clean import run_clean
from engine.services.recovery import recover
from engine.services.rollback import RollbackRefused, rollback
from engine.timeline import heartbeat
from engine.timeline.instants import Timeline
from tests.support.fault_child import run_child
from tests.support.table_model import HISTORY, T, model_of, new_table, snapshot


def test_heartbeat_beats_while_alive_and_is_deleted_at_the_end(tmp_path):
    base = str(tmp_path)
    os.makedirs(os.path.join(base, ".hoodie"))
    beat = heartbeat.Heartbeat(base, "20250101000000000", interval_ms=20).start()
    first = os.stat(heartbeat.heartbeat_path(base, "20250101000000000")).st_mtime_ns
    time.sleep(0.2)
    assert os.stat(heartbeat.heartbeat_path(base, "20250101000000000")).st_mtime_ns > first
    assert not heartbeat.is_expired(base, "20250101000000000", expiry=1000)
    beat.stop()
    assert heartbeat.heartbeat_instants(base) == []
    assert heartbeat.last_heartbeat_ms(base, "20250101000000000") == 0   # missing reads as "never", as in Java
    assert heartbeat.is_expired(base, "20250101000000000", expiry=1000)


def killed_writer(path: str) -> str:
    """A `tidemark write` killed after its logs were written: a pending deltacommit and a stale heartbeat."""
    done = run_child("write", path, "", "write:tasks")
    assert done.returncode == faults.EXIT_CODE, done.stderr[-2000:]
    (dead,) = [i.timestamp for i in Timeline.load(path).pending() if i.action == "deltacommit"]
    return dead


def age(path: str, instant: str, seconds: float) -> None:
    hb = heartbeat.heartbeat_path(path, instant)
    past = time.time() - seconds
    os.utime(hb, (past, past))


def test_killed_writer_blocks_nothing_once_its_heartbeat_expires(tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    dead = killed_writer(path)
    assert os.path.exists(heartbeat.heartbeat_path(path, dead))
    age(path, dead, -3600)   # still beating as far as anyone can tell: the writer may be alive
    with pytest.raises(CompactionRefused, match=dead):
        schedule_compaction(path, strategy="unbounded")
    with pytest.raises(RollbackRefused, match="heartbeat is live") as refused:
        rollback(path, dead)
    assert refused.value.reason == "pending_write"
    assert recover(path).live_writes == [dead]
    assert [i.timestamp for i in Timeline.load(path).pending()] == [dead]   # never rolled back while live

    age(path, dead, 1.0)     # interval 100 ms × 2 misses: expired
    plan = schedule_compaction(path, strategy="unbounded")
    assert plan.instant is not None
    timeline = Timeline.load(path)
    assert not timeline.get(dead) and [i.action for i in timeline.instants if i.action == "rollback"] == ["rollback"]
    assert not os.path.exists(heartbeat.heartbeat_path(path, dead))
    assert snapshot(path) == model_of(HISTORY)


@pytest.mark.parametrize("service", ["clean", "recover"])
def test_clean_and_recover_roll_back_expired_writes(tmp_path, service):
    path = str(tmp_path / "t")
    new_table(path)
    dead = killed_writer(path)
    age(path, dead, 1.0)
    if service == "clean":
        run_clean(path, retain_commits=1)
    else:
        assert recover(path).rolled_back == [dead]
    assert not Timeline.load(path).pending()
    assert snapshot(path) == model_of(HISTORY)


def slow_heartbeats(path: str, interval_ms: int) -> None:
    cfg = load_table_config(path)
    cfg.props[heartbeat.INTERVAL_KEY] = str(interval_ms)
    save_table_config(cfg)


def test_an_expired_writer_in_a_pending_compactions_slice_never_blocks_its_rollback(tmp_path, capsys):
    """Issue 12 case 6: a write killed after writing logs into slice C of a pending compaction. While its
    heartbeat has missed beats but not expired, `recover` says so (with the expiry), never "alive"; once it
    expired, `tidemark rollback --instant C` rolls the dead write back first and then C."""
    path = str(tmp_path / "t")
    new_table(path)
    c = schedule_compaction(path, threshold_ms=T, carry_over="symlink").instant
    assert c is not None
    dead = killed_writer(path)
    in_slice_c = [n for n in os.listdir(path) if (log := parse_log_file_name(n)) and log.base_instant == c]
    assert in_slice_c, "the killed write put logs into slice C"

    slow_heartbeats(path, 10_000)            # expiry 20 s: stale after a missed beat, not expired yet
    age(path, dead, 16)
    last = heartbeat.last_heartbeat_ms(path, dead)
    result = Table.open(path).recover()
    assert result.live_writes == [dead] and not result.changed
    assert "alive" not in result.message
    expires = eventtime.iso(last + 20_000)
    assert f"left alone: write {dead} (heartbeat not yet expired (expires at {expires}))" in result.message
    assert result.to_dict()["stale_writes"] == {dead: iso(utc(last + 20_000))}
    age(path, dead, 1)                       # a fresh beat: the writer is alive
    assert "its heartbeat is current" in Table.open(path).recover().message

    age(path, dead, 25)                      # expired
    assert main(["rollback", path, "--instant", c]) == 0
    out = capsys.readouterr().out
    assert f"rolled back write {dead} first" in out and f"rolled back compaction {c}" in out
    timeline = Timeline.load(path)
    assert not timeline.pending() and not timeline.get(c) and not timeline.get(dead)
    assert not [n for n in os.listdir(path) if (log := parse_log_file_name(n)) and log.base_instant == c]
    assert snapshot(path) == model_of(HISTORY)
