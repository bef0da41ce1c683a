"""Publishing a table file: whole or absent, never over a committed one, on every store."""
from __future__ import annotations

import collections
import os

import pyarrow as pa
import pytest

from engine.errors import TidemarkError
from engine.io import storage
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_publish_never_overwrites_and_leaves_no_temp(tmp_path, s3_env, where):  # noqa: F811
    root = str(tmp_path / "t") if where == "local" else f"{s3_env['bucket_uri']}/publish"
    storage.make_dirs(root)
    staging = storage.join(root, ".hoodie", ".temp", "001")
    dest = storage.join(root, "committed.log")
    storage.publish_new(dest, b"committed", staging)
    with pytest.raises(TidemarkError, match="another writer produced the same file name"):
        storage.publish_new(dest, b"other writer", staging)
    with pytest.raises(TidemarkError, match="already exists"), storage.publishing(dest, staging) as out:
        out.write(b"streamed")
    assert storage.read_bytes(dest) == b"committed"
    fresh = storage.join(root, "fresh.parquet")
    with storage.publishing(fresh, staging) as out:
        out.write(b"streamed")
        assert not storage.exists(fresh)   # nothing to see until the block ends
    assert storage.read_bytes(fresh) == b"streamed"
    if where == "local":
        assert os.listdir(staging) == []   # every temp file linked and gone, or dropped


def test_a_failed_stream_publishes_nothing(tmp_path):
    staging, dest = str(tmp_path / "staging"), str(tmp_path / "base.parquet")
    with pytest.raises(RuntimeError), storage.publishing(dest, staging) as out:
        out.write(pa.py_buffer(b"half"))
        raise RuntimeError("the writer failed")
    assert not os.path.exists(dest) and os.listdir(staging) == []


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_publisher_publishes_in_the_background_and_waits_for_all(tmp_path, s3_env, where):  # noqa: F811
    root = str(tmp_path / "t") if where == "local" else f"{s3_env['bucket_uri']}/background"
    storage.make_dirs(root)
    staging = storage.join(root, ".hoodie", ".temp", "001")
    names = [f"{i}.log" for i in range(5)]   # more than Publisher.DEPTH: the oldest are waited for on the way
    with storage.Publisher() as publisher:
        for i, name in enumerate(names):
            publisher.publish(storage.join(root, name), [b"log ", memoryview(str(i).encode())], staging)
    assert [storage.read_bytes(storage.join(root, n)) for n in names] == [f"log {i}".encode() for i in range(5)]
    if where == "local":
        assert os.listdir(staging) == []


def test_a_publishers_conflict_is_raised_by_its_wait_and_stops_later_publishes(tmp_path):
    staging, root = str(tmp_path / "staging"), str(tmp_path / "t")
    os.makedirs(root)
    storage.publish_new(os.path.join(root, "taken.log"), b"committed", staging)
    with pytest.raises(TidemarkError, match="another writer produced the same file name"):
        with storage.Publisher() as publisher:
            publisher.publish(os.path.join(root, "taken.log"), [b"other writer"], staging)
            publisher.wait()
    assert storage.read_bytes(os.path.join(root, "taken.log")) == b"committed"
    publisher = storage.Publisher()
    publisher.publish(os.path.join(root, "taken.log"), [b"other writer"], staging)
    publisher._pending[0].exception(timeout=30)   # waits for the failed publish to end, raises nothing
    with pytest.raises(TidemarkError, match="already exists"):   # the next publish reports it, before starting
        publisher.publish(os.path.join(root, "after.log"), [b"next"], staging)
    assert not os.path.exists(os.path.join(root, "after.log"))


def test_a_failing_block_leaves_nothing_publishing(tmp_path):
    staging, root = str(tmp_path / "staging"), str(tmp_path / "t")
    os.makedirs(root)
    with pytest.raises(RuntimeError, match="encoding failed"), storage.Publisher() as publisher:
        publisher.publish(os.path.join(root, "first.log"), [b"first"], staging)
        raise RuntimeError("encoding failed")
    assert publisher._pending == collections.deque()   # settled: started work finished, nothing left queued
    # Cancelled before it started, or published whole: never a temp file left behind.
    assert not os.path.exists(staging) or os.listdir(staging) == []
