"""`storage.open_output` on S3 (moto server): a small file is one PutObject, a large one a multipart upload whose
object appears whole on close, and a failure inside the block leaves nothing at the path."""
from __future__ import annotations

import os

import pytest

from engine.io import storage
from engine.io.storage import s3_upload
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _kinds(requests: list[dict], key: str) -> list[str]:
    return [r["method"] + ("?uploads" if "uploads" in r["query"] else "") for r in requests if r["path"].endswith(key)]


def test_a_small_file_is_one_put(s3_env):  # noqa: F811
    path = f"{s3_env['bucket_uri']}/t/small.parquet"
    s3_env["server"].reset_counts()
    with storage.open_output(path) as out:
        out.write(b"abc")
        out.write(memoryview(b"def"))
        assert out.tell() == 6
    assert _kinds(s3_env["server"].counts(), "small.parquet") == ["PUT"]
    assert storage.read_bytes(path) == b"abcdef"


def test_a_large_file_is_a_multipart_upload_seen_whole(s3_env, monkeypatch):  # noqa: F811
    monkeypatch.setattr(s3_upload, "UPLOAD_PART_BYTES", 5 << 20)   # S3's smallest part
    path = f"{s3_env['bucket_uri']}/t/large.bin"
    data = os.urandom((11 << 20) + 123)
    s3_env["server"].reset_counts()
    with storage.open_output(path) as out:
        for i in range(0, len(data), 1 << 20):
            out.write(data[i:i + (1 << 20)])
            assert not storage.exists(path)   # nothing visible before the upload completes
        assert out.tell() == len(data)
    kinds = [k for k in _kinds(s3_env["server"].counts(), "large.bin") if k != "HEAD"]   # the test's own probes
    assert kinds[0] == "POST?uploads" and kinds.count("PUT") == 3 and kinds[-1] == "POST", kinds
    assert storage.read_bytes(path) == data


@pytest.mark.parametrize("size", [10, (6 << 20)])
def test_a_failure_inside_the_block_publishes_nothing(s3_env, monkeypatch, size):  # noqa: F811
    monkeypatch.setattr(s3_upload, "UPLOAD_PART_BYTES", 5 << 20)
    path = f"{s3_env['bucket_uri']}/t/torn-{size}.parquet"
    with pytest.raises(RuntimeError, match="writer failed"), storage.open_output(path) as out:
        out.write(b"x" * size)
        raise RuntimeError("writer failed")
    assert not storage.exists(path)
    client = s3_env["server"].client()
    bucket = s3_env["bucket_uri"][len("s3://"):]
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")   # aborted, no parts left behind
