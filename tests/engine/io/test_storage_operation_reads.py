"""What one table operation shares on S3 (moto server): `read_shared` fetches a metadata file once inside
`operation_reads` and never across operations (`read_immutable`: a file that never changes, once per process),
this process's writes keep it true; `list_tree` gives each
object's ETag (`listed_etag`), forgotten when this process rewrites the object; `file_exists` is one HEAD."""
from __future__ import annotations

from engine.io import storage
from engine.io.storage import s3, s3_api
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _requests(server, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [r["method"] for r in server.counts() if r["path"].endswith(name)]


def test_a_file_is_read_once_per_operation_and_again_in_the_next(s3_env):  # noqa: F811
    path = f"{s3_env['bucket_uri']}/t/.hoodie/hoodie.properties"
    storage.write_bytes(path, b"a=1\n")
    server = s3_env["server"]
    server.reset_counts()
    with storage.operation_reads():
        assert [storage.read_shared(path) for _ in range(3)] == [b"a=1\n"] * 3
        with storage.operation_reads():   # a nested operation shares the outer one's reads
            assert storage.read_shared(path) == b"a=1\n"
    with storage.operation_reads():
        assert storage.read_shared(path) == b"a=1\n"
    assert storage.read_shared(path) == b"a=1\n"   # outside an operation: always the store
    assert _requests(server, "hoodie.properties") == ["GET", "GET", "GET"]


def test_what_this_process_writes_or_deletes_is_what_the_operation_reads_next(s3_env):  # noqa: F811
    path = f"{s3_env['bucket_uri']}/w/.hoodie/hoodie.properties"
    storage.write_bytes(path, b"v=1\n")
    server = s3_env["server"]
    with storage.operation_reads():
        assert storage.read_shared(path) == b"v=1\n"
        server.reset_counts()
        storage.write_bytes(path, b"v=2\n")
        assert storage.read_shared(path) == b"v=2\n"    # what we wrote, without a GET
        assert _requests(server, "hoodie.properties") == ["PUT"]
        storage.copy(f"{s3_env['bucket_uri']}/w/.hoodie/hoodie.properties", path + ".backup")
        storage.write_bytes(path + ".backup", b"v=3\n")   # never read in the operation: not remembered
        storage.remove(path)
        assert storage.read_shared(path) is None          # deleted: asked again, and gone
        storage.write_bytes(path, b"v=4\n")
        assert storage.read_shared(path) == b"v=4\n"
        storage.remove_tree(f"{s3_env['bucket_uri']}/w/.hoodie")
        assert storage.read_shared(path) is None


def test_an_immutable_file_is_read_once_while_the_listing_shows_the_same_object(s3_env):  # noqa: F811
    timeline = f"{s3_env['bucket_uri']}/i/.hoodie"
    done = [f"{timeline}/2026010100000000{i}.deltacommit" for i in range(3)]
    for i, path in enumerate(done):
        storage.write_bytes(path, b"{}" + bytes([48 + i]))
    server = s3_env["server"]
    server.reset_counts()
    with storage.operation_reads():
        storage.list_names_validated(timeline)                   # the listing gives each object's ETag
        storage.read_shared_all(done, immutable=True)            # three GETs, in parallel
        assert [storage.read_immutable(p) for p in done] == [b"{}0", b"{}1", b"{}2"]
    with storage.operation_reads():                              # another operation: nothing read again
        storage.list_names_validated(timeline)
        storage.read_shared_all(done, immutable=True)
        assert storage.read_immutable(done[0]) == b"{}0"
    reads = [r["path"] for r in server.counts() if r["method"] == "GET" and "list-type" not in r["query"]]
    assert sorted(reads) == sorted("/" + p.split("://", 1)[1] for p in done)   # each object read once
    # Another process re-creates one at the same path with other bytes (a compaction re-run after a crashed
    # rollback): the next listing gives another ETag, so it is read again.
    bucket, key = done[1].split("://", 1)[1].split("/", 1)
    server.client().put_object(Bucket=bucket, Key=key, Body=b"{}9")
    with storage.operation_reads():
        storage.list_names_validated(timeline)
        assert storage.read_immutable(done[1]) == b"{}9"
    without_listing = storage.read_immutable(done[2])            # no listing of its own: read from the store
    assert without_listing == b"{}2"
    storage.remove(done[0])                                      # this process deletes one: forgotten
    with storage.operation_reads():
        storage.list_names_validated(timeline)
        assert storage.read_immutable(done[0]) is None


def test_what_this_process_publishes_is_not_read_back_while_the_listing_shows_it(s3_env):  # noqa: F811
    timeline = f"{s3_env['bucket_uri']}/p/.hoodie"
    plan, lock = f"{timeline}/20260101000000000.compaction.requested", f"{s3_env['bucket_uri']}/p/lock"
    storage.create_exclusive(plan, b"plan-1", keep=True)         # a conditional PUT: its response gives the ETag
    storage.create_exclusive(lock, b"owner")                      # not kept unless asked
    server = s3_env["server"]
    server.reset_counts()
    with storage.operation_reads():
        storage.list_names_validated(timeline)
        assert storage.read_immutable(plan) == b"plan-1"
    assert not [r for r in server.counts() if r["method"] == "GET" and "list-type" not in r["query"]]
    # Another process replaces it (unscheduled, then a new plan at the same instant): another ETag, read again.
    bucket, key = plan.split("://", 1)[1].split("/", 1)
    server.client().delete_object(Bucket=bucket, Key=key)
    server.client().put_object(Bucket=bucket, Key=key, Body=b"plan-2")
    with storage.operation_reads():
        storage.list_names_validated(timeline)
        assert storage.read_immutable(plan) == b"plan-2"


def test_a_missing_file_is_asked_again(s3_env):  # noqa: F811
    path = f"{s3_env['bucket_uri']}/m/later"
    with storage.operation_reads():
        assert storage.read_shared(path) is None
        s3_api.put_if_absent(path, b"now")   # another writer's PUT would do the same
        assert storage.read_shared(path) == b"now"


def test_local_files_are_always_read(tmp_path):
    path = tmp_path / "hoodie.properties"
    path.write_bytes(b"x=1\n")
    with storage.operation_reads():
        assert storage.read_shared(str(path)) == b"x=1\n"
        path.write_bytes(b"x=2\n")
        assert storage.read_shared(str(path)) == b"x=2\n"


def test_the_listing_gives_etags_that_change_with_the_bytes(s3_env):  # noqa: F811
    base = f"{s3_env['bucket_uri']}/e"
    log = f"{base}/p1/.f_1.log.1_0"
    storage.write_bytes(log, b"abcd")
    storage.write_bytes(f"{base}/p1/sub/", b"")   # a folder marker
    with storage.operation_reads():
        entries = {e.name: e for e in storage.list_tree(base)}
        assert entries["p1/.f_1.log.1_0"].etag and entries["p1/.f_1.log.1_0"].size == 4
        assert entries["p1"].is_dir and entries["p1/sub"].is_dir and "p1/sub/" not in entries
        first = storage.listed_etag(log, 4)
        assert first == entries["p1/.f_1.log.1_0"].etag
        assert storage.listed_etag(log, 5) is None     # another size than the caller's: not this object
        storage.write_bytes(log, b"abce")
        assert storage.listed_etag(log) is None       # rewritten by us: the listing no longer tells
        storage.list_tree(base)
        second = storage.listed_etag(log, 4)
        assert second and second != first             # same size, other bytes: another ETag
    assert storage.listed_etag(log) is None           # nothing outlives the operation
    assert storage.list_tree(f"{s3_env['bucket_uri']}/nothing-here") == []


def test_file_exists_is_one_head(s3_env):  # noqa: F811
    there = f"{s3_env['bucket_uri']}/x/.hoodie/1.commit"
    storage.write_bytes(there, b"{}")
    server = s3_env["server"]
    server.reset_counts()
    assert storage.file_exists(there)
    assert not storage.file_exists(there + ".missing")
    assert not storage.file_exists(f"{s3_env['bucket_uri']}/x/.hoodie")   # a folder is no file
    assert [r["method"] for r in server.counts()] == ["HEAD", "HEAD", "HEAD"]


def test_listed_times_are_the_stores_whatever_form_a_response_gives_them(s3_env):  # noqa: F811
    import datetime

    from botocore.utils import parse_timestamp

    base = f"{s3_env['bucket_uri']}/t"
    storage.write_bytes(f"{base}/a", b"x")
    listed = {e.name: e for e in storage.list_tree(base)}["a"]
    fs, path = storage.filesystem(f"{base}/a")
    assert listed.mtime_ms == int(fs.get_file_info(path).mtime.timestamp() * 1000)   # pyarrow's reading of it
    # the forms S3 responses use: ISO-8601 in listings, RFC 1123 in headers; all UTC, as botocore reads them
    for value in ("2026-11-27T17:23:40.000Z", "2026-11-27T17:23:40.123+00:00", "Fri, 27 Nov 2026 17:23:40 GMT",
                  "1795800220", "20260101"):   # the last: epoch seconds, not a date
        ours = s3_api.parse_timestamp(value)
        assert ours.tzinfo is not None and ours == parse_timestamp(value)
    assert s3_api.parse_timestamp("2026-11-27T17:23:40") == datetime.datetime(2026, 11, 27, 17, 23, 40,
                                                                                tzinfo=datetime.UTC)


def test_small_puts_send_their_body_without_waiting_for_100_continue(monkeypatch):
    import http.server
    import threading

    seen: list[tuple[str | None, int]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_PUT(self) -> None:  # noqa: N802
            length = int(self.headers["Content-Length"])
            seen.append((self.headers.get("Expect"), len(self.rfile.read(length))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for key in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(key, raising=False)
        for key, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "us-east-1",
                           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.server_address[1]}"}.items():
            monkeypatch.setenv(key, value)
        client = storage.s3_client()
        client.put_object(Bucket="lake", Key="small", Body=b"x" * 1000)
        client.put_object(Bucket="lake", Key="large", Body=b"y" * s3_api.EXPECT_CONTINUE_BYTES)
    finally:
        server.shutdown()
    assert seen == [(None, 1000), ("100-continue", s3_api.EXPECT_CONTINUE_BYTES)]


def _lists(server) -> list[str]:  # type: ignore[no-untyped-def]
    from urllib.parse import parse_qs

    out = []
    for r in server.counts():
        q = {k: v[0] for k, v in parse_qs(r["query"]).items()}
        if "list-type" in q:
            out.append("but " + q["delimiter"] if q.get("delimiter", "/") != "/" else
                       "whole " + q["prefix"].rstrip("/").rsplit("/", 1)[-1])
    return sorted(out)


def test_a_tree_listing_steps_over_the_skipped_folder_without_fetching_it(s3_env, tmp_path):  # noqa: F811
    server = s3_env["server"]
    layouts = {
        # the usual: nothing sorts before `.hoodie/`
        "partitioned": [".hoodie/", ".hoodie/hoodie.properties", ".hoodie/1.deltacommit",
                        ".hoodie/metadata/files/.f_1.log.1_0", "r0/.hoodie_partition_metadata", "r0/.f1_1.log.1_0",
                        "r0/f1_0_1.parquet"],
        "odd partition": [".hoodie/hoodie.properties", "-1/.hoodie_partition_metadata", "-1/.f1_1.log.1_0",
                          "r0/f1_0_1.parquet"],
        "non-partitioned": [".hoodie/hoodie.properties", ".hoodie/1.deltacommit", ".hoodie_partition_metadata",
                            ".hoodie.bak", ".0a1b_1.log.1_0", ".0a1b_1.log.2_0", "0a1b_0_1.parquet"],
        # the folder's name deeper down, or ending a longer name: rolled up by the delimiter, so listed apart
        "name elsewhere": [".hoodie/hoodie.properties", "r0/.hoodie/x", "r0/f1_0_1.parquet", "x.hoodie/y",
                           "zz/.hoodie/a/b"]}
    requests = {"partitioned": ["but .hoodie/"], "odd partition": ["but .hoodie/"], "non-partitioned": ["but .hoodie/"],
                "name elsewhere": ["but .hoodie/", "whole .hoodie", "whole .hoodie", "whole x.hoodie"]}
    for layout, names in layouts.items():
        root = f"{s3_env['bucket_uri']}/{layout.replace(' ', '-')}"
        for name in names:
            storage.write_bytes(f"{root}/{name}", b"" if name.endswith("/") else b"x")   # and a folder marker
            local = tmp_path / layout / name
            local.parent.mkdir(parents=True, exist_ok=True)
            if not name.endswith("/"):
                local.write_bytes(b"x")
        server.reset_counts()
        listed = sorted(e.name for e in storage.list_tree(root, skip=".hoodie") if not e.is_dir)
        expected = sorted(n for n in names if not n.startswith(".hoodie/"))
        assert listed == expected
        assert sorted(e.name for e in storage.list_tree(str(tmp_path / layout), skip=".hoodie") if not e.is_dir) == expected
        # one LIST whose delimiter is the folder's name: its keys rolled up into one prefix, never fetched
        assert _lists(server) == requests[layout]
        server.reset_counts()
        files = [n for n in names if not n.endswith("/")]
        assert sorted(e.name for e in storage.list_tree(root) if not e.is_dir) == sorted(files)   # no skip: all
        assert _lists(server) == ["whole " + root.rsplit("/", 1)[-1]]
    assert storage.list_tree(f"{s3_env['bucket_uri']}/none", skip=".hoodie") == []


def test_a_tree_listing_made_on_the_request_threads_asks_no_more_of_them(s3_env):  # noqa: F811
    from engine.io.threads import requests_pool

    root = f"{s3_env['bucket_uri']}/q"
    for name in (".hoodie/hoodie.properties", ".0a_1.log.1_0", "r0/f_0_1.parquet"):
        storage.write_bytes(f"{root}/{name}", b"x")
    # one listing per request thread at once: a listing that waited for more pool work would never finish
    listings = [requests_pool().submit(storage.list_tree, root, ".hoodie") for _ in range(40)]
    for done in listings:
        assert sorted(e.name for e in done.result(timeout=60) if not e.is_dir) == [".0a_1.log.1_0", "r0/f_0_1.parquet"]


def test_a_directory_bucket_is_listed_whole_by_folder(s3_env, monkeypatch):  # noqa: F811
    """S3 Express directory buckets list in no key order, refuse StartAfter and take only prefixes ending in "/":
    there the skipped folder is listed and dropped, and a name-prefix listing is the folder's, filtered."""
    from urllib.parse import parse_qs

    monkeypatch.setenv("AWS_S3_DISABLE_EXPRESS_SESSION_AUTH", "true")   # moto has no S3 Express sessions
    server = s3_env["server"]
    bucket = "tidemark-dir--use1-az4--x-s3"
    server.make_bucket(bucket)
    assert not storage.ordered_listings(bucket) and storage.ordered_listings(s3_env["bucket_uri"][5:])
    root = f"s3://{bucket}/t"
    names = [".hoodie/hoodie.properties", ".hoodie/1.deltacommit", ".0a1b_1.log.1_0", "r0/.f1_1.log.1_0",
             "r0/f1_0_1.parquet", "r0/f2_0_1.parquet"]
    for name in names:
        storage.write_bytes(f"{root}/{name}", b"x")
    server.reset_counts()
    listed = sorted(e.name for e in storage.list_tree(root, skip=".hoodie") if not e.is_dir)
    assert listed == sorted(n for n in names if not n.startswith(".hoodie/"))
    assert sorted(e.name for e in storage.list_starting_with(f"{root}/r0", ("f1_", ".f1_"))) == \
        [".f1_1.log.1_0", "f1_0_1.parquet"]
    queries = [{k: v[0] for k, v in parse_qs(r["query"]).items()} for r in server.counts() if "list-type" in r["query"]]
    assert len(queries) == 2
    assert all("start-after" not in q and q.get("prefix", "").endswith("/") for q in queries), queries


def test_object_keys_are_names_not_urls(s3_env):  # noqa: F811
    """A "#" or "?" in a key (a Hudi partition value such as `lang=C#`) is part of the name: every read, write,
    copy, listing and existence check reaches that key and no other."""
    root = f"{s3_env['bucket_uri']}/keys"
    names = ["lang=C#/a.log", "q=what?/a.log", "pct=100%25/a.log", "sp ace+plus/a.log", "ü=ö/a.log"]
    for name in names:
        storage.write_bytes(f"{root}/{name}", name.encode())
    for name in names:
        path = f"{root}/{name}"
        assert storage.read_bytes(path) == name.encode()
        assert storage.file_exists(path)
        storage.copy(path, path + ".copy")
        with storage.open_output(path + ".out") as out:
            out.write(b"out")
    listed = sorted(e.name for e in storage.list_tree(root) if not e.is_dir)
    assert listed == sorted(n + suffix for n in names for suffix in ("", ".copy", ".out"))
    assert storage.read_bytes(f"{root}/lang=C#/a.log.copy") == b"lang=C#/a.log"
    assert not storage.file_exists(f"{root}/lang=C")


def test_a_store_that_ignores_the_delimiter_still_leaves_out_only_the_folder(s3_env, monkeypatch):  # noqa: F811
    """A store may answer an empty page that is still truncated, or take no delimiter but "/" (returning every key):
    the listing reads every page, and drops the skipped folder's keys itself; a non-partitioned table's logs
    (before `.hoodie/`) never vanish from it."""
    root = f"{s3_env['bucket_uri']}/no-delimiter"
    names = [".0a1b_1.log.1_0", ".hoodie/1.deltacommit", ".hoodie_partition_metadata", "0a1b_0_1.parquet"]
    for name in names:
        storage.write_bytes(f"{root}/{name}", b"x")
    pages = s3.pages

    def careless(bucket, prefix, delimiter=None, **params):  # type: ignore[no-untyped-def]
        yield {"Contents": [], "IsTruncated": True}
        yield from pages(bucket, prefix, delimiter if delimiter == "/" else None, **params)

    monkeypatch.setattr(s3, "pages", careless)
    assert sorted(e.name for e in storage.list_tree(root, skip=".hoodie") if not e.is_dir) == \
        [".0a1b_1.log.1_0", ".hoodie_partition_metadata", "0a1b_0_1.parquet"]


def test_a_properties_update_is_one_put_if_match_the_operations_read(s3_env):  # noqa: F811
    """hoodie.properties is updated by a PUT `If-Match` the operation's own read of it, not read again first; when
    another process replaced it since, the store refuses, and the update is applied to the file as it is now."""
    from engine.config.properties import (
        TableConfig,
        parse_properties,
        save_table_config,
        update_reads_first,
    )

    base = f"{s3_env['bucket_uri']}/props"
    path = f"{base}/.hoodie/hoodie.properties"
    storage.write_bytes(path, b"a=1\nb=2\n")
    server = s3_env["server"]
    bucket, key = path.split("://", 1)[1].split("/", 1)
    assert update_reads_first(base)   # no operation, no read of it
    with storage.operation_reads():
        props = parse_properties((storage.read_shared(path) or b"").decode())
        assert not update_reads_first(base)
        cfg = TableConfig(base_path=base, props=dict(props), loaded=dict(props))
        cfg.props["b"] = "3"
        server.reset_counts()
        save_table_config(cfg)
        assert _requests(server, "hoodie.properties") == ["PUT"]
        assert not update_reads_first(base)   # what it put, and the new object's ETag, are the operation's read
        server.client().put_object(Bucket=bucket, Key=key, Body=b"a=9\nb=3\n")   # another process, since
        cfg.props["c"] = "4"
        server.reset_counts()
        save_table_config(cfg)
        assert _requests(server, "hoodie.properties") == ["PUT", "GET", "PUT"]
    got = parse_properties(storage.read_bytes(path).decode())
    assert {k: got.get(k) for k in "abc"} == {"a": "9", "b": "3", "c": "4"}
