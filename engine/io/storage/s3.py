"""S3 (and S3-compatible stores): pyarrow's file system where it makes one request per answer, boto3 where pyarrow
would make several (a GET without a HEAD first, one PUT instead of a 3-request multipart upload, one DELETE, a
listing that keeps each object's ETag) or cannot say what is needed (conditional puts)."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from engine.io.storage import aws_env
from engine.io.storage.arrowfs import ArrowStore
from engine.io.storage.interface import Entry, Positional, PublishConflict
from engine.io.storage.paths import bucket_key, join
from engine.io.storage.s3_api import put_if_absent, s3_client
from engine.io.storage.s3_upload import S3Upload
from engine.io.threads import on_requests_pool, requests_pool, settle

# S3 Express One Zone directory buckets are named `<base>--<zone id>--x-s3`, a suffix general purpose buckets may
# not take.
_DIRECTORY_BUCKET_SUFFIX = "--x-s3"

COPY_OBJECT_MAX_BYTES = 5 << 30   # S3's limit of one CopyObject

# What answers a listing: the futures of its requests, and how their results become entries.
Requests = tuple[list[Future[Any]], Callable[[list[Any]], list[Entry]]]


def ordered_listings(bucket: str) -> bool:
    """Whether the bucket lists keys in order and takes `StartAfter` and prefixes that end mid-name: a general
    purpose bucket does; a directory bucket lists in no particular order, refuses `StartAfter` and takes only
    prefixes ending in "/". Stepping over a folder or listing by name prefix there would lose keys silently."""
    return not bucket.endswith(_DIRECTORY_BUCKET_SUFFIX)


# ------------------------------------------------------------------ requests (each function: the requests it says)


def head_exists(path: str) -> bool:
    """One HEAD: whether an object is at `path`."""
    from botocore.exceptions import ClientError

    bucket, key = bucket_key(path)
    try:
        s3_client().head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("404", "NoSuchKey", "NotFound"):
            return False
        raise OSError(f"{path}: {code or exc}") from exc


def get_sized(path: str, byte_range: str | None = None) -> tuple[bytes, str, int]:
    """One GET: the bytes (all, or `byte_range`), the ETag of the object they came from ("" for an empty object) and
    the whole object's size (a ranged GET's Content-Range gives it)."""
    from botocore.exceptions import ClientError

    bucket, key = bucket_key(path)
    try:
        kwargs = {"Range": byte_range} if byte_range else {}
        resp = s3_client().get_object(Bucket=bucket, Key=key, **kwargs)
        body: bytes = resp["Body"].read()
        total = str(resp.get("ContentRange") or "").rpartition("/")[2]
        return body, str(resp.get("ETag", "")), int(total) if total.isdigit() else len(body)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404", "NotFound"):
            raise FileNotFoundError(path) from None
        if code == "InvalidRange":   # an empty object has no byte 0
            return b"", "", 0
        raise OSError(f"{path}: {code or exc}") from exc


def get_tagged(path: str) -> tuple[bytes, str]:
    """One GET: the whole object and its ETag."""
    body, etag, _ = get_sized(path)
    return body, etag


def pages(bucket: str, prefix: str, delimiter: str | None = None, **params: Any) -> Iterator[dict[str, Any]]:
    """The ListObjectsV2 pages of `prefix`, one request each (none for a bucket that does not exist); `params`: more
    of the request's (StartAfter, MaxKeys: the size of each page)."""
    from botocore.exceptions import ClientError

    kwargs = {"Bucket": bucket, "Prefix": prefix, **({"Delimiter": delimiter} if delimiter else {}), **params}
    try:
        yield from s3_client().get_paginator("list_objects_v2").paginate(**kwargs)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code", "") != "NoSuchBucket":
            raise


def children_pages(path: str, name_prefix: str) -> list[dict[str, Any]]:
    bucket, key = bucket_key(path)
    return list(pages(bucket, (key.rstrip("/") + "/" if key else "") + name_prefix, "/"))


def _objects(bucket: str, prefix: str, **start: Any) -> list[dict[str, Any]]:
    """The objects under `prefix` (from `StartAfter=` when given), every page."""
    return [obj for page in pages(bucket, prefix, **start) for obj in page.get("Contents") or []]


def _objects_but(bucket: str, prefix: str, fence: str) -> list[dict[str, Any]]:
    """The objects under `prefix` but those under the folder `fence` (a key prefix ending in "/"), in one paginated
    LIST: the folder's name as its `Delimiter` rolls every key that holds that name up into one common prefix, so the
    folder's keys are not returned (S3 takes any string as a delimiter). A common prefix other than `fence` itself
    (the name deeper down, or inside a longer name: `r0/.hoodie/`, `x.hoodie/`) is listed whole, and a store that
    ignores the delimiter returns the folder's keys, dropped here: nothing but the folder's keys is left out."""
    objects: list[dict[str, Any]] = []
    rolled: list[str] = []
    for page in pages(bucket, prefix, fence[len(prefix):]):
        objects += page.get("Contents") or []
        rolled += [sub["Prefix"] for sub in page.get("CommonPrefixes") or [] if sub["Prefix"] != fence]
    for other in dict.fromkeys(rolled):
        objects += _objects(bucket, other)
    return [obj for obj in objects if not obj["Key"].startswith(fence)]


# ------------------------------------------------------------------ listings as entries


def _listed_object(path: str, rel: str, obj: dict[str, Any]) -> Entry:
    return Entry(rel, join(path, rel), False, int(obj["Size"]), int(obj["LastModified"].timestamp() * 1000),
                 etag=str(obj.get("ETag", "")))


def children_entries(path: str, name_prefix: str, listed: list[dict[str, Any]]) -> list[Entry]:
    """The direct children `children_pages` listed: files with their ETags, and sub-folders."""
    key = bucket_key(path)[1]
    folder = key.rstrip("/") + "/" if key else ""
    files, folders = [], []
    for page in listed:
        files += [_listed_object(path, obj["Key"][len(folder):], obj) for obj in page.get("Contents") or []
                  if obj["Key"] != folder]   # not a folder marker
        folders += [sub["Prefix"][len(folder):].rstrip("/") for sub in page.get("CommonPrefixes") or []]
    return files + [Entry(d, join(path, d), True, 0, 0) for d in folders]


def children(path: str, name_prefix: str = "") -> list[Entry]:
    """The direct children of a folder whose names start with `name_prefix`: one paginated LIST."""
    return children_entries(path, name_prefix, children_pages(path, name_prefix))


def _tree_entries(path: str, objects: list[dict[str, Any]]) -> list[Entry]:
    key = bucket_key(path)[1]
    prefix = key.rstrip("/") + "/" if key else ""
    files: list[Entry] = []
    folders: set[str] = set()
    for obj in objects:
        rel = obj["Key"][len(prefix):]
        parts = rel.rstrip("/").split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        if rel.endswith("/"):
            folders.add(rel.rstrip("/"))
        elif rel:
            files.append(_listed_object(path, rel, obj))
    return files + [Entry(d, join(path, d), True, 0, 0) for d in sorted(folders) if d]


def tree_requests(pool: Any, path: str, skip: str | None) -> Requests:
    """`list_tree`'s requests as futures of their own, and how their objects become its entries: the same paginated
    ListObjectsV2 pyarrow makes, read for what pyarrow's FileInfo drops — each object's ETag. Folders are the keys'
    parent prefixes and folder markers (keys ending in "/"). With `skip`, the folder's keys are not fetched: the one
    listing takes the folder's name as its delimiter (`_objects_but`), so whatever sorts before the folder (a
    non-partitioned table's `.<file id>` logs before `.hoodie/`) and after it comes in the same pages."""
    bucket, key = bucket_key(path)
    prefix = key.rstrip("/") + "/" if key else ""
    if skip is None:
        return [pool.submit(_objects, bucket, prefix)], lambda r: _tree_entries(path, r[0])
    fence = prefix + skip + "/"
    if not ordered_listings(bucket):   # a directory bucket takes only "/" as a delimiter
        return [pool.submit(_objects, bucket, prefix)], \
            lambda r: _tree_entries(path, [obj for obj in r[0] if not obj["Key"].startswith(fence)])
    return [pool.submit(_objects_but, bucket, prefix, fence)], lambda r: _tree_entries(path, r[0])


class _Inline:
    """A `submit` that runs the call at once: work on the requests pool must not wait for more of its own pool."""

    @staticmethod
    def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
        done: Future[Any] = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever takes the result, as a pool would
            done.set_exception(exc)
        return done


def tree(path: str, skip: str | None = None) -> list[Entry]:
    """`tree_requests` made now, in flight together (one after another in pool work)."""
    parts, combine = tree_requests(_Inline if on_requests_pool() else requests_pool(), path, skip)
    try:
        return combine([f.result() for f in parts])
    finally:
        settle(parts)


# ------------------------------------------------------------------ the store


class S3Store(ArrowStore):
    replaces_whole = True   # one PUT replaces an object whole

    def conditional_put(self, path: str) -> bool:
        return aws_env.conditional_put()

    def conditional_replace(self, path: str) -> bool:
        return aws_env.conditional_put()   # a store with If-None-Match has If-Match too (AWS since 2024)

    def file_exists(self, path: str) -> bool:
        """One HEAD (pyarrow's `exists` follows a missing key with a LIST to tell an empty folder)."""
        return head_exists(path)

    def list_starting_with(self, path: str, name_prefixes: Sequence[str]) -> list[Entry]:
        """One LIST per prefix: what it returns, not the whole folder (the whole folder, filtered, in a bucket that
        takes no prefix ending mid-name)."""
        if not ordered_listings(bucket_key(path)[0]):
            return [e for e in children(path) if not e.is_dir and e.name.startswith(tuple(name_prefixes))]
        return [e for prefix in name_prefixes for e in children(path, prefix) if not e.is_dir]

    def list_tree(self, path: str, skip: str | None = None) -> list[Entry]:
        """One paginated listing (not one per folder); `skip`'s keys are not even fetched."""
        return tree(path, skip)

    def read_whole(self, path: str) -> bytes:
        return get_sized(path)[0]   # one GET (pyarrow's stream would HEAD first)

    def positional(self, path: str, known_size: int | None = None) -> Positional:
        if known_size is None:
            return super().positional(path)
        return _Ranged(path, known_size)   # the listing told the size: ranged GETs only, no HEAD

    def write_bytes(self, path: str, data: bytes) -> None:
        """One PutObject (pyarrow's stream is a 3-request multipart upload)."""
        bucket, key = bucket_key(path)
        s3_client().put_object(Bucket=bucket, Key=key, Body=data)

    @contextlib.contextmanager
    def open_output(self, path: str, exclusive: bool = False) -> Iterator[S3Upload]:
        """One PutObject up to UPLOAD_PART_BYTES, a multipart upload beyond; a failure inside the block publishes
        nothing. `exclusive`: `If-None-Match: *` on the request that makes the object visible."""
        out = S3Upload(path, exclusive=exclusive)
        try:
            yield out
        except BaseException:
            out.abort()
            raise
        out.close()

    def create_exclusive(self, path: str, data: bytes, staging_dir: str | None = None) -> str | None:
        """One PutObject with `If-None-Match: *`: the store refuses the second of two racing writers (412)."""
        if not self.conditional_put(path):
            return super().create_exclusive(path, data, staging_dir)
        return put_if_absent(path, data)

    def copy_new(self, src: str, dst: str, size: int | None = None) -> None:
        """One CopyObject with `If-None-Match: *` (PublishConflict when the store refuses it; a store that ignores
        the condition copies anyway)."""
        if not self.conditional_put(dst) or (size or 0) >= COPY_OBJECT_MAX_BYTES:
            self.copy(src, dst)
            return
        from botocore.exceptions import ClientError

        bucket, key = bucket_key(dst)
        src_bucket, src_key = bucket_key(src)
        try:
            s3_client().copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": src_bucket, "Key": src_key},
                                    IfNoneMatch="*")
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412:
                raise PublishConflict(f"{dst} already exists (the store refused to copy over it)") from None
            raise

    def remove(self, path: str) -> None:
        """One DELETE (S3's is idempotent: deleting what is gone is done; pyarrow would HEAD first and re-create a
        folder marker after)."""
        bucket, key = bucket_key(path)
        s3_client().delete_object(Bucket=bucket, Key=key)

    def remove_tree(self, path: str) -> None:
        """One LIST of the keys (folder markers other tools wrote included), then a DELETE per key; pyarrow would
        HEAD and LIST the prefix twice even when nothing is there."""
        bucket, key = bucket_key(path)
        client = s3_client()
        for obj in _objects(bucket, key.rstrip("/") + "/"):
            client.delete_object(Bucket=bucket, Key=obj["Key"])


class _Ranged(Positional):
    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size
        # ETags of the objects the ranged GETs read (one, unless the object was replaced between them)
        self.etags = set()

    def pread(self, length: int, offset: int) -> bytes:
        body, etag, total = get_sized(self.path, f"bytes={offset}-{offset + length - 1}")
        # an object of another size than the listing said (replaced since) read only up to the listed size:
        # not a read of that object whole, so its ETag must not vouch for what was derived ("": none)
        self.etags.add(etag if total == self.size else "")
        return body
