"""Requests asked ahead on S3 (moto server, `storage.ask_ahead`): started together, each answers the one call that
would have made it, a write through the storage layer drops what it makes stale, nothing asked outlives its
operation, and nothing is asked outside one or off S3."""
from __future__ import annotations

import time

from engine.io import storage
from engine.io.storage import operation
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _key(uri: str) -> str:
    return "/" + uri.split("://", 1)[1]


def _wait_for(server, count: int) -> list[dict]:  # type: ignore[no-untyped-def]
    """The server's requests once `count` have arrived (asked ahead: they run on the request pool)."""
    deadline = time.monotonic() + 10
    while len(server.counts()) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return server.counts()


def _table(env: dict) -> str:
    base = f"{env['bucket_uri']}/t"
    storage.write_bytes(f"{base}/.hoodie/hoodie.properties", b"a=1\n")
    storage.write_bytes(f"{base}/.hoodie/1.deltacommit", b"{}")
    storage.write_bytes(f"{base}/p/.hoodie_partition_metadata", b"x")
    storage.write_bytes(f"{base}/p/.f1_1.log.1_0-0-0", b"log")
    return base


def test_each_call_takes_its_answer_asked_ahead_instead_of_a_request(s3_env):  # noqa: F811
    base = _table(s3_env)
    server = s3_env["server"]
    props, hoodie, missing = f"{base}/.hoodie/hoodie.properties", f"{base}/.hoodie", f"{base}/.hoodie/2.commit"
    server.reset_counts()
    with storage.operation_reads():
        storage.ask_ahead(reads=[props], children=[hoodie], trees=[(base, ".hoodie")],
                          heads=[missing, f"{base}/.hoodie/1.deltacommit"])
        # all in flight before anything is asked for: the read, the timeline's LIST, the tree's, two HEADs
        asked = _wait_for(server, 5)
        assert len(asked) == 5
        assert storage.read_shared(props) == b"a=1\n"
        assert sorted(storage.list_names_validated(hoodie)) == ["1.deltacommit", "hoodie.properties"]
        assert sorted(e.name for e in storage.list_tree(base, skip=".hoodie")) == \
            ["p", "p/.f1_1.log.1_0-0-0", "p/.hoodie_partition_metadata"]
        assert storage.listed_etag(f"{base}/p/.f1_1.log.1_0-0-0")   # the tree's ETags kept for the operation
        assert storage.file_exists(missing) is False
        assert storage.file_exists(f"{base}/.hoodie/1.deltacommit") is True
        assert len(server.counts()) == 5   # no call made a request of its own
        # an answer is taken once: asked again, the store answers
        assert storage.file_exists(missing) is False
        assert len(server.counts()) == 6


def test_a_write_drops_the_answers_it_makes_stale(s3_env):  # noqa: F811
    base = _table(s3_env)
    server = s3_env["server"]
    new = f"{base}/.hoodie/2.commit"
    log = f"{base}/p/.f1_1.log.2_0-0-0"
    with storage.operation_reads():
        storage.ask_ahead(children=[f"{base}/.hoodie"], trees=[(base, ".hoodie")], heads=[new],
                          reads=[f"{base}/.hoodie/hoodie.properties"])
        _wait_for(server, 4)
        storage.create_exclusive(new, b"{}")      # into the listed folder, at the HEAD's path
        storage.write_bytes(log, b"log2")          # into the tree
        assert storage.file_exists(new) is True    # not the HEAD's "missing", asked before the write
        assert "2.commit" in storage.list_names_validated(f"{base}/.hoodie")
        assert "p/.f1_1.log.2_0-0-0" in {e.name for e in storage.list_tree(base, skip=".hoodie")}
        storage.write_bytes(f"{base}/.hoodie/hoodie.properties", b"a=2\n")
        assert storage.read_current(f"{base}/.hoodie/hoodie.properties") == b"a=2\n"


def test_a_write_inside_the_skipped_folder_keeps_the_tree(s3_env):  # noqa: F811
    base = _table(s3_env)
    server = s3_env["server"]
    server.reset_counts()
    with storage.operation_reads():
        storage.ask_ahead(trees=[(base, ".hoodie")])
        _wait_for(server, 1)
        storage.write_bytes(f"{base}/.hoodie/3.deltacommit.requested", b"")   # .hoodie/ is not in the tree
        storage.list_tree(base, skip=".hoodie")
    assert [r["method"] for r in server.counts()] == ["GET", "PUT"]   # the tree's one LIST and the PUT


def test_read_current_is_never_the_operations_earlier_read(s3_env):  # noqa: F811
    base = _table(s3_env)
    props = f"{base}/.hoodie/hoodie.properties"
    bucket, key = props.split("://", 1)[1].split("/", 1)
    with storage.operation_reads():
        assert storage.read_shared(props) == b"a=1\n"
        s3_env["server"].client().put_object(Bucket=bucket, Key=key, Body=b"a=9\n")   # another process
        assert storage.read_shared(props) == b"a=1\n"     # the operation's read
        assert storage.read_current(props) == b"a=9\n"    # read now


def test_answers_not_taken_end_with_the_operation(s3_env):  # noqa: F811
    base = _table(s3_env)
    with storage.operation_reads():
        storage.ask_ahead(trees=[(base, ".hoodie")], heads=[f"{base}/.hoodie/9.commit"])
        op = operation._OP_READS.get()
        asked = [f for a in op.asked.values() for f in a.parts]
    assert asked and all(f.done() for f in asked)


def test_nothing_is_asked_outside_an_operation_or_off_s3(s3_env, tmp_path):  # noqa: F811
    base = _table(s3_env)
    server = s3_env["server"]
    server.reset_counts()
    storage.ask_ahead(trees=[(base, ".hoodie")], heads=[f"{base}/.hoodie/9.commit"])
    with storage.operation_reads():
        storage.ask_ahead(trees=[(str(tmp_path), ".hoodie")], reads=[str(tmp_path / "x")])
        assert not operation._OP_READS.get().asked
    time.sleep(0.2)
    assert server.counts() == []


def test_a_removed_folder_drops_what_was_asked_inside_it(s3_env):  # noqa: F811
    base = _table(s3_env)
    server = s3_env["server"]
    temp = f"{base}/.hoodie/.temp/5"
    storage.write_bytes(f"{temp}/marker", b"m")
    server.reset_counts()
    with storage.operation_reads():
        storage.ask_ahead(children=[temp], heads=[f"{temp}/marker"], reads=[f"{temp}/marker"])
        _wait_for(server, 3)
        storage.remove_tree(temp)
        assert storage.file_exists(f"{temp}/marker") is False
        assert storage.list_names_validated(temp) == []
        assert storage.read_shared(f"{temp}/marker") is None


def test_an_answer_made_stale_is_not_kept(s3_env):  # noqa: F811
    base = _table(s3_env)
    server = s3_env["server"]
    server.reset_counts()
    with storage.operation_reads():
        storage.ask_ahead(trees=[(base, ".hoodie")])
        op = operation._OP_READS.get()
        asked = op.asked[("tree", base, ".hoodie")]
        for f in asked.parts:
            f.result()
        storage.write_bytes(f"{base}/p/.f1_1.log.3_0-0-0", b"log3")
        assert not op.asked and op.dropped == []   # finished when dropped: nothing held until the end


def test_a_schedule_lists_the_timeline_and_the_table_in_one_wave(s3_env, tmp_path):  # noqa: F811
    """The trigger's listing of the timeline and the plan's of the table are asked together (one round trip): a
    schedule the trigger refuses pays the table's one LIST, and writes nothing."""
    import pyarrow.parquet as pq

    from engine.errors import CompactionRefused
    from tests.support.placement_tables import new_table, rows

    table = new_table(f"{s3_env['bucket_uri']}/sched")
    pq.write_table(rows(range(50), 1), tmp_path / "in.parquet")
    table.write(str(tmp_path / "in.parquet"), local=True)
    assert table.schedule_compaction(strategy="unbounded").instant is not None
    server = s3_env["server"]
    server.reset_counts()
    try:
        table.schedule_compaction(strategy="unbounded")
        raise AssertionError("a second plan was scheduled")
    except CompactionRefused:
        pass
    requests = server.counts()
    listings = sorted(r["query"] for r in requests if "list-type" in r["query"])
    assert len(listings) == 2 and "delimiter=.hoodie%2F" in listings[0] and "delimiter=%2F" in listings[1], listings
    assert not [r for r in requests if r["method"] in ("PUT", "DELETE")]


def test_an_answer_asked_again_with_keep_is_the_one_waiting(s3_env):  # noqa: F811
    base = _table(s3_env)
    server = s3_env["server"]
    server.reset_counts()
    with storage.operation_reads():
        storage.ask_ahead(trees=[(base, ".hoodie")])
        storage.ask_ahead(trees=[(base, ".hoodie")], keep=True)   # still waiting: not asked again
        storage.list_tree(base, skip=".hoodie")
        assert len(_wait_for(server, 1)) == 1
        storage.ask_ahead(trees=[(base, ".hoodie")], keep=True)   # taken: asked again
        storage.drop_asked()                                      # then dropped (another lock is taken first)
        assert not operation.asked(("tree", base, ".hoodie"))    # the next listing is the store's, made then


def test_a_run_reads_the_settings_once_in_flight_with_its_first_listings(s3_env, tmp_path):  # noqa: F811
    """The compaction run reads hoodie.properties under its lock's flock, with the timeline's and the table's
    listings, and updates it after the commit by a PUT If-Match that read: one GET of it in all."""
    import pyarrow.parquet as pq

    from tests.support.placement_tables import new_table, rows

    table = new_table(f"{s3_env['bucket_uri']}/run")
    for seq in (1, 2):
        pq.write_table(rows(range(50), seq), tmp_path / f"in{seq}.parquet")
        table.write(str(tmp_path / f"in{seq}.parquet"), local=True)
    planned = table.schedule_compaction(threshold="2100-01-01T00:00:00Z")
    assert planned.instant is not None
    server = s3_env["server"]
    server.reset_counts()
    table.run_compaction(planned.instant, local=True)
    requests = [r for r in server.counts() if r["path"].endswith("/.hoodie/hoodie.properties")]
    assert [r["method"] for r in requests] == ["GET", "PUT"]
