"""Publishing a table file: whole or absent, never over a committed one, on every store."""
from __future__ import annotations

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
