"""One S3 object written as a stream (a Parquet writer's output): one PutObject when small, a multipart upload
otherwise, the parts going up while the caller writes on."""
from __future__ import annotations

import contextlib
from typing import Any

from engine.io.storage import aws_env
from engine.io.storage.interface import PublishConflict
from engine.io.storage.paths import bucket_key
from engine.io.storage.s3_api import own_landed_put, s3_client
from engine.io.threads import uploads_pool

UPLOAD_PART_BYTES = 16 << 20


class S3Upload:
    """A write-only stream to one S3 object: buffered, then ONE PutObject on close when it stayed under
    UPLOAD_PART_BYTES (pyarrow's stream always makes a multipart upload: 3 requests even for a small file);
    beyond that a multipart upload whose parts go up on a background thread while the caller writes on."""

    def __init__(self, path: str, part_bytes: int | None = None, exclusive: bool = False) -> None:
        self.path = path
        # If-None-Match on the request that makes the object visible: S3 refuses it (412) when one is there
        self._condition = {"IfNoneMatch": "*"} if exclusive and aws_env.conditional_put() else {}
        self._bucket, self._key = bucket_key(path)
        self._part_bytes = part_bytes or UPLOAD_PART_BYTES
        self._buf = bytearray()
        self._pos = 0
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._pending: Any = None   # the part being uploaded
        self.closed = False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        """Nothing to do: bytes go to the store in parts, or whole on close."""

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"{self.path}: write to a closed upload")
        view = memoryview(data).cast("B")
        self._buf += view
        self._pos += len(view)
        if len(self._buf) >= self._part_bytes:
            self._send_part()
        return len(view)

    def _send_part(self) -> None:
        client = s3_client()
        if self._upload_id is None:
            self._upload_id = client.create_multipart_upload(Bucket=self._bucket, Key=self._key)["UploadId"]
        self._wait_part()   # at most one part in flight: memory stays ~2 parts
        body, number = bytes(self._buf), len(self._parts) + 1
        self._buf = bytearray()
        self._pending = uploads_pool().submit(client.upload_part, Bucket=self._bucket, Key=self._key,
                                          UploadId=self._upload_id, PartNumber=number, Body=body)
        self._parts.append({"PartNumber": number})

    def _wait_part(self) -> None:
        if self._pending is not None:
            self._parts[-1]["ETag"] = self._pending.result()["ETag"]
            self._pending = None

    def close(self) -> None:
        if self.closed:
            return
        from botocore.exceptions import ClientError

        client = s3_client()
        try:
            body = b""   # the single PutObject's bytes, kept to recognise our own landed put
            if self._upload_id is None:
                body = bytes(self._buf)
                client.put_object(Bucket=self._bucket, Key=self._key, Body=body, **self._condition)
            else:
                if self._buf:
                    self._send_part()
                self._wait_part()
                client.complete_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id,
                                                 MultipartUpload={"Parts": self._parts}, **self._condition)
        except ClientError as exc:
            self.abort()
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            resent = bool(exc.response.get("ResponseMetadata", {}).get("RetryAttempts"))
            if self._condition and status == 412 and resent and self._upload_id is None \
                    and own_landed_put(self._bucket, self._key, body) is not None:
                self._finish()   # botocore's retry ran into our own first try, which landed: the object is ours
                return
            if self._condition and status == 412:
                raise PublishConflict(f"{self.path} already exists (the store refused to replace it)") from None
            raise
        except BaseException:
            self.abort()
            raise
        self._finish()

    def abort(self) -> None:
        """Drop what was written: nothing appears at the path."""
        if self.closed:
            return
        if self._upload_id is not None:
            with contextlib.suppress(Exception):
                if self._pending is not None:
                    self._pending.result()
            with contextlib.suppress(Exception):
                s3_client().abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)
        self._finish()

    def _finish(self) -> None:
        self.closed = True
        self._buf = bytearray()
