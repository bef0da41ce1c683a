"""The boto3 client every S3 request goes through, and the conditional puts S3 arbitrates between writers.

boto3, not pyarrow, for what pyarrow.fs cannot say (`If-None-Match`, `If-Match`, an object's ETag) and for the
calls where pyarrow makes several requests for one answer."""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import threading
import time
from typing import Any

from engine.errors import TidemarkError
from engine.io.storage import aws_env
from engine.io.storage.interface import PublishConflict
from engine.io.storage.paths import bucket_key
from engine.io.threads import DECODE_THREADS, REQUEST_THREADS, UPLOAD_THREADS

_LOCK = threading.Lock()
_S3_CLIENTS: dict[tuple[str | None, ...], Any] = {}

# Below this, a PUT sends its body with its headers (the AWS SDK for Go's threshold, 2 MiB).
EXPECT_CONTINUE_BYTES = 2 << 20

# Tries of a conditional put the store answers 409 (another conditional write to the key in progress: AWS asks
# for a retry, which then gets 412 or succeeds), the pause doubling from the first.
CONFLICT_TRIES = 5
CONFLICT_PAUSE_S = 0.05


def s3_client() -> Any:
    """A boto3 S3 client from the same AWS chain as pyarrow's."""
    import boto3  # only object-store tables need it

    key = aws_env.env_key()
    with _LOCK:
        client = _S3_CLIENTS.get(key)
        if client is None:
            from botocore.config import Config

            # A connection for each thread that may ask at once (engine.io.threads' pools, plus a few callers'
            # own): past the pool's size urllib3 discards connections with a warning on stderr.
            connections = REQUEST_THREADS + UPLOAD_THREADS + DECODE_THREADS + 8
            session = boto3.session.Session(botocore_session=_botocore_session())
            client = session.client("s3", endpoint_url=aws_env.endpoint_url(), region_name=aws_env.region(),
                                    config=Config(max_pool_connections=connections))
            client.meta.events.register("before-call.s3", _send_small_bodies_at_once)
            _S3_CLIENTS[key] = client
    return client


def forget_after_fork() -> None:
    """A forked child (a Celery pool process, a Spark worker) must not share the parent's sockets, nor a lock some
    parent thread held at the fork."""
    global _LOCK
    _LOCK = threading.Lock()
    _S3_CLIENTS.clear()


def is_store_client_error(exc: BaseException) -> bool:
    """Errors of the S3 client itself — no credentials, an endpoint that does not answer, a bucket the store
    does not have — which name their cause in one line."""
    return any(cls.__module__.split(".")[0] in ("botocore", "boto3") for cls in type(exc).__mro__)


def _send_small_bodies_at_once(params: dict[str, Any], **_: Any) -> None:
    """botocore asks every PUT to wait for "100 Continue" before its body: a round trip more per PUT (a
    timeline transition, a base file), which pays only when a large body would be refused. Runs after botocore's
    own handler (registered later on the client)."""
    from botocore.utils import determine_content_length

    headers = params.get("headers") or {}
    if headers.get("Expect") == "100-continue":
        length = determine_content_length(params.get("body"))
        if length is not None and length < EXPECT_CONTINUE_BYTES:
            del headers["Expect"]


def _botocore_session() -> Any:
    """A botocore session whose responses parse timestamps with `parse_timestamp`."""
    import botocore.session

    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
    return session


def parse_timestamp(value: str) -> datetime.datetime:
    """A response's timestamp. Listings give one ISO-8601 `LastModified` per key, and botocore's default parser
    (dateutil) spends ~0.2 ms on each: a 1000-key page cost 200 ms of CPU to parse. `fromisoformat` reads S3's
    form in microseconds; anything else (RFC 1123 headers, epoch numbers) goes to botocore's own parser."""
    parsed = None
    if isinstance(value, str) and value[4:5] == "-":   # "YYYY-…" (a digit string is epoch seconds, not a date)
        with contextlib.suppress(ValueError):
            parsed = datetime.datetime.fromisoformat(value)
    if parsed is None:
        from botocore.utils import parse_timestamp as botocore_parse

        fallback: datetime.datetime = botocore_parse(value)
        return fallback
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def put_if_absent(path: str, data: bytes) -> str:
    """PutObject with `If-None-Match: *`; the new object's ETag. PublishConflict when the object was there first."""
    return conditional_put(path, data, {"IfNoneMatch": "*"}, "already exists (the store refused a second create")


def conditional_put(path: str, data: bytes, condition: dict[str, str], refused: str) -> str:
    """PutObject under `condition` (If-None-Match / If-Match); the new object's ETag. PublishConflict (`refused`)
    when the store refuses it — unless an earlier try of ours landed and its lost answer made us try again into
    our own object (`own_landed_put`): then the put happened, and is ours."""
    from botocore.exceptions import ClientError

    bucket, key = bucket_key(path)
    resent = False   # whether a put of ours may have landed before the answer we got (botocore's or our retry)
    for attempt in range(CONFLICT_TRIES):
        try:
            return str(s3_client().put_object(Bucket=bucket, Key=key, Body=data, **condition).get("ETag", ""))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            meta = exc.response.get("ResponseMetadata", {})
            status = meta.get("HTTPStatusCode")
            resent = resent or bool(meta.get("RetryAttempts"))
            if (code == "ConditionalRequestConflict" or status == 409) and attempt + 1 < CONFLICT_TRIES:
                resent = True   # the write in progress may be an earlier try of ours
                time.sleep(CONFLICT_PAUSE_S * 2 ** attempt)
                continue
            # If-Match is also refused by an object gone since (404, NoSuchKey); a missing bucket is no conflict
            gone = "IfMatch" in condition and code != "NoSuchBucket" and (code == "NoSuchKey" or status == 404)
            if gone or code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                own = own_landed_put(bucket, key, data) if resent else None
                if own is not None:
                    return own
                raise PublishConflict(f"{path} {refused}: {code or status})") from None
            raise TidemarkError(f"{path}: conditional put failed: {code or exc}") from exc
    raise AssertionError("unreachable: the last try returns or raises")


def own_landed_put(bucket: str, key: str, data: bytes) -> str | None:
    """The object's ETag when it holds exactly `data` — a put whose response was lost (a timeout, a 5xx after the
    write landed) and that was retried into its own object's 412: the publish happened, it is ours. None
    otherwise: another writer's object; one whose ETag is not its MD5 (e.g. under SSE-KMS); an object gone since;
    and empty `data` (an empty pending instant file), which any other writer's object would match too."""
    from botocore.exceptions import ClientError

    if not data:
        return None
    try:
        head = s3_client().head_object(Bucket=bucket, Key=key)
    except ClientError:
        return None
    etag = str(head.get("ETag", ""))
    same = int(head.get("ContentLength", -1)) == len(data) and \
        etag.strip('"') == hashlib.md5(data, usedforsecurity=False).hexdigest()
    return etag if same else None


def still_tagged(path: str, etag: str) -> bool | None:
    """Whether the S3 object is still the one with `etag`: a HEAD with `If-Match`, which the store answers from
    the object as it is now (True), refuses with 412 when it was replaced (False), or 404 when it is gone (None).
    A fence: a lock holder proves the lock object is still its own lease without reading it."""
    from botocore.exceptions import ClientError

    bucket, key = bucket_key(path)
    try:
        s3_client().head_object(Bucket=bucket, Key=key, IfMatch=etag)
        return True
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("PreconditionFailed", "412") or status == 412:
            return False
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            return None
        raise OSError(f"{path}: {code or exc}") from exc


os.register_at_fork(after_in_child=forget_after_fork)
