"""Hudi's storage-based lock in the table's store: its object, exclusion across holders, leases that run out,
renewals, losing it, and racing takers (moto in server mode: real conditional writes)."""
from __future__ import annotations

import json
import threading
import time

import pytest

from engine.errors import TidemarkError
from engine.io import storage
from engine.io.store_lock import CLOCK_DRIFT_MS, TABLE_LOCK, LockData, StoreLock
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _object(path: str) -> dict:
    found = storage.read_tagged(path)
    assert found is not None
    return json.loads(found[0])


def test_the_lock_is_hudis_json_object_taken_then_given_back(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base, validity_s=60, renew_s=10)
    before = int(time.time() * 1000)
    assert lock.acquire(1)
    assert lock.path == f"{base}/.hoodie/.locks/{TABLE_LOCK}"
    held = _object(lock.path)
    assert held["expired"] is False and held["owner"] == lock.owner
    assert before + 60_000 <= held["validUntil"] <= int(time.time() * 1000) + 60_000
    assert lock.is_held()
    lock.release()
    given_back = _object(lock.path)
    assert given_back["expired"] is True and given_back["owner"] == lock.owner
    assert not lock.is_held()


def test_a_second_holder_is_kept_out_until_the_first_gives_it_back(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    first, second = StoreLock(base), StoreLock(base)
    assert first.acquire(1)
    t0 = time.monotonic()
    assert not second.acquire(0.6)
    assert time.monotonic() - t0 >= 0.6   # it waited, trying again
    assert first.owner in second.holder()
    first.release()
    assert second.acquire(0)
    second.release()


def test_a_dead_holders_lease_runs_out_and_is_taken_over(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    taker = StoreLock(base)
    dead = LockData(False, int(time.time() * 1000) - CLOCK_DRIFT_MS - 1000, "a-java-writer-that-died")
    storage.create_exclusive(taker.path, dead.to_bytes())
    assert taker.acquire(0)
    assert _object(taker.path)["owner"] == taker.owner
    taker.release()
    # a lease within the clock allowance still counts as running
    storage.write_bytes(taker.path, LockData(False, int(time.time() * 1000) - 100, "just-expired").to_bytes())
    assert not StoreLock(base).acquire(0)


def test_a_lock_given_back_here_is_taken_again_with_one_request(s3_env):  # noqa: F811
    """The next taker in this process tries the ETag of the lease it gave back: one conditional write, no read —
    unless another holder changed the object since, which that write finds out."""
    base, server = f"{s3_env['bucket_uri']}/t", s3_env["server"]
    first = StoreLock(base)
    assert first.acquire(1)
    first.release()
    server.reset_counts()
    again = StoreLock(base)
    assert again.acquire(0)
    assert [r["method"] for r in server.counts()] == ["PUT"]
    again.release()
    elsewhere = StoreLock(base)   # another host: it took and gave back the lock since
    _, etag = storage.read_tagged(elsewhere.path)
    storage.replace_if_match(elsewhere.path, LockData(True, int(time.time() * 1000), "another-host").to_bytes(), etag)
    server.reset_counts()
    last = StoreLock(base)
    assert last.acquire(0)
    assert [r["method"] for r in server.counts()] == ["PUT", "GET", "PUT"]   # refused, then read and taken
    last.release()


def test_the_holder_renews_its_lease_past_its_validity(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base, validity_s=1.0, renew_s=0.2)
    assert lock.acquire(1)
    first_until = _object(lock.path)["validUntil"]
    time.sleep(1.5)
    assert lock.is_held()
    assert _object(lock.path)["validUntil"] > first_until
    assert not StoreLock(base).acquire(0)
    lock.release()


def test_a_lease_taken_over_is_lost_and_never_given_back(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base, validity_s=1.0, renew_s=0.2)
    assert lock.acquire(1)
    # another host found the lease run out (a paused holder) and replaced it
    _, etag = storage.read_tagged(lock.path)
    other = LockData(False, int(time.time() * 1000) + 60_000, "another-host")
    storage.replace_if_match(lock.path, other.to_bytes(), etag)
    deadline = time.monotonic() + 3
    while lock.is_held() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not lock.is_held()   # its next renewal was refused
    lock.release()
    assert _object(lock.path) == json.loads(other.to_bytes())   # the new holder's lease untouched


def test_of_takers_racing_for_a_free_lock_exactly_one_wins(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    locks = [StoreLock(base) for _ in range(6)]
    start = threading.Barrier(len(locks))
    won: list[StoreLock] = []

    def take(lock: StoreLock) -> None:
        start.wait()
        if lock.acquire(0):
            won.append(lock)

    threads = [threading.Thread(target=take, args=(lock,)) for lock in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert _object(won[0].path)["owner"] == won[0].owner
    won[0].release()


def test_a_take_or_renewal_whose_answer_was_lost_is_recognised_as_ours(s3_env):  # noqa: F811
    """A conditional write of ours that landed though botocore never saw its answer leaves our own lease in the
    object under an ETag we do not know: the next try adopts it instead of waiting on itself (acquire) or counting
    the lock as lost (renewal) — either would block every host until the lease ran out."""
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base, validity_s=3.0, renew_s=0.3)
    storage.create_exclusive(lock.path, LockData(False, int(time.time() * 1000) + 3000, lock.owner).to_bytes())
    assert lock.acquire(0)   # our own take, landed: adopted
    # a renewal that landed with its answer lost: the object holds our lease under another ETag
    storage.write_bytes(lock.path, LockData(False, int(time.time() * 1000) + 3000, lock.owner).to_bytes())
    time.sleep(1.0)   # renewals go on from the adopted ETag
    assert lock.is_held()
    assert _object(lock.path)["owner"] == lock.owner and _object(lock.path)["validUntil"] > time.time() * 1000 + 2000
    lock.release()
    assert _object(lock.path)["expired"] is True


def test_a_missing_bucket_is_an_error_not_a_lost_race(s3_env):  # noqa: F811
    path = "s3://no-such-bucket-here/t/.hoodie/.locks/table_lock.json"
    for put in (lambda: storage.create_exclusive(path, b"{}"), lambda: storage.replace_if_match(path, b"{}", '"x"')):
        with pytest.raises(TidemarkError) as failed:
            put()
        assert not isinstance(failed.value, storage.PublishConflict)


def test_a_lock_object_that_is_not_hudis_names_itself(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base)
    storage.write_bytes(lock.path, b"not json")
    with pytest.raises(TidemarkError, match=r"table_lock\.json is not a Hudi storage lock"):
        lock.acquire(0)


def test_only_a_store_with_conditional_writes_can_hold_it(s3_env, tmp_path, monkeypatch):  # noqa: F811
    with pytest.raises(TidemarkError, match="needs an object store with conditional writes"):
        StoreLock(str(tmp_path))
    monkeypatch.setenv("TIDEMARK_S3_CONDITIONAL_PUT", "false")
    with pytest.raises(TidemarkError, match="needs an object store with conditional writes"):
        StoreLock(f"{s3_env['bucket_uri']}/t")


# --- parsing strictly: a lock no one can read is never a free one ------------------------------------------------

@pytest.mark.parametrize(("expired", "valid_until", "taken"), [
    ("false", None, False),     # Java's reader (Jackson) coerces the string: a running lease, respected
    (False, None, False),
    ("true", None, True),       # given back
    (True, None, True),
])
def test_expired_as_java_reads_it(s3_env, expired, valid_until, taken):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base)
    until = int(time.time() * 1000) + 3_600_000
    storage.write_bytes(lock.path, json.dumps({"expired": expired, "validUntil": until, "owner": "java"}).encode())
    assert lock.acquire(0) is taken
    if taken:
        lock.release()


@pytest.mark.parametrize("doc", [
    {"expired": "maybe", "validUntil": 1, "owner": "x"},
    {"expired": 0, "validUntil": 1, "owner": "x"},
    {"expired": None, "validUntil": 1, "owner": "x"},
    {"expired": False, "validUntil": 1.5, "owner": "x"},
    {"expired": False, "validUntil": True, "owner": "x"},
    {"expired": False, "validUntil": "soon", "owner": "x"},
    {"expired": False, "validUntil": 1, "owner": 7},
    ["not", "an", "object"],
])
def test_a_lock_with_fields_of_the_wrong_type_is_unreadable_not_free(s3_env, doc):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base)
    storage.write_bytes(lock.path, json.dumps(doc).encode())
    with pytest.raises(TidemarkError, match=r"table_lock\.json is not a Hudi storage lock"):
        lock.acquire(0)
    assert storage.read_bytes(lock.path) == json.dumps(doc).encode()   # left as it was


def test_a_string_valid_until_of_digits_is_read_as_java_does():
    data = LockData.parse(b'{"expired": false, "validUntil": "1700000000000", "owner": "o"}', "p")
    assert data == LockData(False, 1_700_000_000_000, "o")


# --- fencing: the lock object itself is asked before a publish ----------------------------------------------------

def test_the_fence_passes_for_the_holder_with_one_conditional_head(s3_env):  # noqa: F811
    base, server = f"{s3_env['bucket_uri']}/t", s3_env["server"]
    lock = StoreLock(base, validity_s=60, renew_s=10)
    assert lock.acquire(1)
    server.reset_counts()
    assert lock.fence() is None
    assert [r["method"] for r in server.counts()] == ["HEAD"]
    lock.release()
    assert lock.fence() == f"{lock.path} is not held by this process"


def test_a_deleted_lock_object_fails_the_fence_at_once(s3_env):  # noqa: F811
    """Deleted between the last renewal and the publish: the holder's own copy still says held."""
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base, validity_s=60, renew_s=10)
    assert lock.acquire(1)
    storage.remove(lock.path)
    assert lock.is_held()   # what the holder believes without asking
    assert lock.fence() == f"{lock.path} was deleted (no one holds it now)"
    assert not lock.is_held()
    taker = StoreLock(base)
    assert taker.acquire(0)
    lock.release()   # lost: nothing given back over the new holder's lease
    assert _object(lock.path)["owner"] == taker.owner and _object(lock.path)["expired"] is False
    taker.release()


def test_a_lock_object_replaced_by_another_owner_fails_the_fence_naming_it(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base, validity_s=60, renew_s=10)
    assert lock.acquire(1)
    _, etag = storage.read_tagged(lock.path)
    until = int(time.time() * 1000) + 60_000
    storage.replace_if_match(lock.path, LockData(False, until, "another-host").to_bytes(), etag)
    why = lock.fence()
    assert why is not None and why.startswith(f"{lock.path} is now held by another-host until 20")
    assert time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until / 1000)) in why
    lock.release()
    assert _object(lock.path)["owner"] == "another-host"


def test_a_renewal_that_landed_meanwhile_passes_the_fence(s3_env):  # noqa: F811
    """The object holds this holder's own running lease under an ETag it has not seen yet (its renewer's PUT
    landed between the snapshot and the HEAD, or its answer was lost): still held, and adopted."""
    base = f"{s3_env['bucket_uri']}/t"
    lock = StoreLock(base, validity_s=60, renew_s=10)
    assert lock.acquire(1)
    storage.write_bytes(lock.path, LockData(False, int(time.time() * 1000) + 60_000, lock.owner).to_bytes())
    assert lock.fence() is None
    assert lock.fence() is None   # the new ETag adopted: one HEAD again
    lock.release()
    assert _object(lock.path)["expired"] is True


def test_the_fence_refuses_a_lease_with_less_than_the_margin_left(s3_env, monkeypatch):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/t"
    monkeypatch.setenv("TIDEMARK_LOCK_FENCE_MARGIN", "45")
    lock = StoreLock(base, validity_s=60, renew_s=10)
    assert lock.margin_ms == 45_000
    assert lock.acquire(1)
    assert lock.fence() is None
    with lock._guard:   # as if renewals had failed for a while: 40 s of lease left, under the margin of 45 s
        lock._valid_until_ms = int(time.time() * 1000) + 40_000
    why = lock.fence()
    assert why is not None and "under the safety margin of 45000 ms (TIDEMARK_LOCK_FENCE_MARGIN)" in why
    assert not lock.is_held()
    lock.release()
    monkeypatch.setenv("TIDEMARK_LOCK_FENCE_MARGIN", "55")
    with pytest.raises(TidemarkError, match="safety margin 55 s .* must be shorter than its lease 60 s"):
        StoreLock(base, validity_s=60, renew_s=10)
    monkeypatch.setenv("TIDEMARK_LOCK_FENCE_MARGIN", "soon")
    with pytest.raises(TidemarkError, match="must be a number of seconds"):
        StoreLock(base)
