"""A lock kept in the table's own object store: Hudi's storage-based lock (`StorageBasedLockProvider`, Hudi
1.0.2+), so that processes on different hosts — Tidemark's CLI, its control plane, Java Hudi writers configured
with that provider — serialise their changes to one table with no service besides the store.

The lock is one small JSON object, `<table>/.hoodie/.locks/table_lock.json`, in Hudi's own form:
`{"expired": false, "validUntil": <epoch ms>, "owner": "<id>"}`. Every change to it is a conditional write,
which the store arbitrates: taking a free lock creates it (`If-None-Match: *`) or replaces the expired one that
was read (`If-Match: <its ETag>`); of two hosts racing, the store refuses the second. The holder renews its
lease (`validUntil`) every renew interval, again with `If-Match`, and gives it back by writing `expired: true`.
A holder that dies stops renewing: its lease runs out and the next taker replaces it. A holder whose renewal
is refused (the lease ran out and another host took it) has lost the lock: `is_held` turns False, and
`engine.lock.ensure_held` then refuses to publish.

A renewal finds a lost lease only every renew interval, so before every publish the holder also fences
(`fence`): a conditional HEAD (`If-Match: <the ETag it holds>`) proves the lock object is still its own lease,
and the lease has at least the safety margin left (`TIDEMARK_LOCK_FENCE_MARGIN`). A deleted or replaced object
is a lost lock at once. What this cannot promise (docs/ARCHITECTURE.md): a pause longer than the margin
between the fence and the publish's PUT.

Hosts' clocks are compared through `validUntil`: like Hudi, a lease counts as running until 500 ms past it,
so clocks must agree within that (one cloud's NTP does).
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from engine import env
from engine.errors import TidemarkError
from engine.io import storage

PROVIDER = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
LOCKS_FOLDER = ".hoodie/.locks"
TABLE_LOCK = "table_lock.json"            # Hudi's name: Java writers with this provider take the same lock
# Tidemark's run lock (one run of a plan at a time), held for a whole compaction run, apart from the table lock.
COMPACTION_LOCK = "tidemark_compaction_lock.json"
CLOCK_DRIFT_MS = 500                      # Hudi's allowance for clocks that disagree
VALIDITY_S = 300                          # hoodie.write.lock.storage.validity.timeout.secs' default
RENEW_S = 30                              # hoodie.write.lock.storage.renew.interval.secs' default
POLL_S = 0.25                             # the first pause between tries while the lock is held elsewhere,
MAX_POLL_S = 2.0                          # doubled up to this
# A lease outlasts this many renew intervals at least: one renewal may fail and be retried, and a holder still
# counts as holding (half an interval of lease left) while the next one is on its way.
MIN_RENEWALS_PER_LEASE = 3
# The least lease left at a fence for the publish after it to go ahead (seconds): the longest pause it survives
# between the fence and the PUT. Unset, half a renew interval (a renewal may be on its way meanwhile).
FENCE_MARGIN_ENV = "TIDEMARK_LOCK_FENCE_MARGIN"
GIVE_BACK_TRIES = 3                       # a give-back the store did not answer is tried again (else it blocks
                                          # every host until the lease runs out)


# lock object -> the ETag of the expired lease this process last wrote to give it back: the next taker here tries
# that ETag first (one request where a read and a write were needed), as long as no one else changed the object.
_GIVEN_BACK: dict[str, str] = {}
_GIVEN_BACK_GUARD = threading.Lock()


def _given_back(path: str) -> str | None:
    with _GIVEN_BACK_GUARD:
        return _GIVEN_BACK.get(path)


def _remember_given_back(path: str, etag: str) -> None:
    with _GIVEN_BACK_GUARD:
        _GIVEN_BACK[path] = etag


def _forget_given_back(path: str) -> None:
    with _GIVEN_BACK_GUARD:
        _GIVEN_BACK.pop(path, None)


def _forget_after_fork() -> None:
    # a child forked while another thread held the guard would wait on it forever; what was given back stays true
    global _GIVEN_BACK_GUARD
    _GIVEN_BACK_GUARD = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _now_ms() -> int:
    return int(time.time() * 1000)


class LockObjectError(TidemarkError):
    """The lock object holds something else than a Hudi storage lock: no one can take it until it is removed."""


@dataclass(frozen=True)
class LockData:
    """The lock object's content, as Hudi's `StorageLockData` writes and reads it."""

    expired: bool
    valid_until_ms: int
    owner: str

    def to_bytes(self) -> bytes:
        return json.dumps({"expired": self.expired, "validUntil": self.valid_until_ms,
                           "owner": self.owner}).encode("utf-8")

    @classmethod
    def parse(cls, data: bytes, path: str) -> LockData:
        try:
            doc = json.loads(data.decode("utf-8"))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            return cls(_strict_bool(doc["expired"], "expired"), _strict_ms(doc["validUntil"]),
                       _strict_str(doc["owner"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise LockObjectError(f"{path} is not a Hudi storage lock ({exc}); if no writer of this table is running, "
                                "remove it") from None

    def running(self, now_ms: int) -> bool:
        """Whether this lease still holds the lock, whoever's clock is a little ahead."""
        return not self.expired and now_ms <= self.valid_until_ms + CLOCK_DRIFT_MS


def _strict_bool(value: object, field: str) -> bool:
    """A JSON boolean, or the strings "true"/"false" Java's reader (Jackson) coerces; anything else is refused:
    `bool("false")` is True, and a lock read as expired by mistake is taken from its holder."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{field} is {value!r}, not a boolean")


def _strict_ms(value: object) -> int:
    """Epoch milliseconds: a JSON integer, or a string of digits (Jackson coerces it); never a boolean or a
    fraction, which would read as some other moment."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise ValueError(f"validUntil is {value!r}, not an integer")


def _strict_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"owner is {value!r}, not a string")
    return value


def fence_margin_s(renew_s: float) -> float:
    """The safety margin (seconds): `TIDEMARK_LOCK_FENCE_MARGIN`, else half a renew interval."""
    return env.number(FENCE_MARGIN_ENV, renew_s / 2, unit="seconds", minimum=0, exclusive=False)


def _until_text(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def current(base_path: str, name: str = TABLE_LOCK) -> LockData | None:
    """The table's lock object as it is now (None: never taken)."""
    path = storage.join(base_path, LOCKS_FOLDER, name)
    found = storage.read_tagged(path)
    return None if found is None else LockData.parse(found[0], path)


class StoreLock:
    """One lock object of a table (`name` in `.hoodie/.locks/`), as a `engine.lock.TableLock`. Not re-entrant:
    a holder that asks again waits for itself, as a `FileLock` does."""

    def __init__(self, base_path: str, name: str = TABLE_LOCK, validity_s: float = VALIDITY_S,
                 renew_s: float = RENEW_S, margin_s: float | None = None) -> None:
        if not storage.conditional_replace(base_path):
            raise TidemarkError(f"{base_path}: the storage-based lock ({PROVIDER}) needs an object store with "
                                "conditional writes (S3)")
        if validity_s <= 0 or renew_s <= 0:
            raise TidemarkError(f"storage lock validity {validity_s:g} s and renew interval {renew_s:g} s must be "
                                "positive")
        # Settings refuse a lease shorter than three renewals; one stored otherwise (by hand, by another tool) renews
        # three times per lease instead of failing every operation — including the settings update that would mend it.
        renew_s = min(renew_s, validity_s / MIN_RENEWALS_PER_LEASE)
        margin = fence_margin_s(renew_s) if margin_s is None else margin_s
        if margin >= validity_s - renew_s:
            # a renewed lease has validity minus up to one renew interval left: the fence would refuse every publish
            raise TidemarkError(f"the storage lock's safety margin {margin:g} s ({FENCE_MARGIN_ENV}) must be shorter "
                                f"than its lease {validity_s:g} s minus a renew interval {renew_s:g} s")
        self.path = storage.join(base_path, LOCKS_FOLDER, name)
        self.validity_ms = int(validity_s * 1000)
        self.renew_s = renew_s
        self.margin_ms = int(margin * 1000)
        self.owner = f"tidemark-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4()}"
        self._guard = threading.Lock()       # the ETag and lease, shared with the renewing thread
        self._etag: str | None = None
        self._valid_until_ms = 0
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.seen_holder: LockData | None = None   # the lease that kept the last acquire out

    def acquire(self, timeout_s: float) -> bool:
        if self._etag is not None:
            raise RuntimeError(f"{self!r} is already held; a StoreLock is not re-entrant")
        deadline = time.monotonic() + timeout_s
        pause = POLL_S
        while True:
            try:
                if self._try_once():
                    break
            except LockObjectError:
                raise
            except Exception as exc:  # noqa: BLE001 - the store did not answer: try again while there is time
                if time.monotonic() >= deadline:
                    raise TidemarkError(f"could not read or write the lock {self.path}: {exc}") from exc
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, MAX_POLL_S)   # a long wait asks the store less and less often
        try:
            self._stop.clear()
            self._renewer = threading.Thread(target=self._renew_until_released, name="tidemark-store-lock",
                                             daemon=True)
            self._renewer.start()
        except BaseException:
            self.release()
            raise
        return True

    def _try_once(self) -> bool:
        """One try: take the lock when no running lease holds it; False when one does or another host won."""
        given_back = _given_back(self.path)
        if given_back is not None:
            # Still the lease this process gave back (no one took the lock since)? Then one conditional write
            # takes it, no read first.
            lease = LockData(False, _now_ms() + self.validity_ms, self.owner)
            try:
                self._took(storage.replace_if_match(self.path, lease.to_bytes(), given_back), lease)
                return True
            except storage.PublishConflict:
                _forget_given_back(self.path)   # taken (and maybe given back) by another since: read it now
        found = storage.read_tagged(self.path)
        if found is not None:
            held = LockData.parse(found[0], self.path)
            if held.running(_now_ms()) and held.owner == self.owner:
                # our own take, whose answer was lost after it landed (the try before this one failed)
                self._took(found[1], held)
                return True
            if held.running(_now_ms()):
                self.seen_holder = held
                return False
        lease = LockData(False, _now_ms() + self.validity_ms, self.owner)
        try:
            # on S3 with conditional writes (the constructor's condition) a create gives its ETag
            etag = storage.create_exclusive(self.path, lease.to_bytes()) if found is None else \
                storage.replace_if_match(self.path, lease.to_bytes(), found[1])
        except storage.PublishConflict:
            return False   # another host took it between our read and our write
        self._took(etag or "", lease)
        return True

    def _took(self, etag: str, lease: LockData) -> None:
        _forget_given_back(self.path)
        with self._guard:
            self._etag, self._valid_until_ms = etag, lease.valid_until_ms

    def _renew_until_released(self) -> None:
        """Every renew interval, extend the lease; a renewal the store did not answer is tried again soon (the lease
        left must outlast the tries). The request is made outside the guard: `is_held` never waits on the store."""
        wait = self.renew_s
        while not self._stop.wait(wait):
            with self._guard:
                etag = self._etag
            if etag is None:
                return
            lease = LockData(False, _now_ms() + self.validity_ms, self.owner)
            try:
                renewed = storage.replace_if_match(self.path, lease.to_bytes(), etag)
            except storage.PublishConflict:
                try:
                    own = self._own_lease()   # a renewal of ours whose answer was lost changed the ETag?
                except LockObjectError:
                    own = None
                except Exception:  # noqa: BLE001 - the store did not answer: ask again soon
                    wait = min(POLL_S * 4, self.renew_s)
                    continue
                if own is None:
                    with self._guard:
                        self._valid_until_ms = 0   # replaced by another host: lost for good
                    return
                renewed, lease = own[0], LockData(False, own[1], self.owner)
            except Exception:  # noqa: BLE001 - the store did not answer: again soon, while the lease lasts
                wait = min(POLL_S * 4, self.renew_s)
                continue
            with self._guard:
                if self._etag == etag:   # not released meanwhile
                    self._etag, self._valid_until_ms = renewed, lease.valid_until_ms
            wait = self.renew_s

    def _own_lease(self) -> tuple[str, int] | None:
        """(ETag, validUntil) of the lock object when it holds a running lease of this holder's — a write of ours
        that landed though its answer was lost — else None."""
        found = storage.read_tagged(self.path)
        if found is None:
            return None
        held = LockData.parse(found[0], self.path)
        if held.owner != self.owner or not held.running(_now_ms()):
            return None
        return found[1], held.valid_until_ms

    def is_held(self) -> bool:
        """Held, as far as this process knows, with the safety margin of lease left at least: a caller that
        publishes next does so before the lease can run out, even if renewals are failing meanwhile. Asks the
        store nothing; `fence` does."""
        with self._guard:
            return self._etag is not None and _now_ms() + self.margin_ms < self._valid_until_ms

    def fence(self) -> str | None:
        """Prove, just before a publish, that the lock object is still this holder's lease (a conditional HEAD on
        the ETag held) and that the margin of lease is left: None then; else why not, in words naming the lock and
        who holds it now (the lock then counts as lost: no renewal, no give-back over another's lease)."""
        with self._guard:
            etag, until = self._etag, self._valid_until_ms
        if etag is None:
            return f"{self.path} is not held by this process"
        if until == 0:
            return self._lost_to(self._seen_now(None))   # a renewal was refused: another host took it
        try:
            same = storage.still_tagged(self.path, etag)
            # Another ETag may still be our lease: a renewal that landed meanwhile (or whose answer was lost).
            found = None if same else storage.read_tagged(self.path)
        except Exception as exc:  # noqa: BLE001 - unproven is not held: publishing blind is what fencing stops
            return f"{self.path} could not be checked ({exc}); this process may no longer hold it"
        if not same:
            own = self._own(found)
            if own is None:
                return self._lost_to(self._seen_now(found))
            with self._guard:
                if self._etag is None or self._valid_until_ms == 0:
                    return f"{self.path} was given up by this process meanwhile"
                self._etag, self._valid_until_ms = own[1], own[0].valid_until_ms
                until = own[0].valid_until_ms
        left = until - _now_ms()
        if left < self.margin_ms:
            return (f"{self.path}: this process's lease has {max(left, 0)} ms left, under the safety margin of "
                    f"{self.margin_ms} ms ({FENCE_MARGIN_ENV}); no one else took it yet")
        return None

    def _own(self, found: tuple[bytes, str] | None) -> tuple[LockData, str] | None:
        """The lock object's lease and ETag when it is a running lease of this holder's."""
        if found is None:
            return None
        try:
            held = LockData.parse(found[0], self.path)
        except LockObjectError:
            return None
        return (held, found[1]) if held.owner == self.owner and held.running(_now_ms()) else None

    def _seen_now(self, found: tuple[bytes, str] | None) -> str:
        """Who holds the lock object now (`found`, else read again), for a lost holder's message."""
        try:
            found = found or storage.read_tagged(self.path)
        except Exception as exc:  # noqa: BLE001 - the message says so; the lock counts as lost either way
            return f"{self.path} changed and could not be read again ({exc})"
        if found is None:
            return f"{self.path} was deleted (no one holds it now)"
        try:
            now = LockData.parse(found[0], self.path)
        except LockObjectError:
            return f"{self.path} was replaced by something that is not a Hudi storage lock"
        if now.expired or not now.running(_now_ms()):
            return f"{self.path} holds a lease that ran out or was given back (last {now.owner}, until " \
                   f"{_until_text(now.valid_until_ms)})"
        return f"{self.path} is now held by {now.owner} until {_until_text(now.valid_until_ms)}"

    def _lost_to(self, why: str) -> str:
        with self._guard:
            self._valid_until_ms = 0   # lost for good: the renewer stops, release gives nothing back
        return why

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        with self._guard:
            etag, self._etag = self._etag, None
            held = self._valid_until_ms > _now_ms()
            self._valid_until_ms = 0
        if etag is None or not held:
            return   # never held, or lost: the object is another holder's now (or an expired lease anyway)
        for attempt in range(GIVE_BACK_TRIES):
            try:
                _remember_given_back(self.path, storage.replace_if_match(
                    self.path, LockData(True, _now_ms(), self.owner).to_bytes(), etag))
                return
            except storage.PublishConflict:
                return   # taken over meanwhile: nothing of ours to give back
            except Exception:  # noqa: BLE001 - the store did not answer: again, then the lease runs out by itself
                if attempt + 1 < GIVE_BACK_TRIES:
                    time.sleep(POLL_S * 2 ** attempt)

    def holder(self) -> str:
        """Who kept the last acquire out, for the message of whoever waited in vain."""
        seen = self.seen_holder
        if seen is None:
            return f"another writer ({self.path})"
        return f"{seen.owner}, lease until {_until_text(seen.valid_until_ms)} ({self.path})"

    def __repr__(self) -> str:
        return f"StoreLock({self.path!r})"
