"""The per-table database lease on both databases: exclusion, expiry, renewal, theft, re-entry, contention."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from tests.support.stack import REPO


@pytest.fixture
def table_id(stack_env):
    from webapp.tables.models import RegisteredTable

    name = f"lease-{uuid.uuid4().hex[:8]}"
    table = RegisteredTable.objects.create(name=name, path=str(stack_env.table_root / name))
    return table.pk


def lease(table_id, owner, ttl_s=30.0, heartbeat_s=None):
    from tasks.lease import DatabaseLease

    return DatabaseLease(table_id, owner=owner, ttl_s=ttl_s, heartbeat_s=heartbeat_s)


def test_a_held_lease_excludes_others_until_released(table_id):
    first, second = lease(table_id, "first"), lease(table_id, "second")
    assert first.acquire(0)
    assert first.is_held()
    assert not second.acquire(0.5)
    assert not second.is_held()
    first.release()
    assert not first.is_held()
    assert second.acquire(0)
    second.release()


def test_an_unrenewed_lease_expires_and_can_be_taken(table_id):
    from tasks.lease import holder

    stale = lease(table_id, "stale", ttl_s=1.0, heartbeat_s=3600)  # heartbeat never fires: a frozen worker
    assert stale.acquire(0)
    assert holder(table_id).owner == "stale"
    time.sleep(1.2)
    assert holder(table_id) is None
    taker = lease(table_id, "taker")
    assert taker.acquire(0)
    assert not stale.is_held(), "a lease taken over after expiry is no longer held by its old owner"
    stale.release()  # must not free the new owner's lease
    assert taker.is_held()
    assert holder(table_id).owner == "taker"
    taker.release()


def test_the_heartbeat_keeps_a_lease_alive_past_its_ttl(table_id):
    from webapp.tables.models import TableLease

    live = lease(table_id, "live", ttl_s=1.0, heartbeat_s=0.2)
    assert live.acquire(0)
    first_expiry = TableLease.objects.get(table_id=table_id).expires_at
    time.sleep(2.5)
    row = TableLease.objects.get(table_id=table_id)
    assert row.expires_at > first_expiry and row.heartbeat_at > row.acquired_at
    assert live.is_held()
    assert not lease(table_id, "other").acquire(0)
    live.release()


def test_a_stolen_lease_stops_its_heartbeat(table_id):
    from webapp.tables.models import TableLease

    victim = lease(table_id, "victim", ttl_s=30.0, heartbeat_s=0.2)
    assert victim.acquire(0)
    # An operator (or a clock jump) hands the row to someone else behind the holder's back.
    TableLease.objects.filter(table_id=table_id).update(owner="thief")
    time.sleep(0.6)
    assert not victim.is_held()
    assert TableLease.objects.get(table_id=table_id).owner == "thief", "the old holder's heartbeat must not renew"
    victim.release()
    assert TableLease.objects.get(table_id=table_id).owner == "thief"


def test_the_lease_is_reentrant_for_its_holder(table_id):
    from tasks.lease import holder

    outer = lease(table_id, "outer")
    assert outer.acquire(0)
    assert outer.acquire(0)  # the engine re-acquiring the lock the task already holds
    outer.release()
    assert holder(table_id).owner == "outer", "the inner release keeps the outer hold"
    outer.release()
    assert holder(table_id) is None


def test_a_bad_ttl_is_refused_with_a_clear_error(table_id):
    with pytest.raises(ValueError, match="ttl must be positive"):
        lease(table_id, "x", ttl_s=0)


CONTENDER = """
import json, os, sys, threading, time
import django
django.setup()
from tasks.lease import DatabaseLease
table_id, threads, start_at = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
wins, barrier = [], threading.Barrier(threads)
def contend(i):
    mine = DatabaseLease(table_id, owner=f"p{os.getpid()}-t{i}", ttl_s=60, heartbeat_s=3600)
    barrier.wait()
    time.sleep(max(start_at - time.time(), 0))
    if mine.acquire(0):
        wins.append(mine.owner)
    from django.db import connection
    connection.close()
ts = [threading.Thread(target=contend, args=(i,)) for i in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps(wins))
"""


def test_exactly_one_of_many_concurrent_contenders_gets_the_lease(stack_env, table_id):
    from tasks.lease import holder

    start_at = time.time() + 3.0  # every process imported Django and waits at the same instant
    env = {**os.environ, **stack_env.env}
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(table_id), "5", str(start_at)], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    wins = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        wins += json.loads(out.strip().splitlines()[-1])
    assert len(wins) == 1, f"20 contenders from 4 processes, winners: {wins}"
    assert holder(table_id).owner == wins[0]


def test_two_registrations_of_one_path_share_one_lease(stack_env):
    """The lease is the physical table's: an alias (symlink) registration cannot hold it alongside."""
    from webapp.tables.models import RegisteredTable

    real = stack_env.table_root / f"real-{uuid.uuid4().hex[:8]}"
    real.mkdir()
    alias = stack_env.table_root / f"alias-{uuid.uuid4().hex[:8]}"
    alias.symlink_to(real, target_is_directory=True)
    first = RegisteredTable.objects.create(name=f"a-{uuid.uuid4().hex[:8]}", path=str(real))
    second = RegisteredTable.objects.create(name=f"b-{uuid.uuid4().hex[:8]}", path=str(alias) + "/")
    held = lease(first.pk, "first")
    other = lease(second.pk, "second")
    assert held.location == other.location == str(real)
    assert held.acquire(0)
    assert not other.acquire(0.3), "a second registration of the same folder took a second lease"
    held.release()
    assert other.acquire(0)
    other.release()


def test_a_symlink_swapped_under_a_held_lease_is_refused_at_the_engine_s_next_lock(stack_env, tmp_path):
    """The engine re-takes the lock around each critical section; a registered path that now leads
    elsewhere (a folder swapped for a link out of the roots) refuses there, before anything is written."""
    from engine import Refused
    from webapp.tables.models import RegisteredTable

    folder = stack_env.table_root / f"swap-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    table = RegisteredTable.objects.create(name=f"s-{uuid.uuid4().hex[:8]}", path=str(folder))
    held = lease(table.pk, "holder")
    assert held.acquire(0)
    folder.rmdir()
    folder.symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(Refused) as refused:
        held.acquire(0)
    assert refused.value.reason == "location_changed"
    held.release()


def test_an_owner_whose_process_is_gone_is_known_dead(stack_env):
    """On its own host a lease owner is known dead once its process (pid + start time) is gone, zombie or
    reaped; an owner on another host, or the living, never is."""
    from tasks.lease import owner_dead, owner_name

    env = {**os.environ, **stack_env.env}
    child = subprocess.Popen([sys.executable, "-c", "import django; django.setup(); from tasks.lease import owner_name; "
                              "print(owner_name('run:1'), flush=True); import time; time.sleep(60)"],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    owner = child.stdout.readline().strip()
    assert owner.startswith("run:1@") and not owner_dead(owner)
    child.kill()
    time.sleep(0.3)
    assert owner_dead(owner), "a killed (zombie) owner is dead"
    child.wait()
    assert owner_dead(owner)
    assert not owner_dead(owner_name("run:2"))
    host, pid, start, rand = owner.split("@", 1)[1].split(":")
    assert not owner_dead(f"run:1@elsewhere:{pid}:{start}:{rand}")
