"""`storage.prefetched` on S3 (moto server): a task's whole-object reads start together, each object is fetched
once and served once, errors surface where the read happens, and local files are read as before."""
from __future__ import annotations

import threading

import pytest

from engine.io import storage
from engine.io.storage import operation
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _gets(requests: list[dict], prefix: str) -> list[str]:
    return sorted(r["path"].rsplit("/", 1)[-1] for r in requests if r["method"] == "GET" and prefix in r["path"])


def test_each_prefetched_object_is_one_get_served_once(s3_env):  # noqa: F811
    paths = [f"{s3_env['bucket_uri']}/p/log{i}" for i in range(4)]
    for i, p in enumerate(paths):
        storage.write_bytes(p, f"block {i}".encode() * 1000)
    server = s3_env["server"]
    server.reset_counts()
    with storage.prefetched(paths[:3]):
        assert [storage.read_bytes(p) for p in reversed(paths)] == [f"block {i}".encode() * 1000 for i in (3, 2, 1, 0)]
        # a second read of a prefetched path is a plain GET again: nothing is held once served
        assert storage.read_bytes(paths[0]) == b"block 0" * 1000
    assert _gets(server.counts(), "/p/log") == ["log0", "log0", "log1", "log2", "log3"]


def test_what_the_block_does_not_read_is_dropped(s3_env):  # noqa: F811
    paths = [f"{s3_env['bucket_uri']}/q/log{i}" for i in range(3)]
    for p in paths:
        storage.write_bytes(p, b"x")
    with storage.prefetched(paths):
        assert storage.read_bytes(paths[1]) == b"x"
    assert operation._PREFETCHED.get() is None   # the scope is gone: later reads go to the store
    assert storage.read_bytes(paths[0]) == b"x"


def test_a_missing_object_fails_where_it_is_read(s3_env):  # noqa: F811
    there, missing = f"{s3_env['bucket_uri']}/m/there", f"{s3_env['bucket_uri']}/m/missing"
    storage.write_bytes(there, b"ok")
    with storage.prefetched([missing, there]):
        assert storage.read_bytes(there) == b"ok"
        with pytest.raises(FileNotFoundError):
            storage.read_bytes(missing)


def test_reads_in_other_threads_see_the_prefetch(s3_env):  # noqa: F811
    import contextvars

    paths = [f"{s3_env['bucket_uri']}/t/log{i}" for i in range(2)]
    for p in paths:
        storage.write_bytes(p, p.encode())
    server = s3_env["server"]
    server.reset_counts()
    got: dict[str, bytes] = {}
    with storage.prefetched(paths):
        # the slice reader decodes on threads that run in a copy of the task's context
        threads = [threading.Thread(target=contextvars.copy_context().run,
                                    args=(lambda p=p: got.__setitem__(p, storage.read_bytes(p)),)) for p in paths]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert got == {p: p.encode() for p in paths}
    assert _gets(server.counts(), "/t/log") == ["log0", "log1"]


def test_local_files_are_not_prefetched(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"local")
    with storage.prefetched([str(path)]):
        assert operation._PREFETCHED.get() is None
        path.write_bytes(b"changed")   # read when asked, not before
        assert storage.read_bytes(str(path)) == b"changed"
