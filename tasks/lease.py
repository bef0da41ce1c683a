"""The per-table database lease: the engine's `TableLock`, shared by every worker on every host.

A lease belongs to the *physical* table, not to a registration: its `TableLease` row is keyed by the
table's canonical location (tasks.location: symlinks resolved), so two registrations of one path share one
lease and can never plan on one timeline at once. The registration that took it is recorded for messages.
Each re-entrant acquire — the engine taking the lock the task already holds, around each of its critical
sections — re-checks both that the row is still ours and that the registered path still resolves to the
location the lease was taken for (a symlink swapped mid-run is refused, `location_changed`).

A lease is one `TableLease` row: an owner, when it was acquired, its last heartbeat and when
it expires. Whoever holds an unexpired lease may change the table's timeline; anyone may take a lease
that has expired. The holder renews it from a heartbeat thread, so a worker that is killed (kill -9, lost
host) stops renewing and its lease lapses after `ttl_s` — a table is never blocked forever (Amoro's table
blocker: expiration + renew; Hudi's heartbeats: an expired heartbeat means the writer is gone).

Taking the row is one transaction:
- PostgreSQL: `SELECT ... FOR UPDATE` locks the row, we decide (free, expired, or already ours) and write
  our ownership before the transaction ends, so two workers can never both see it free.
- SQLite has no row locks (`select_for_update` is a no-op), so the decision is folded into one atomic
  compare-and-set: `UPDATE ... WHERE table = t AND (expires_at < now OR owner = me)`; SQLite runs writes
  one at a time, so exactly one contender's UPDATE matches.
Renewal and release are compare-and-sets on the owner too, so a lease stolen after expiry is never renewed
or released by its old holder, and `is_held()` turns False for it.

The lease is re-entrant for its own object: a task holds it around a whole engine call, and the engine
may acquire/release the same lock around its critical sections inside that call.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.conf import settings
from django.db import OperationalError, close_old_connections, connection, connections, transaction
from django.db.models import Q
from django.utils import timezone

from engine import Refused, env
from tasks import location as locations
from webapp.tables.models import RegisteredTable, TableLease

log = logging.getLogger(__name__)

DEFAULT_TTL_S = settings.TIDEMARK_LEASE_TTL_S
# How long a run waits for another owner's lease before it is refused (the serial trigger refuses rather
# than queueing behind a compaction; a short wait absorbs a lease hand-over).
DEFAULT_WAIT_S = env.number("TIDEMARK_LEASE_WAIT", 2.0, unit="seconds", minimum=0, exclusive=False)
RUN_OWNER_PREFIX = "run:"
POLL_S = 0.2                        # how often a waiting acquire retries
FREE = ""                           # owner of a released lease
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_SQLITE_BUSY_RETRIES = 50           # "database is locked" under heavy write contention is transient


@dataclass(frozen=True)
class Holder:
    """Who holds a table's lease right now (for refusal messages)."""

    owner: str
    acquired_at: dt.datetime | None
    expires_at: dt.datetime


def _process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22); "" when unknown or
    when the process is gone — a zombie (killed, not yet reaped) counts as gone.

    pid + start time name one process for the life of the host, even after its pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return ""
    return fields[19]


def owner_name(label: str = "") -> str:
    """A globally unique owner: `<label>@<host>:<pid>:<start>:<random>` (label names the run, e.g. `run:42`)."""
    pid = os.getpid()
    return f"{label}@{socket.gethostname()}:{pid}:{_process_start(pid)}:{uuid.uuid4().hex[:8]}"


def owner_dead(owner: str) -> bool:
    """Known dead: the owner ran on this host and its process (pid and start time) no longer exists.

    False when it cannot be known (another host, an owner name without a start time): such a lease is
    only ever taken after it expires."""
    _, _, where = owner.rpartition("@")
    parts = where.split(":")
    if len(parts) != 4 or parts[0] != socket.gethostname() or not parts[1].isdigit() or not parts[2]:
        return False
    return _process_start(int(parts[1])) != parts[2]


def run_owner(run_id: int) -> str:
    """The owner name of a run's lease: `run:<id>@...`, so a sweep can tell whose lease lapsed."""
    return owner_name(f"{RUN_OWNER_PREFIX}{run_id}")


def run_of_owner(owner: str) -> int | None:
    """The run id in a `run_owner` name (None for other owners)."""
    if not owner.startswith(RUN_OWNER_PREFIX):
        return None
    head = owner[len(RUN_OWNER_PREFIX):].split("@", 1)[0]
    return int(head) if head.isdigit() else None


T = TypeVar("T")


def _retry_when_busy(fn: Callable[[], T]) -> T:
    """Run `fn()`, retrying while SQLite reports the database locked (a writer holds it briefly)."""
    for attempt in range(_SQLITE_BUSY_RETRIES):
        try:
            return fn()
        except OperationalError as exc:
            if connection.vendor != "sqlite" or "locked" not in str(exc) or attempt == _SQLITE_BUSY_RETRIES - 1:
                raise
            time.sleep(0.05 + 0.01 * attempt)
    raise AssertionError("unreachable")


class DatabaseLease:
    """The `TableLock` of one table backed by its `TableLease` row; see the module docstring."""

    def __init__(self, table_id: int, owner: str | None = None, ttl_s: float = DEFAULT_TTL_S,
                 heartbeat_s: float | None = None, path: str | None = None) -> None:
        if ttl_s <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl_s}")
        self.table_id = table_id
        # The registered path as given (re-resolved on every re-entry) and the location it resolved to.
        self.path = path if path is not None else RegisteredTable.objects.values_list("path", flat=True).get(pk=table_id)
        self.location = locations.canonical(self.path)
        self.owner = owner or owner_name()
        self.ttl = dt.timedelta(seconds=ttl_s)
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else ttl_s / 3
        self._depth = 0
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._lost = threading.Event()

    # ------------------------------------------------------------------ TableLock protocol

    def acquire(self, timeout_s: float) -> bool:
        """Take the lease, waiting up to `timeout_s`; False when another live owner keeps it."""
        if self._depth and self.is_held():
            self._ensure_same_location()
            self._depth += 1
            return True
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while True:
            if _retry_when_busy(self._take):
                self._depth = 1
                self._lost.clear()
                self._start_heartbeat()
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(POLL_S, max(deadline - time.monotonic(), 0.0)) or POLL_S / 10)

    def release(self) -> None:
        """Give the lease back (the outermost release frees the row; a stolen lease is left alone)."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth:
            return
        self._stop_heartbeat()
        now = timezone.now()
        _retry_when_busy(lambda: TableLease.objects.filter(location=self.location, owner=self.owner)
                         .update(owner=FREE, expires_at=now, heartbeat_at=now))

    def is_held(self) -> bool:
        """Still ours: the row names us and has not expired (False once stolen or lapsed)."""
        if self._lost.is_set():
            return False
        return TableLease.objects.filter(location=self.location, owner=self.owner,
                                         expires_at__gt=timezone.now()).exists()

    def _ensure_same_location(self) -> None:
        """Refuse when the registered path no longer leads to the table this lease guards (link swapped)."""
        now_at = locations.canonical(self.path)
        if now_at != self.location:
            raise Refused(locations.LOCATION_CHANGED,
                          f"table path {self.path} now resolves to {now_at}, not {self.location} as when its lease "
                          "was taken; nothing was done")

    # ------------------------------------------------------------------ taking the row

    def _ensure_row(self) -> None:
        """The location's lease row exists (created free; concurrent creators converge on one row)."""
        TableLease.objects.get_or_create(location=self.location,
                                         defaults={"table_id": self.table_id, "owner": FREE, "expires_at": EPOCH})

    def _take(self) -> bool:
        self._ensure_row()
        if connection.features.has_select_for_update:
            return self._take_row_locked()
        return self._take_compare_and_set()

    def _take_row_locked(self) -> bool:
        """PostgreSQL: lock the row, check it is free/expired/ours, write our ownership, commit."""
        with transaction.atomic():
            row = TableLease.objects.select_for_update().get(location=self.location)
            now = timezone.now()
            if row.owner not in (FREE, self.owner) and row.expires_at > now:
                return False
            row.owner, row.acquired_at, row.heartbeat_at, row.expires_at = self.owner, now, now, now + self.ttl
            row.table_id = self.table_id
            row.save(update_fields=["owner", "acquired_at", "heartbeat_at", "expires_at", "table"])
            return True

    def _take_compare_and_set(self) -> bool:
        """SQLite: one conditional UPDATE; writes are serialised, so exactly one contender matches."""
        now = timezone.now()
        claimable = Q(owner=FREE) | Q(owner=self.owner) | Q(expires_at__lte=now)
        taken = (TableLease.objects.filter(claimable, location=self.location)
                 .update(owner=self.owner, acquired_at=now, heartbeat_at=now, expires_at=now + self.ttl,
                         table_id=self.table_id))
        return taken == 1

    # ------------------------------------------------------------------ heartbeat

    def renew(self) -> bool:
        """Push the expiry out by one ttl if the lease is still ours; False (and lost) otherwise."""
        now = timezone.now()
        renewed = _retry_when_busy(lambda: TableLease.objects
                                   .filter(location=self.location, owner=self.owner, expires_at__gt=now)
                                   .update(heartbeat_at=now, expires_at=now + self.ttl))
        if not renewed:
            self._lost.set()
        return renewed == 1

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name=f"lease-heartbeat-{self.table_id}",
                                      daemon=True)
        self._beat.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None

    def _heartbeat(self) -> None:
        """Renew every `heartbeat_s` until stopped or the lease is lost (then the run must not commit)."""
        try:
            while not self._stop.wait(self.heartbeat_s):
                try:
                    if not self.renew():
                        log.warning("lease on table %s lost by %s (expired or taken over)", self.table_id, self.owner)
                        return
                except Exception:  # a DB hiccup: keep trying until the lease actually lapses
                    log.exception("lease heartbeat failed for table %s", self.table_id)
                    close_old_connections()
        finally:
            connections.close_all()  # this thread's own connection


def holder(table_id: int) -> Holder | None:
    """The current live holder of the lease on a registered table's location, or None when free or expired."""
    path = RegisteredTable.objects.values_list("path", flat=True).get(pk=table_id)
    return holder_at(locations.canonical(path))


def holder_at(location: str) -> Holder | None:
    """The current live holder of the lease on a canonical location, or None when free or expired."""
    row = TableLease.objects.filter(location=location).first()
    if row is None or row.owner == FREE or row.expires_at <= timezone.now():
        return None
    return Holder(row.owner, row.acquired_at, row.expires_at)
