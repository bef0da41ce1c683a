"""The injectable table lock: every timeline-changing operation takes the caller's lock, refuses when it is
not granted or lost, and the default file lock serialises processes."""
from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from engine import FileLock, Refused, Table, TableLock
from engine.cli import output
from engine.config.properties import LOCK_PROVIDER_KEY, STORAGE_LOCK_PROVIDER
from engine.errors import LOCK_LOST, LOCK_UNAVAILABLE, ConfigError, TidemarkError
from engine.io import storage
from engine.io.store_lock import COMPACTION_LOCK, LockData, StoreLock
from engine.lock import holding
from engine.timeline.instants import Timeline
from tests.support.other_host import as_another_host
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)
from tests.support.tables import DAYS, THRESHOLD, create_table, day_file, table_copy, three_day_table


class RecordingLock:
    """Grants every request and records what was asked of it."""

    def __init__(self, grant: bool = True, keep: bool = True) -> None:
        self.grant, self.keep = grant, keep
        self.events: list[str] = []
        self.held = False

    def acquire(self, timeout_s: float) -> bool:
        self.events.append("acquire")
        self.held = self.grant
        return self.grant

    def release(self) -> None:
        self.events.append("release")
        self.held = False

    def is_held(self) -> bool:
        self.events.append("is_held")
        return self.held and self.keep


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory) -> str:
    return three_day_table(tmp_path_factory.mktemp("lock")).path


@pytest.fixture
def table(base, tmp_path) -> Table:
    return Table.open(str(table_copy(Path(base), tmp_path / "copy")))


def _instants(t: Table) -> list[tuple[str, str, str]]:
    return [(i.instant, i.action, i.state) for i in t.timeline()]


def test_recording_lock_satisfies_the_protocol() -> None:
    assert isinstance(RecordingLock(), TableLock) and isinstance(FileLock("/nowhere"), TableLock)


def test_every_timeline_change_takes_the_callers_lock(table, tmp_path) -> None:
    def check(lock: RecordingLock, published: bool = True, services: int = 0) -> None:
        """One hold of the lock by the operation, then one per service that followed its commit (the automatic
        clean and archival each take the caller's lock anew, as Java's postCommit services do)."""
        assert lock.events[0] == "acquire" and lock.events[-1] == "release"
        assert lock.events.count("acquire") == lock.events.count("release") == 1 + services
        assert ("is_held" in lock.events) == published   # checked before publishing, only then

    lock = RecordingLock()
    table.write(day_file(tmp_path, 9, "04"), lock=lock)
    check(lock, services=2)
    lock = RecordingLock()
    plan = table.schedule_compaction(threshold=THRESHOLD, lock=lock)
    check(lock)
    lock = RecordingLock()
    table.rollback(plan.instant or "", lock=lock)
    check(lock)
    table.schedule_compaction(threshold=THRESHOLD)
    lock = RecordingLock()
    table.run_compaction(lock=lock)
    check(lock, services=2)
    lock = RecordingLock()
    assert table.clean(retain_versions=1, lock=lock).instant
    check(lock)
    lock = RecordingLock()
    assert table.clean(retain_versions=1, lock=lock).instant is None   # nothing left: nothing published
    check(lock, published=False)
    lock = RecordingLock()
    table.recover(lock=lock)
    check(lock, published=False)


def test_a_lock_not_granted_refuses_and_changes_nothing(table, tmp_path) -> None:
    before = _instants(table)
    calls = [lambda lock: table.schedule_compaction(threshold=THRESHOLD, lock=lock),
             lambda lock: table.clean(retain_commits=1, lock=lock),
             lambda lock: table.recover(lock=lock),
             lambda lock: table.write(day_file(tmp_path, 9, "04"), lock=lock)]
    for call in calls:
        lock = RecordingLock(grant=False)
        with pytest.raises(Refused) as refused:
            call(lock)
        assert refused.value.reason == LOCK_UNAVAILABLE and "release" not in lock.events
    assert _instants(table) == before


def test_a_lost_lease_refuses_to_publish(table, tmp_path) -> None:
    before = _instants(table)
    with pytest.raises(Refused) as refused:
        table.schedule_compaction(threshold=THRESHOLD, lock=RecordingLock(keep=False))
    assert refused.value.reason == LOCK_LOST and _instants(table) == before
    # A write that lost its lease never completes; the next holder of the lock rolls it back.
    with pytest.raises(Refused) as refused:
        table.write(day_file(tmp_path, 9, "04"), lock=RecordingLock(keep=False))
    assert refused.value.reason == LOCK_LOST
    pending = [i for i in table.timeline() if i.state != "completed"]
    assert [i.action for i in pending] == ["deltacommit"]
    assert table.recover().rolled_back == [pending[0].instant]
    # v6 rolls a deltacommit back with a command block and a completed rollback instant, as Java does.
    after = _instants(table)
    assert after[:-1] == before and after[-1][1:] == ("rollback", "completed")


def _hold(base_path: str, seconds: float, ready) -> None:
    lock = FileLock(base_path)
    with holding(lock, "hold the table for a test"):
        ready.set()
        time.sleep(seconds)


def test_default_file_lock_serialises_two_processes(table, monkeypatch) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(table.path, 3.0, ready))
    holder.start()
    try:
        assert ready.wait(10)
        monkeypatch.setenv("TIDEMARK_LOCK_TIMEOUT", "0.3")
        with pytest.raises(Refused) as refused:
            table.schedule_compaction(threshold=THRESHOLD)
        assert refused.value.reason == LOCK_UNAVAILABLE
        assert f"pid {holder.pid} (hold the table for a test)" in refused.value.message
        assert table.compactions() == []
        monkeypatch.setenv("TIDEMARK_LOCK_TIMEOUT", "30")
        started = time.monotonic()
        plan = table.schedule_compaction(threshold=THRESHOLD)   # waits for the holder, then goes ahead
        assert plan.state == "requested"
        assert time.monotonic() - started > 1   # it waited for the release (the holder may still be exiting)
    finally:
        holder.join(10)
    assert holder.exitcode == 0
    assert os.path.exists(os.path.join(table.path, ".hoodie", ".tidemark.lock"))


def test_a_callers_lock_also_keeps_this_hosts_other_processes_out(table, monkeypatch) -> None:
    """The control plane's lease keeps out its own workers; an operation under it also takes the table's host file
    lock, which the CLI and the Python API take, so a schedule under a lease waits for a CLI write (and the other
    way round) instead of planning beside it."""
    from engine.lock import CallerAndHostLock, table_lock_of

    monkeypatch.setenv("TIDEMARK_LOCK_TIMEOUT", "0.3")
    before = _instants(table)
    cli = FileLock(table.path)
    assert cli.acquire(1)
    try:
        lease = RecordingLock()
        with pytest.raises(Refused) as refused:
            table.schedule_compaction(threshold=THRESHOLD, lock=lease)
        assert refused.value.reason == LOCK_UNAVAILABLE
        assert lease.events == ["acquire", "release"] and not lease.held   # the lease is given back at once
    finally:
        cli.release()
    assert _instants(table) == before

    outer = table_lock_of(table.path, RecordingLock())
    assert isinstance(outer, CallerAndHostLock) and table_lock_of(table.path, outer) is outer
    with holding(outer, "an operation"):
        with holding(table_lock_of(table.path, RecordingLock()), "its own rollback", timeout_s=0.3):
            pass   # nested in one thread: not waiting for itself
        assert not FileLock(table.path).acquire(0.1)   # still held for the outer one
    after = FileLock(table.path)
    assert after.acquire(0.1)
    after.release()


def test_a_host_lock_that_cannot_be_opened_gives_the_callers_lock_back(table, monkeypatch) -> None:
    from engine.io import locking
    from engine.lock import table_lock_of

    lease = RecordingLock()
    both = table_lock_of(table.path, lease)

    def unreadable(*_a, **_k):
        raise PermissionError(13, "Permission denied", ".hoodie/.tidemark.lock")

    monkeypatch.setattr(locking, "open_lock_file", unreadable)
    with pytest.raises(PermissionError):
        both.acquire(1)
    assert lease.events == ["acquire", "release"] and not lease.held


def test_one_composite_lock_held_twice_in_one_thread_lets_the_file_lock_go_at_the_end(table) -> None:
    from engine.lock import table_lock_of

    both = table_lock_of(table.path, RecordingLock())
    with holding(both, "a run"):
        with holding(both, "its own rollback"):
            pass
        assert not FileLock(table.path).acquire(0.1)   # the outer hold still has it
    after = FileLock(table.path)
    assert after.acquire(0.1), "the host file lock outlived the outer hold"
    after.release()


# --- Hudi's storage-based lock: hosts serialised through the table's store ---------------------------------------

def test_a_table_with_the_storage_lock_keeps_another_hosts_writers_and_runs_out(s3_env, tmp_path,  # noqa: F811
                                                                                 monkeypatch) -> None:
    """Another host (a second holder of the store's lock objects: this host's file lock cannot see it) holding the
    table lock refuses this host's write, naming it; holding the run lock, this host's compaction run. Once given
    back, both go through, and each gives the lock back itself."""
    monkeypatch.setenv("TIDEMARK_LOCK_TIMEOUT", "1")
    uri = f"{s3_env['bucket_uri']}/t"
    table = Table.create(uri, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER})
    other_host = StoreLock(uri)
    assert other_host.acquire(1)
    with pytest.raises(Refused) as refused:
        table.write(day_file(tmp_path, 0, "01"))
    assert refused.value.reason == LOCK_UNAVAILABLE and other_host.owner in str(refused.value)
    assert Timeline.load(uri).instants == []   # nothing written
    held = table.describe().lock   # what `tidemark describe` shows
    assert (held.provider, held.state, held.owner) == ("storage", "held", other_host.owner)
    assert held.lock_object == other_host.path
    assert f"lock: Hudi storage lock {other_host.path}: held by {other_host.owner}" in output.describe(table.describe())
    other_host.release()
    for i, day in enumerate(DAYS):
        table.write(day_file(tmp_path, i, day))
    lock_object = json.loads(storage.read_bytes(other_host.path))
    assert lock_object["expired"] is True and lock_object["owner"] != other_host.owner   # the write's, given back
    assert table.describe().lock.state == "free"

    plan = table.schedule_compaction(threshold=THRESHOLD)
    other_run = StoreLock(uri, COMPACTION_LOCK)
    assert other_run.acquire(1)
    with pytest.raises(Refused, match="run a compaction"):
        table.run_compaction(plan.instant, local=True)
    other_run.release()
    assert table.run_compaction(plan.instant, local=True).instant == plan.instant


def test_the_storage_lock_is_refused_where_the_store_cannot_arbitrate(tmp_path) -> None:
    with pytest.raises(ConfigError, match="needs an object store with conditional writes"):
        create_table(tmp_path / "t", {LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER})
    with pytest.raises(ConfigError, match=r"must be at least 3 times"):
        create_table(tmp_path / "u", {"hoodie.write.lock.storage.validity.timeout.secs": "30",
                                      "hoodie.write.lock.storage.renew.interval.secs": "30"})


def test_a_lock_object_no_one_can_read_refuses_and_leaves_nothing_held(s3_env, tmp_path) -> None:  # noqa: F811
    """An error after the host's flock was taken (here: the store's lock object is not Hudi's) gives the flock
    back: once the object is mended, the next write goes through — not "held by" this very process."""
    uri = f"{s3_env['bucket_uri']}/t"
    table = Table.create(uri, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER})
    lock_object = StoreLock(uri).path
    storage.write_bytes(lock_object, b"garbage")
    with pytest.raises(TidemarkError, match=r"table_lock\.json is not a Hudi storage lock"):
        table.write(day_file(tmp_path, 0, "01"))
    assert table.describe().lock.state == "unreadable"
    storage.remove(lock_object)
    table.write(day_file(tmp_path, 0, "01"))


def test_a_run_whose_run_lock_was_taken_over_commits_nothing(s3_env, tmp_path, monkeypatch) -> None:  # noqa: F811
    """Another host took the run lock while this run's lease could not be renewed (a paused process): the run
    finds out before its commit and publishes nothing (`lock_lost`), as with a lost table lock."""
    from engine.compaction import execute

    uri = f"{s3_env['bucket_uri']}/t"
    table = Table.create(uri, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER,
                                   "hoodie.write.lock.storage.validity.timeout.secs": "3",
                                   "hoodie.write.lock.storage.renew.interval.secs": "1"})
    for i, day in enumerate(DAYS):
        table.write(day_file(tmp_path, i, day))
    plan = table.schedule_compaction(threshold=THRESHOLD)
    run_lock = StoreLock(uri, COMPACTION_LOCK).path
    real = execute.fault_point

    def taken_over(operation: str, step: str) -> None:
        if (operation, step) == ("execute", "tasks"):
            _, etag = storage.read_tagged(run_lock)
            storage.replace_if_match(run_lock, LockData(False, int(time.time() * 1000) + 60_000,
                                                        "another-host").to_bytes(), etag)
            time.sleep(1.5)   # this run's next renewal is refused
        real(operation, step)

    monkeypatch.setattr(execute, "fault_point", taken_over)
    with pytest.raises(Refused) as refused:
        table.run_compaction(plan.instant, local=True)
    assert refused.value.reason == LOCK_LOST
    assert not [i for i in Timeline.load(uri).completed() if i.timestamp == plan.instant]
    assert json.loads(storage.read_bytes(run_lock))["owner"] == "another-host"   # not given back over its lease


def test_the_lock_settings_belong_to_the_table_not_to_one_operation(s3_env, tmp_path) -> None:  # noqa: F811
    uri = f"{s3_env['bucket_uri']}/t"
    table = Table.create(uri, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER,
                                   "hoodie.write.lock.storage.validity.timeout.secs": "90"})
    with pytest.raises(ConfigError, match="is a table setting"):
        table.write(day_file(tmp_path, 0, "01"), settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER})
    # checked against what the table stores: a renewal interval more than a third of the stored lease is refused
    with pytest.raises(ConfigError, match=r"validity.timeout.secs=90 must be at least 3 times"):
        table.update_settings({"hoodie.write.lock.storage.renew.interval.secs": "40"})
    # an update of another key does not check the lock's rules again (a copy of the table on a disk keeps working)
    assert table.update_settings({"hoodie.cleaner.commits.retained": "5"}).props["hoodie.cleaner.commits.retained"] == "5"


def test_a_copy_on_a_disk_of_a_storage_locked_table_keeps_working(tmp_path) -> None:
    """A table copied from S3 to a disk keeps the provider in its hoodie.properties: its flock serialises it there,
    `show` says so, and unrelated settings still update."""
    from engine.config.properties import load_table_config, save_table_config

    table = create_table(tmp_path / "t")
    cfg = load_table_config(table.path)
    cfg.props[LOCK_PROVIDER_KEY] = STORAGE_LOCK_PROVIDER
    save_table_config(cfg)
    assert table.describe().lock.provider == "host"
    table.update_settings({"hoodie.cleaner.commits.retained": "5"})
    table.write(day_file(tmp_path, 0, "01"))


# --- fencing: a holder whose lock object changed under it publishes nothing --------------------------------------

@pytest.mark.parametrize("change", ["deleted", "replaced"])
def test_a_holder_whose_lock_object_changed_before_its_publish_publishes_nothing(s3_env, tmp_path,  # noqa: F811
                                                                                  monkeypatch, change) -> None:
    """Between the holder's last renewal and its publish the lock object is deleted (an operator, a lifecycle rule)
    or replaced by another owner's lease (the holder paused past it); another host then takes the lock and
    commits. The holder's own copy of its lease still says held: the fence asks the object, refuses (lock_lost,
    one line naming the lock and its holder), and hudi 0.5.0 reads the other host's write alone."""
    from engine.write import pipeline
    from tests.support.oracle import hudi_read, rows_by_key

    monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "this-host-locks"))
    uri = f"{s3_env['bucket_uri']}/t"
    table = create_table_on(uri)
    table.write(day_file(tmp_path, 0, "01"))
    lock_object = StoreLock(uri).path
    other_commit: list[str] = []
    real, main = pipeline.fault_point, threading.current_thread()

    def lock_object_changes(operation: str, step: str) -> None:
        real(operation, step)
        if (operation, step) != ("write", "reconciled") or other_commit or threading.current_thread() is not main:
            return   # the holder's write only, not the other host's
        if change == "deleted":
            storage.remove(lock_object)
        else:   # another owner's lease, as a host that found this one's run out writes it
            _, etag = storage.read_tagged(lock_object)
            storage.replace_if_match(lock_object, LockData(False, int(time.time() * 1000) - 60_000,
                                                           "a-host-that-took-it").to_bytes(), etag)
        other_dir = tmp_path / "other"
        other_dir.mkdir()
        as_another_host(tmp_path, monkeypatch,
                         lambda: other_commit.append(Table.open(uri).write(day_file(other_dir, 2, "03")).instant))
        monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "this-host-locks"))

    monkeypatch.setattr(pipeline, "fault_point", lock_object_changes)
    with pytest.raises(Refused) as refused:
        table.write(day_file(tmp_path, 1, "02"))
    assert refused.value.reason == LOCK_LOST
    message = refused.value.message
    assert "\n" not in message and message.startswith(f"lock lost: {lock_object} ")
    assert "stopped before committing" in message and "nothing of it was published" in message
    # the other host gave the lock back: the message names who had it last and until when
    assert "ran out or was given back (last tidemark-" in message and "until 20" in message
    mine = [i for i in Timeline.load(uri).instants if i.timestamp not in other_commit]
    assert [i.state.value for i in mine if i.action == "deltacommit"] == ["completed", "inflight"]   # day 1 pending
    rows = rows_by_key(hudi_read(uri, "snapshot", storage_options=s3_env["storage_options"]))
    assert {k: (r["seq"], r["_hoodie_commit_time"]) for k, r in rows.items()} == \
        {("", f"k{k}"): (2, other_commit[0]) for k in range(3)}
    lock_now = json.loads(storage.read_bytes(lock_object))
    assert lock_now["owner"] != "a-host-that-took-it" and lock_now["expired"] is True   # the other host's give-back


def create_table_on(uri: str) -> Table:
    return Table.create(uri, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                        settings={LOCK_PROVIDER_KEY: STORAGE_LOCK_PROVIDER, "hoodie.bucket.index.num.buckets": "1"})


def test_a_lease_that_java_wrote_with_a_string_flag_is_respected_and_a_garbled_one_stops_the_write(
        s3_env, tmp_path, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setenv("TIDEMARK_LOCK_TIMEOUT", "0.5")
    uri = f"{s3_env['bucket_uri']}/t"
    table = create_table_on(uri)
    lock_object = StoreLock(uri).path
    until = int(time.time() * 1000) + 3_600_000
    storage.write_bytes(lock_object, json.dumps({"expired": "false", "validUntil": until, "owner": "java"}).encode())
    with pytest.raises(Refused) as refused:
        table.write(day_file(tmp_path, 0, "01"))
    assert refused.value.reason == LOCK_UNAVAILABLE and "java" in refused.value.message
    storage.write_bytes(lock_object, json.dumps({"expired": "maybe", "validUntil": until, "owner": "java"}).encode())
    with pytest.raises(TidemarkError, match=r"table_lock\.json is not a Hudi storage lock \(expired is 'maybe'"):
        table.write(day_file(tmp_path, 0, "01"))
    assert Timeline.load(uri).instants == []
    assert json.loads(storage.read_bytes(lock_object))["owner"] == "java"   # never taken
