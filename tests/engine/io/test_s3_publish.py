"""Atomic publish on S3: a completed instant appears exactly once, whole, or not at all.

Two writers racing to complete the same instant (threads released together, real concurrent PUTs against the
moto server): the store's `If-None-Match: *` lets exactly one win; the other is refused (`already_published`)
and the winner's bytes stand, whole; hudi 0.5.0 reads the table. A store without conditional writes is refused
unless a lock outside the store is held.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from engine import Table
from engine.errors import ALREADY_PUBLISHED, UNSAFE_PUBLISH, Refused
from engine.io import storage
from engine.io.storage import s3_api
from engine.lock import holding
from engine.timeline.instants import DELTACOMMIT, Timeline, complete, create_requested, transition_to_inflight
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _table(uri: str, tmp: Path) -> Table:
    table = Table.create(uri, name="race", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={"hoodie.bucket.index.num.buckets": "1"})
    src = tmp / "rows.jsonl"
    src.write_text("".join(json.dumps({"id": f"k{i}", "seq": 1, "ts": f"2024-01-01T0{i}:00:00Z"}) + "\n"
                           for i in range(3)))
    table.write(str(src))
    return table


def _race(base: str, ts: str, bodies: list[bytes]) -> list[object]:
    """Each body completes `ts` from its own thread, all released at once; the outcome of each."""
    gate = threading.Barrier(len(bodies))
    outcomes: list[object] = [None] * len(bodies)

    def run(i: int) -> None:
        gate.wait()
        try:
            outcomes[i] = complete(base, ts, DELTACOMMIT, bodies[i])
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test checks
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_two_writers_racing_to_complete_one_wins(s3_env, tmp_path):  # noqa: F811
    table = _table(f"{s3_env['bucket_uri']}/race", tmp_path)
    timeline = Timeline.load(table.path)
    done = timeline.completed()[-1]
    body = storage.read_bytes(timeline.instant_path(done))
    before = rows_by_key(hudi_read(table.path, storage_options=s3_env["storage_options"]))
    for round_ in range(5):
        ts = f"2099010100000{round_}000"
        create_requested(table.path, ts, DELTACOMMIT)
        transition_to_inflight(table.path, ts, DELTACOMMIT)
        # two different, valid commit bodies: whichever wins must be there whole
        bodies = [body, body.replace(b'"operationType" : "UPSERT"', b'"operationType" : "INSERT"')]
        assert bodies[0] != bodies[1]
        outcomes = _race(table.path, ts, bodies)
        won = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
        lost = [o for o in outcomes if isinstance(o, Exception)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        assert isinstance(lost[0], Refused) and lost[0].reason == ALREADY_PUBLISHED
        assert "already exists" in str(lost[0])
        completed = f"{table.path}/.hoodie/{ts}.deltacommit"
        assert storage.read_bytes(completed) == bodies[won[0]]   # whole, and the winner's
    # nothing torn: the table reads as before in hudi 0.5.0 and in Tidemark (the raced instants add no files)
    assert rows_by_key(hudi_read(table.path, storage_options=s3_env["storage_options"])) == before
    assert Table.open(table.path).read().rows == 3


class _Lease:
    """A lock outside the store (what the control plane's database lease is), always granted here."""

    def __init__(self) -> None:
        self.held = False

    def acquire(self, timeout_s: float) -> bool:
        self.held = True
        return True

    def release(self) -> None:
        self.held = False

    def is_held(self) -> bool:
        return self.held


def test_a_store_without_conditional_put_needs_a_lock_outside_it(s3_env, tmp_path, monkeypatch):  # noqa: F811
    table = _table(f"{s3_env['bucket_uri']}/nocas", tmp_path)
    monkeypatch.setenv("TIDEMARK_S3_CONDITIONAL_PUT", "false")
    ts = "20990101000000000"
    with pytest.raises(Refused, match="no conditional put"):
        create_requested(table.path, ts, DELTACOMMIT)
    with holding(_Lease(), "open an instant"):
        create_requested(table.path, ts, DELTACOMMIT)
        transition_to_inflight(table.path, ts, DELTACOMMIT)
    with pytest.raises(Refused) as refused:
        complete(table.path, ts, DELTACOMMIT, b"{}")
    assert refused.value.reason == UNSAFE_PUBLISH and "lock outside the store" in str(refused.value)
    assert not storage.exists(f"{table.path}/.hoodie/{ts}.deltacommit")
    # the whole write path refuses the same way, before anything is committed
    src = tmp_path / "more.jsonl"
    src.write_text(json.dumps({"id": "k9", "seq": 2, "ts": "2024-01-02T00:00:00Z"}) + "\n")
    with pytest.raises(Exception, match="no conditional put"):
        Table.open(table.path).write(str(src))
    with holding(_Lease(), "complete a deltacommit"):
        complete(table.path, ts, DELTACOMMIT, storage.read_bytes(
            Timeline.load(table.path).instant_path(Timeline.load(table.path).completed()[0])))
    assert storage.exists(f"{table.path}/.hoodie/{ts}.deltacommit")
    # and with the lease, a second publisher is still refused (checked under the lock)
    with holding(_Lease(), "complete again"), pytest.raises(Refused) as again:
        complete(table.path, ts, DELTACOMMIT, b"{}")
    assert again.value.reason == ALREADY_PUBLISHED


def _land_and_lose(request) -> None:  # type: ignore[no-untyped-def]
    """Send botocore's request to the store ourselves, then lose the answer: the put lands, its caller sees a
    timeout (and botocore retries it)."""
    import urllib.error
    import urllib.request

    from botocore.exceptions import ReadTimeoutError

    body = request.body
    if not isinstance(body, bytes):
        body.seek(0)
        body, _ = body.read(), body.seek(0)
    headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
               if k.lower() != "content-length"}   # urllib sets its own
    headers.setdefault("Content-Type", "application/octet-stream")   # not urllib's form encoding
    try:
        urllib.request.urlopen(urllib.request.Request(request.url, data=body, method="PUT", headers=headers))
    except urllib.error.HTTPError:   # the store's answer (a 412 too), lost all the same
        pass
    raise ReadTimeoutError(endpoint_url=request.url)


def _register(handler) -> None:  # type: ignore[no-untyped-def]
    storage.s3_client().meta.events.register_first("before-send.s3.PutObject", handler)


def _unregister(handler) -> None:  # type: ignore[no-untyped-def]
    storage.s3_client().meta.events.unregister("before-send.s3.PutObject", handler)


def test_a_publish_whose_response_was_lost_is_ours_not_a_conflict(s3_env):  # noqa: F811
    """The conditional PUT lands but its response is lost; botocore retries into the object's 412: the publish
    happened and is ours. Another writer's object under the name stays a conflict, retried or not."""


    lost = {"n": 0, "busy": False}

    def lose_first_response(request, **_):  # type: ignore[no-untyped-def]
        from botocore.awsrequest import AWSResponse

        if request.headers.get("If-None-Match") in ("*", b"*") and lost["n"] == 1 and lost["busy"]:
            lost["busy"] = False   # botocore's retry meets "a write in progress": our own
            return AWSResponse(request.url, 409, {}, _Busy())
        if request.headers.get("If-None-Match") in ("*", b"*") and lost["n"] == 0:
            lost["n"] += 1
            _land_and_lose(request)
        return None

    path = f"{s3_env['bucket_uri']}/t/.hoodie/001.deltacommit"
    _register(lose_first_response)
    try:
        storage.create_exclusive(path, b'{"mine": 1}')
        assert lost["n"] == 1 and storage.read_bytes(path) == b'{"mine": 1}'
        # the lost response, then a 409 for botocore's retry, then our loop's try meets our object: still ours
        lost.update(n=0, busy=True)
        storage.create_exclusive(f"{path}.2", b'{"mine": 3}')
        assert lost == {"n": 1, "busy": False} and storage.read_bytes(f"{path}.2") == b'{"mine": 3}'
        lost["n"] = 0   # the same lost response, for a name another writer holds: still refused
        other = f"{s3_env['bucket_uri']}/t/.hoodie/002.deltacommit"
        storage.write_bytes(other, b'{"theirs": 1}')
        with pytest.raises(storage.PublishConflict):
            storage.create_exclusive(other, b'{"mine": 2}')
        # an empty pending file proves nothing: another writer's empty object would match it as well
        lost["n"] = 0
        inflight = f"{s3_env['bucket_uri']}/t/.hoodie/003.deltacommit.inflight"
        storage.write_bytes(inflight, b"")
        with pytest.raises(storage.PublishConflict):
            storage.create_exclusive(inflight, b"")
    finally:
        _unregister(lose_first_response)
    assert storage.read_bytes(other) == b'{"theirs": 1}'
    with pytest.raises(storage.PublishConflict):   # a first-try 412 needs no check: the object was there first
        storage.create_exclusive(path, b'{"mine": 1}')


class _Busy:
    """The body of S3's 409: another conditional write to the key is in progress."""

    def stream(self):  # type: ignore[no-untyped-def]
        yield (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>ConditionalRequestConflict</Code>"
               b"<Message>A conflicting operation is in progress</Message></Error>")


def test_a_publish_the_store_asks_to_retry_is_retried(s3_env, monkeypatch):  # noqa: F811
    """409 ConditionalRequestConflict: another conditional write to the key was in flight; AWS asks for a retry,
    which then wins or meets the other's object."""
    from botocore.awsrequest import AWSResponse

    busy = {"n": 0}

    def busy_twice(request, **_):  # type: ignore[no-untyped-def]
        if busy["n"] < 2:
            busy["n"] += 1
            return AWSResponse(request.url, 409, {}, _Busy())
        return None

    monkeypatch.setattr(s3_api, "CONFLICT_PAUSE_S", 0.001)
    path = f"{s3_env['bucket_uri']}/t/.hoodie/003.deltacommit"
    _register(busy_twice)
    try:
        storage.create_exclusive(path, b"{}")
    finally:
        _unregister(busy_twice)
    assert busy["n"] == 2 and storage.read_bytes(path) == b"{}"


def test_a_conditional_replace_whose_response_was_lost_is_ours_not_a_conflict(s3_env):  # noqa: F811
    """`replace_if_match` (a lock's renewal) lands but its response is lost; botocore's retry then meets the ETag
    our own write changed: the replace happened and is ours — else a holder would count its own renewal as the
    lock lost, and block every host with a lease it no longer renews. Another writer's change stays a conflict."""


    lost = {"n": 0}

    def lose_first_response(request, **_):  # type: ignore[no-untyped-def]
        if request.headers.get("If-Match") and lost["n"] == 0:
            lost["n"] += 1
            _land_and_lose(request)
        return None

    path = f"{s3_env['bucket_uri']}/t/.hoodie/.locks/table_lock.json"
    etag = storage.create_exclusive(path, b'{"v": 1}')
    _register(lose_first_response)
    try:
        new = storage.replace_if_match(path, b'{"v": 2}', etag)
        assert lost["n"] == 1 and storage.read_tagged(path) == (b'{"v": 2}', new)
        lost["n"] = 0   # the same lost response, but another writer changed the object first: refused
        storage.write_bytes(path, b'{"theirs": 1}')
        with pytest.raises(storage.PublishConflict):
            storage.replace_if_match(path, b'{"v": 3}', new)
    finally:
        _unregister(lose_first_response)
    assert storage.read_bytes(path) == b'{"theirs": 1}'
