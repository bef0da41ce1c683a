"""Where a table's bytes live: one storage layer for every read, write, list, rename, delete, link and copy.

A table is named by a path or a URI. A plain path (or `file://…`) is the local file system and keeps the
POSIX calls it always had — hard-link publishing, relative symlinks for carry-over, `fsync`, `flock` —
because those are the guarantees the local layout was built on. Anything with a scheme (`s3://bucket/t`,
and any other scheme `pyarrow.fs.FileSystem.from_uri` resolves) goes through `pyarrow.fs`, in the driver
and in the Spark executors' Python alike: Spark's own Hadoop readers have no object-store connector here.

Object stores have no links, no rename and no `flock`, so the layer says what a store can do
(`supports_links`, `conditional_put`) and the callers choose: carry-over copies (server-side, S3
CopyObject), and completed instants are published with a conditional put (`If-None-Match: *`), which the
store itself arbitrates between racing writers.

Credentials and endpoint of `s3://` come from the standard AWS chain (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, AWS_PROFILE, AWS_ENDPOINT_URL /
AWS_ENDPOINT_URL_S3). Nothing is cached across operations but the client objects: every listing goes to the
store, and so does every read (a task may start its reads early, `prefetched`, and is served each of them once),
except the small metadata files a caller reads with `read_shared` inside one table operation
(`operation_reads`): hoodie.properties and timeline instants are fetched once per operation, and whatever this
process writes, copies over or deletes is updated or forgotten there.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import posixpath
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from engine import env
from engine.errors import ConfigError, TidemarkError
from engine.io.threads import (
    DECODE_THREADS,
    REQUEST_THREADS,
    UPLOAD_THREADS,
    on_requests_pool,
    requests_pool,
    settle,
    uploads_pool,
)

_SCHEME_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
# Env vars whose values decide how a store is reached: a change makes a new client (tests switch endpoints).
_AWS_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH",
            "TIDEMARK_S3_CONDITIONAL_PUT")


class PublishConflict(TidemarkError):
    """A file we create-if-absent already exists: another writer published it first."""


# ------------------------------------------------------------------------------------------- naming


def scheme(path: str) -> str:
    """The URI scheme of `path` ("" for a local path; `file://` counts as local)."""
    m = _SCHEME_RE.match(path)
    if m is None:
        return ""
    s = m.group("scheme").lower()
    return "" if s == "file" else s


def is_remote(path: str) -> bool:
    """True for a URI of a store reached through pyarrow.fs (s3://, gs://, hdfs://, …)."""
    return scheme(path) != ""


def resolve(path: str) -> str:
    """A table or input location as the API keeps it: a URI as given (no trailing slash), `file://x` as the
    local path x, a relative local path made absolute (executors run in other working directories)."""
    text = str(path).strip()
    if not text:
        raise ConfigError("empty path: name a local folder or a URI such as s3://bucket/prefix/table")
    s = scheme(text)
    if s:
        parts = urlsplit(text)
        if not parts.netloc:
            raise ConfigError(f"{text}: a {s}:// URI needs a bucket or host (e.g. {s}://bucket/prefix)")
        return text.rstrip("/")
    if text.lower().startswith("file://"):
        parsed = urlsplit(text)
        if parsed.netloc not in ("", "localhost"):
            raise ConfigError(f"{text}: a file:// URI must name a local path (file:///…), not host {parsed.netloc!r}")
        from urllib.parse import unquote

        return os.path.abspath(unquote(parsed.path))
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/[^/]", text):
        # `s3:/lake/t` is a URI someone lost a slash of, never a folder named "s3:".
        raise ConfigError(f"{text}: looks like a URI with a missing slash (write {text.replace(':/', '://', 1)})")
    return os.path.abspath(os.path.expanduser(text))


def absolute_location(path: str) -> str:
    """`path` as the location every process means by it (`resolve`): relative paths against
    this process's working directory (`~` expanded), `file://` URIs as local paths, other URIs unchanged, and
    never a URI taken for a folder name."""
    if not isinstance(path, str) or not path:
        raise ConfigError(f"a path must be a non-empty string, got {path!r}")
    return resolve(path)


def split_locations(text: str) -> list[str]:
    """A list of table roots as an environment variable holds it (TIDEMARK_TABLE_ROOTS): separated by
    `os.pathsep` (":") or ",", where the ":" of a URI's scheme ("s3://bucket/prefix") separates nothing.
    Each is resolved (`resolve`)."""
    out: list[str] = []
    for piece in text.replace(",", os.pathsep).split(os.pathsep):
        if out and piece.startswith("//") and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", out[-1]):
            out[-1] = f"{out[-1]}:{piece}"
        elif piece.strip():
            out.append(piece.strip())
    return [resolve(p) for p in out]


def is_within(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it (URIs by prefix; both already `resolve`d)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def join(base: str, *parts: str) -> str:
    """`base` joined with relative `parts` ("/" separated for URIs and local paths alike)."""
    if is_remote(base):
        return posixpath.join(base, *[p for p in parts if p])
    return os.path.join(base, *parts)


def parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) if is_remote(path) else os.path.dirname(path)


def name_of(path: str) -> str:
    return posixpath.basename(path.rstrip("/"))


def relative(path: str, base: str) -> str:
    """`path` relative to `base` ("/"-separated; "" when equal)."""
    if is_remote(base):
        b = base.rstrip("/") + "/"
        return "" if path.rstrip("/") == base.rstrip("/") else path[len(b):] if path.startswith(b) else path
    rel = os.path.relpath(path, base)
    return "" if rel == "." else rel.replace(os.sep, "/")


# ------------------------------------------------------------------------------------------- stores


_LOCK = threading.Lock()
# (scheme[, bucket or host], the AWS environment) -> its file system
_FILESYSTEMS: dict[tuple[str | tuple[str | None, ...], ...], pafs.FileSystem] = {}


def _env_key() -> tuple[str | None, ...]:
    return tuple(os.environ.get(k) for k in _AWS_ENV)


def endpoint_url() -> str | None:
    """The S3 endpoint the AWS chain names (AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL), None for AWS."""
    return env.text("AWS_ENDPOINT_URL_S3") or env.text("AWS_ENDPOINT_URL") or None


def region() -> str | None:
    return env.text("AWS_REGION") or env.text("AWS_DEFAULT_REGION") or None


def _s3_filesystem() -> pafs.FileSystem:
    kwargs: dict[str, Any] = {}
    endpoint = endpoint_url()
    if endpoint:
        parts = urlsplit(endpoint)
        kwargs["endpoint_override"] = parts.netloc or parts.path
        kwargs["scheme"] = parts.scheme or "https"
    if region():
        kwargs["region"] = region()
    # Credentials: the AWS SDK's default chain (env vars, AWS_PROFILE / config files, instance roles).
    return pafs.S3FileSystem(**kwargs)


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system holding `path` and the path inside it."""
    s = scheme(path)
    if not s:
        return pafs.LocalFileSystem(), os.path.abspath(path)
    key: tuple[str | tuple[str | None, ...], ...] = ((s, _env_key()) if s in ("s3", "s3a")
                                                     else (s, urlsplit(path).netloc, _env_key()))
    with _LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is None:
            fs = _s3_filesystem() if s in ("s3", "s3a") else _gcs_filesystem() if s in ("gs", "gcs") \
                else pafs.FileSystem.from_uri(path)[0]
            _FILESYSTEMS[key] = fs
    if s in ("s3", "s3a", "gs", "gcs"):
        bucket, name = _bucket_key(path)
        return fs, f"{bucket}/{name}".rstrip("/")
    return fs, pafs.FileSystem.from_uri(path)[1]


# How long a GCS request is retried (pyarrow's default is 15 minutes: a machine without Google credentials
# would seem to hang on every command before it says so).
GCS_RETRY_S = 20


def _gcs_filesystem() -> pafs.FileSystem:
    return pafs.GcsFileSystem(retry_time_limit=datetime.timedelta(seconds=GCS_RETRY_S))


def supports_links(path: str) -> bool:
    """Whether the store has symlinks and hard links (only the local file system)."""
    return not is_remote(path)


def conditional_put(path: str) -> bool:
    """Whether the store arbitrates create-if-absent itself: the local file system (hard links) and S3
    (`If-None-Match: *`, unless TIDEMARK_S3_CONDITIONAL_PUT=false says this S3-compatible store lacks it)."""
    s = scheme(path)
    if not s:
        return True
    if s in ("s3", "s3a"):
        return env.flag("TIDEMARK_S3_CONDITIONAL_PUT", True)
    return False


# ------------------------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Entry:
    """One listed file or folder. Remote stores have no links: `is_link` is False there."""

    name: str
    path: str
    is_dir: bool
    size: int
    mtime_ms: int
    is_link: bool = False
    etag: str = ""   # the object's ETag where the listing gives one (S3 `list_tree`): changes with its bytes


def exists(path: str) -> bool:
    if not is_remote(path):
        return os.path.exists(path)
    fs, p = filesystem(path)
    return bool(fs.get_file_info(p).type != pafs.FileType.NotFound)


def file_exists(path: str) -> bool:
    """Whether a file (an object, on S3) is at `path`: one HEAD on S3, where `exists` — pyarrow's — follows a
    missing key with a LIST to tell an empty folder, two requests for the usual answer of a timeline check."""
    if scheme(path) not in ("s3", "s3a"):
        return exists(path)
    asked = _take_asked(("head", path))
    return asked.result() if asked is not None else _s3_head_exists(path)


def _s3_head_exists(path: str) -> bool:
    from botocore.exceptions import ClientError

    bucket, key = _bucket_key(path)
    try:
        s3_client().head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("404", "NoSuchKey", "NotFound"):
            return False
        raise OSError(f"{path}: {code or exc}") from exc


def is_file(path: str) -> bool:
    if not is_remote(path):
        return os.path.isfile(path)
    fs, p = filesystem(path)
    return bool(fs.get_file_info(p).type == pafs.FileType.File)


def is_dir(path: str) -> bool:
    """A folder (on S3: a prefix with at least one object, or a directory marker)."""
    if not is_remote(path):
        return os.path.isdir(path)
    fs, p = filesystem(path)
    return bool(fs.get_file_info(p).type == pafs.FileType.Directory)


def is_link(path: str) -> bool:
    return not is_remote(path) and os.path.islink(path)


def lexists(path: str) -> bool:
    """Exists, or is a (possibly dangling) link."""
    return os.path.lexists(path) if not is_remote(path) else exists(path)


def size(path: str) -> int:
    """The file's size (a local link weighs what its target weighs)."""
    if not is_remote(path):
        return os.path.getsize(path)
    fs, p = filesystem(path)
    info = fs.get_file_info(p)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(path)
    return int(info.size or 0)


def mtime_ms(path: str) -> int:
    if not is_remote(path):
        return int(os.stat(path).st_mtime * 1000)
    fs, p = filesystem(path)
    info = fs.get_file_info(p)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(path)
    return int(info.mtime.timestamp() * 1000) if info.mtime is not None else 0


def _remote_entry(path: str, info: pafs.FileInfo) -> Entry:
    mtime = int(info.mtime.timestamp() * 1000) if info.mtime is not None else 0
    return Entry(info.base_name, join(path, info.base_name), info.type == pafs.FileType.Directory,
                 int(info.size or 0), mtime)


def list_entries(path: str) -> list[Entry]:
    """The folder's direct children (FileNotFoundError when it does not exist). One LIST on S3."""
    if not is_remote(path):
        out = []
        with os.scandir(path) as entries:
            for e in entries:
                st = e.stat() if e.is_file() else None
                out.append(Entry(e.name, e.path, e.is_dir(), st.st_size if st else 0,
                                 int(st.st_mtime * 1000) if st else 0, e.is_symlink()))
        return out
    fs, p = filesystem(path)
    infos = fs.get_file_info(pafs.FileSelector(p, allow_not_found=True))
    if not infos and fs.get_file_info(p).type != pafs.FileType.Directory:
        raise FileNotFoundError(path)
    return [_remote_entry(path, i) for i in infos]


def list_names(path: str) -> list[str]:
    """Names in a folder (FileNotFoundError when it does not exist)."""
    if not is_remote(path):
        return os.listdir(path)
    return [e.name for e in list_entries(path)]


def list_starting_with(path: str, name_prefixes: Sequence[str]) -> list[Entry]:
    """The folder's direct children (files) whose names start with one of `name_prefixes` ([] when none, or no
    folder). On S3 one LIST per prefix: what it returns, not the whole folder; elsewhere one listing, filtered."""
    if not is_remote(path) or scheme(path) not in ("s3", "s3a"):
        try:
            return [e for e in list_entries(path) if not e.is_dir and e.name.startswith(tuple(name_prefixes))]
        except FileNotFoundError:
            return []
    if not ordered_listings(_bucket_key(path)[0]):   # the whole folder, filtered here
        return [e for e in _s3_children(path) if not e.is_dir and e.name.startswith(tuple(name_prefixes))]
    return [e for prefix in name_prefixes for e in _s3_children(path, prefix) if not e.is_dir]


def _s3_children(path: str, name_prefix: str = "") -> list[Entry]:
    """The direct children of an S3 folder whose names start with `name_prefix`: files with their ETags (kept for
    the operation, `listed_etag`) and sub-folders. One paginated LIST."""
    asked = _take_asked(("children", path)) if not name_prefix else None
    return asked.result() if asked is not None else _children_entries(path, name_prefix, _s3_children_pages(path, name_prefix))


def _s3_children_pages(path: str, name_prefix: str) -> list[dict[str, Any]]:
    bucket, key = _bucket_key(path)
    return list(_s3_pages(bucket, (key.rstrip("/") + "/" if key else "") + name_prefix, "/"))


def _children_entries(path: str, name_prefix: str, pages: list[dict[str, Any]]) -> list[Entry]:
    key = _bucket_key(path)[1]
    folder = key.rstrip("/") + "/" if key else ""
    files, folders = [], []
    for page in pages:
        files += [_listed_object(path, obj["Key"][len(folder):], obj) for obj in page.get("Contents") or []
                  if obj["Key"] != folder]   # not a folder marker
        folders += [sub["Prefix"][len(folder):].rstrip("/") for sub in page.get("CommonPrefixes") or []]
    _remember_etags(files)
    return files + [Entry(d, join(path, d), True, 0, 0) for d in folders]


def _s3_pages(bucket: str, prefix: str, delimiter: str | None = None, **params: Any) -> Iterator[dict[str, Any]]:
    """The ListObjectsV2 pages of `prefix` (none for a bucket that does not exist); `params`: more of the
    request's (StartAfter, MaxKeys: the size of each page)."""
    from botocore.exceptions import ClientError

    kwargs = {"Bucket": bucket, "Prefix": prefix, **({"Delimiter": delimiter} if delimiter else {}), **params}
    try:
        yield from s3_client().get_paginator("list_objects_v2").paginate(**kwargs)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code", "") != "NoSuchBucket":
            raise


def _listed_object(path: str, rel: str, obj: dict[str, Any]) -> Entry:
    return Entry(rel, join(path, rel), False, int(obj["Size"]), int(obj["LastModified"].timestamp() * 1000),
                 etag=str(obj.get("ETag", "")))


def _remember_etags(files: list[Entry]) -> None:
    """Keep the listed objects' ETags for the operation (`listed_etag`)."""
    op = _OP_READS.get()
    if op is not None:
        op.etags.update((e.path, (e.size, e.etag)) for e in files if e.etag)


def list_names_validated(path: str) -> list[str]:
    """`list_names_if_dir`, and on S3 each file's ETag kept for the operation (`listed_etag`): what a timeline
    lists, so its completed instants' kept bytes are served only while the store still holds those objects."""
    if is_remote(path) and scheme(path) in ("s3", "s3a"):
        return [e.name for e in _s3_children(path)]
    return list_names_if_dir(path)


def list_names_if_dir(path: str) -> list[str]:
    """Names in a folder, [] when there is no such folder (one request on S3)."""
    if not is_remote(path):
        return os.listdir(path) if os.path.isdir(path) else []
    fs, p = filesystem(path)
    return [i.base_name for i in fs.get_file_info(pafs.FileSelector(p, allow_not_found=True))]


def list_tree(path: str, skip: str | None = None) -> list[Entry]:
    """Every file and folder below `path`, recursively; `Entry.name` is the path relative to `path`.
    One paginated listing on S3 (not one per folder).

    `skip`: a folder directly under `path` left out, with everything in it. On S3 its keys are not even fetched:
    they are one run of the listing's key order, stepped over (a table's `.hoodie/` — timeline history, archived
    timeline, metadata table — is most of a Hudi 1.x table's keys)."""
    if not is_remote(path):
        out = []
        for root, dirs, files in os.walk(path):
            if skip is not None and root == path:
                dirs[:] = [d for d in dirs if d != skip]
            for d in dirs:
                rel = relative(os.path.join(root, d), path)
                out.append(Entry(rel, os.path.join(root, d), True, 0, 0))
            for f in files:
                rel = relative(os.path.join(root, f), path)
                out.append(Entry(rel, os.path.join(root, f), False, 0, 0))
        return out
    if scheme(path) in ("s3", "s3a"):
        return _s3_tree(path, skip)
    fs, p = filesystem(path)
    prefix = p.rstrip("/") + "/"
    out = []
    for i in fs.get_file_info(pafs.FileSelector(p, recursive=True, allow_not_found=True)):
        rel = i.path[len(prefix):] if i.path.startswith(prefix) else i.base_name
        if skip is not None and (rel == skip or rel.startswith(skip + "/")):
            continue
        mtime = int(i.mtime.timestamp() * 1000) if i.mtime is not None else 0
        out.append(Entry(rel, join(path, rel), i.type == pafs.FileType.Directory, int(i.size or 0), mtime))
    return out


def _s3_tree(path: str, skip: str | None = None) -> list[Entry]:
    """`list_tree` on S3: the same paginated ListObjectsV2 pyarrow makes, read with boto3 for what pyarrow's
    FileInfo drops — each object's ETag, which validates what an operation derived from its bytes earlier
    (`listed_etag`). Folders are the keys' parent prefixes and folder markers (keys ending in "/")."""
    asked = _take_asked(("tree", path, skip))
    if asked is None:   # the same requests made now, in flight together (one after another in pool work)
        asked = _Asked(*_tree_asked(_Inline if on_requests_pool() else requests_pool(), path, skip))
    try:
        listed: list[Entry] = asked.result()
        return listed
    finally:
        settle(asked.parts)


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


def _tree_entries(path: str, objects: list[dict[str, Any]]) -> list[Entry]:
    key = _bucket_key(path)[1]
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
    _remember_etags(files)
    return files + [Entry(d, join(path, d), True, 0, 0) for d in sorted(folders) if d]


def _s3_objects(bucket: str, prefix: str, **start: Any) -> list[dict[str, Any]]:
    """The objects under `prefix` (from `StartAfter=` when given), every page."""
    return [obj for page in _s3_pages(bucket, prefix, **start) for obj in page.get("Contents") or []]


# Past the keys that start with a folder's "name/": the largest code point (S3 orders keys by their UTF-8 bytes,
# which is code-point order; `ordered_listings`).
_PAST_FOLDER = "\U0010ffff"

# S3 Express One Zone directory buckets are named `<base>--<zone id>--x-s3`, a suffix general purpose buckets may
# not take.
_DIRECTORY_BUCKET_SUFFIX = "--x-s3"


def ordered_listings(bucket: str) -> bool:
    """Whether the bucket lists keys in order and takes `StartAfter` and prefixes that end mid-name: a general
    purpose bucket does; a directory bucket lists in no particular order, refuses `StartAfter` and takes only
    prefixes ending in "/". Stepping over a folder or listing by name prefix there would lose keys silently."""
    return not bucket.endswith(_DIRECTORY_BUCKET_SUFFIX)


def _s3_objects_after(bucket: str, prefix: str, fence: str) -> list[dict[str, Any]]:
    # StartAfter steps over every key of the folder but one whose next character were U+10FFFF itself
    return [obj for obj in _s3_objects(bucket, prefix, StartAfter=fence + _PAST_FOLDER)
            if not obj["Key"].startswith(fence)]


def _s3_objects_before(bucket: str, prefix: str, fence: str) -> list[dict[str, Any]]:
    # the first key: the first page that has one (a store may answer an empty page that is still truncated)
    first: list[dict[str, Any]] = next((page["Contents"] for page in _s3_pages(bucket, prefix, MaxKeys=1)
                                        if page.get("Contents")), [])
    if not first or first[0]["Key"] >= fence:
        return []
    out = list(first)
    for page in _s3_pages(bucket, prefix, StartAfter=first[0]["Key"]):
        for obj in page.get("Contents") or []:
            if obj["Key"] >= fence:   # the pages run on past the fence: what is left is inside or after it
                return out
            out.append(obj)
    return out


def listed_etag(path: str, size: int | None = None) -> str | None:
    """The ETag this operation's listing (`list_tree` on S3, inside `operation_reads`) gave the object at `path`
    — None when it listed none, or listed another size than `size`. What was derived from bytes with this ETag
    is still true of the object as listed."""
    op = _OP_READS.get()
    known = op.etags.get(path) if op is not None else None
    if known is None or (size is not None and known[0] != size):
        return None
    return known[1]


# ------------------------------------------------------------------------------------------- reading


# Whole-object reads a task announced up front (`prefetched`): path -> its GET in flight.
_PREFETCHED: ContextVar[dict[str, Future[bytes]] | None] = ContextVar("tidemark_prefetched", default=None)


@contextlib.contextmanager
def prefetched(paths: Sequence[str]) -> Iterator[None]:
    """Start the GETs of the object-store files among `paths` at once; inside the block `read_bytes` of one of
    them waits for its GET instead of making another. A compaction task reads its logs one after another, so
    on a store it would otherwise wait one round trip per log; now about one for all. Each is served once and
    then dropped (the bytes are not held twice); what the block did not read is cancelled or discarded.
    Local files are not prefetched: a read is already cheap."""
    remote = list(dict.fromkeys(p for p in paths if is_remote(p)))
    if not remote:
        yield
        return
    pool = requests_pool()
    futures = {p: pool.submit(_read_whole, p) for p in remote}
    token = _PREFETCHED.set(dict(futures))
    try:
        yield
    finally:
        _PREFETCHED.reset(token)
        settle(futures.values())


@dataclass
class _Operation:
    """What one table operation shares (`operation_reads`)."""

    reads: dict[str, bytes]                  # path -> bytes of a small metadata file read whole
    etags: dict[str, tuple[int, str]]        # path -> (size, ETag) as the operation's listing gave them
    asked: dict[tuple[str | None, ...], _Asked] = field(default_factory=dict)   # `ask_ahead`, not yet answered
    dropped: list[Future[Any]] = field(default_factory=list)   # asked, made stale while running: waited for at the end
    # `asked` and `dropped` change from the operation's own thread and from pool work run in its context (a removal
    # in flight with the commit's publish)
    lock: threading.Lock = field(default_factory=threading.Lock)


_OP_READS: ContextVar[_Operation | None] = ContextVar("tidemark_operation_reads", default=None)


@contextlib.contextmanager
def operation_reads() -> Iterator[None]:
    """Inside the block `read_shared` fetches each object-store file once (nested blocks share the outer one).

    One table operation reads hoodie.properties and the same timeline instants from several of its steps (a
    compaction run read the properties 3 times, its plan 3 times); Hudi's Java reads them once per operation
    through its meta client too. Writes made through this module inside the block keep it true: a file this
    process writes is remembered as written, one it deletes, copies over or renames is forgotten. Another
    process's change during the operation is seen by the next operation, as with a meta client. Nothing
    outlives the block; local files are always read (a read is cheap there)."""
    if _OP_READS.get() is not None:
        yield
        return
    op = _Operation({}, {})
    token = _OP_READS.set(op)
    try:
        yield
    finally:
        _OP_READS.reset(token)
        with op.lock:
            left = [f for asked in op.asked.values() for f in asked.parts] + op.dropped
            op.asked.clear()
            op.dropped.clear()
        settle(left)   # nothing asked outlives the operation


def read_shared(path: str) -> bytes | None:
    """`read_optional`, served from the operation's earlier read of the same object (see `operation_reads`).
    A missing file is not remembered: it is asked again."""
    op = _OP_READS.get()
    if op is None or not is_remote(path):
        return read_optional(path)
    memo = op.reads
    data = memo.get(path)
    if data is None:
        asked = _take_asked(("read", path))
        data = asked.result() if asked is not None else read_optional(path)
        if data is not None:
            memo[path] = data
    return data


def read_current(path: str) -> bytes | None:
    """`read_optional` now — or by the read `ask_ahead` started, whose caller vouches that nothing changed the file
    since — never an older read of the operation."""
    asked = _take_asked(("read", path))
    return asked.result() if asked is not None else read_optional(path)


class _Asked:
    """An answer asked ahead: the futures of its requests, and what makes the answer of their results (run by the
    thread that takes it, in its operation: a listing's ETags are kept for the operation there)."""

    def __init__(self, parts: list[Future[Any]], combine: Callable[[list[Any]], Any]) -> None:
        self.parts = parts
        self.combine = combine

    def result(self) -> Any:
        return self.combine([f.result() for f in self.parts])

    def drop(self) -> list[Future[Any]]:
        """Cancel what has not started; the requests still running (waited for when the operation ends, their
        answers not kept once they finish)."""
        return [f for f in self.parts if not f.cancel() and not f.done()]


def ask_ahead(reads: Sequence[str] = (), children: Sequence[str] = (), trees: Sequence[tuple[str, str | None]] = (),
              heads: Sequence[str] = ()) -> None:
    """Start now, all at once, requests the operation's next steps would make one after another: the GETs of
    `reads` (`read_shared`, `read_current`), the listings of `children` (`list_names_validated`) and of `trees`
    ((path, skip): `list_tree`), the HEADs of `heads` (`file_exists`). Each such call then takes its answer
    instead of making a request: on S3 a run of round trips in sequence becomes one.

    An answer is the store's when it was asked: the caller asks only once it holds the locks that keep these
    answers true until they are used, and what it writes itself in between through this module drops what was
    asked about that file (`_wrote`). Answers not taken are dropped when the operation ends. S3 only, inside an
    operation (`operation_reads`); elsewhere nothing is asked."""
    op = _OP_READS.get()
    if op is None:
        return
    pool = requests_pool()

    def ask(key: tuple[str | None, ...], parts: list[Future[Any]], combine: Callable[[list[Any]], Any]) -> None:
        with op.lock:
            old = op.asked.pop(key, None)
            if old is not None:
                op.dropped += old.drop()
            op.asked[key] = _Asked(parts, combine)

    for path in (p for p in reads if _on_s3(p)):
        ask(("read", path), [pool.submit(_read_if_there, path)], lambda r: r[0])
    for path in (p for p in children if _on_s3(p)):
        ask(("children", path), [pool.submit(_s3_children_pages, path, "")],
            lambda r, path=path: _children_entries(path, "", r[0]))   # type: ignore[misc]
    for path, skip in ((p, s) for p, s in trees if _on_s3(p)):
        ask(("tree", path, skip), *_tree_asked(pool, path, skip))
    for path in (p for p in heads if _on_s3(p)):
        ask(("head", path), [pool.submit(_s3_head_exists, path)], lambda r: r[0])


def _on_s3(path: str) -> bool:
    return is_remote(path) and scheme(path) in ("s3", "s3a")


def _read_if_there(path: str) -> bytes | None:
    try:
        return _read_whole(path)
    except FileNotFoundError:
        return None


def _tree_asked(pool: Any, path: str, skip: str | None) -> tuple[list[Future[Any]], Callable[[list[Any]], Any]]:
    """`_s3_tree`'s requests as futures of their own, and how their objects become its entries. With `skip`, the
    folder's keys sort as one run that is stepped over: the keys after it in one listing that starts past it
    (StartAfter), the keys before it (rare: names that sort before the folder's, such as a non-partitioned
    table's `.<file id>` logs before `.hoodie/`) by a one-key probe, in flight together, then listed up to it."""
    bucket, key = _bucket_key(path)
    prefix = key.rstrip("/") + "/" if key else ""
    if skip is None:
        return [pool.submit(_s3_objects, bucket, prefix)], lambda r: _tree_entries(path, r[0])
    fence = prefix + skip + "/"
    if not ordered_listings(bucket):
        return [pool.submit(_s3_objects, bucket, prefix)], \
            lambda r: _tree_entries(path, [obj for obj in r[0] if not obj["Key"].startswith(fence)])
    parts = [pool.submit(_s3_objects_before, bucket, prefix, fence), pool.submit(_s3_objects_after, bucket, prefix, fence)]
    return parts, lambda r: _tree_entries(path, r[0] + r[1])


def _take_asked(key: tuple[str | None, ...]) -> _Asked | None:
    op = _OP_READS.get()
    if op is None or not op.asked:
        return None
    with op.lock:
        return op.asked.pop(key, None)


def _drop_asked(op: _Operation, path: str, folder: bool = False) -> None:
    """Drop the answers asked ahead that a write to `path` makes stale: its GET and HEAD, the listing of its folder,
    the listings of trees that hold it; with `folder` (a folder removed with all it holds), of everything in it."""
    def about(key: tuple[str | None, ...]) -> bool:
        kind, where = key[0], str(key[1])
        if kind in ("read", "head"):
            return where == path or folder and is_within(where, path)
        if kind == "children":
            return parent(path) == where or folder and is_within(where, path)
        skipped = key[2]   # a tree's listing leaves its skipped folder out
        inside = is_within(path, where) or folder and is_within(where, path)
        return inside and not (skipped is not None and is_within(path, join(where, str(skipped))))

    with op.lock:
        for key in [k for k in op.asked if about(k)]:
            op.dropped += op.asked.pop(key).drop()


# Files whose bytes never change once they exist under their name — completed timeline instants: Hudi creates them
# once (create-if-absent) and otherwise only deletes them (rollback, archival) — kept across operations with the
# ETag of the object they came from, most recently used last, up to IMMUTABLE_BYTES. One is served only when the
# current operation's listing gives that object the same ETag (`list_names_validated`): an instant re-created at the
# same path (a compaction re-run after a crashed rollback removed its commit) is another object, read again. S3
# only (its listing gives ETags; a local read is cheap). Since the ETag is checked, the same holds for any timeline
# file read this way — a compaction plan — and for those this process published (`create_exclusive(keep=True)`).
IMMUTABLE_BYTES = 64 * 1024 * 1024
_IMMUTABLE: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
_IMMUTABLE_SIZE = 0
_IMMUTABLE_LOCK = threading.Lock()


def _kept_immutable(path: str) -> bytes | None:
    """The kept bytes of `path` if this operation's listing shows the object they came from."""
    etag = listed_etag(path)
    if not etag:
        return None
    with _IMMUTABLE_LOCK:
        kept = _IMMUTABLE.get(path)
        if kept is None or kept[0] != etag:
            return None
        _IMMUTABLE.move_to_end(path)
        return kept[1]


def read_immutable(path: str) -> bytes | None:
    """`read_shared` of a file that never changes once it exists (see IMMUTABLE_BYTES): an S3 object this process
    read before, by any operation, is not read again while the operation's listing shows it unchanged."""
    if not is_remote(path) or scheme(path) not in ("s3", "s3a"):
        return read_shared(path)
    kept = _kept_immutable(path)
    if kept is not None:
        return kept
    op = _OP_READS.get()
    if op is not None and path in op.reads:
        return op.reads[path]
    return _fetch_immutable(path)


def _fetch_immutable(path: str) -> bytes | None:
    try:
        data, etag = _s3_get_tagged(path)
    except FileNotFoundError:
        return None
    op = _OP_READS.get()
    if op is not None:
        op.reads[path] = data
    if etag:
        _keep_immutable(path, etag, data)
    return data


def immutable_reads_needed(paths: Sequence[str]) -> int:
    """How many of `paths` `read_immutable` would fetch from a store now."""
    op = _OP_READS.get()
    return sum(1 for p in paths if is_remote(p) and (op is None or p not in op.reads) and _kept_immutable(p) is None)


def _keep_immutable(path: str, etag: str, data: bytes) -> None:
    global _IMMUTABLE_SIZE
    with _IMMUTABLE_LOCK:
        old = _IMMUTABLE.pop(path, None)
        _IMMUTABLE_SIZE -= len(old[1]) if old is not None else 0
        if len(data) > IMMUTABLE_BYTES // 16:   # a huge commit would push out everything else
            return
        _IMMUTABLE[path] = (etag, data)
        _IMMUTABLE_SIZE += len(data)
        while _IMMUTABLE_SIZE > IMMUTABLE_BYTES:
            _IMMUTABLE_SIZE -= len(_IMMUTABLE.popitem(last=False)[1][1])


def clear_kept_immutable() -> None:
    """Drop every kept file: the next read of each is a GET, as in a new process."""
    global _IMMUTABLE_SIZE
    with _IMMUTABLE_LOCK:
        _IMMUTABLE.clear()
        _IMMUTABLE_SIZE = 0


def _forget_immutable(path: str) -> None:
    global _IMMUTABLE_SIZE
    with _IMMUTABLE_LOCK:
        old = _IMMUTABLE.pop(path, None)
        _IMMUTABLE_SIZE -= len(old[1]) if old is not None else 0


def read_shared_all(paths: Sequence[str], immutable: bool = False) -> None:
    """Fetch into the operation's shared reads, in parallel, those of `paths` it does not hold yet (object-store
    files only; missing ones are skipped): the `read_shared` (`read_immutable`) calls that follow are then
    answered from memory. Without an operation, or locally, nothing is read ahead."""
    op = _OP_READS.get()
    todo = [p for p in dict.fromkeys(paths) if op is not None and is_remote(p) and p not in op.reads]
    if immutable:
        todo = [p for p in todo if _kept_immutable(p) is None]
    if op is None or len(todo) < 2:
        return
    fetch = _fetch_immutable if immutable and scheme(todo[0]) in ("s3", "s3a") else read_optional
    futures = {p: requests_pool().submit(fetch, p) for p in todo}
    try:
        for p, f in futures.items():
            data = f.result()
            if data is not None:
                op.reads[p] = data
    finally:
        settle(futures.values())


def _wrote(path: str, data: bytes | None = None) -> bool:
    """Forget the operation's shared read of `path` (this process is removing or replacing it); with `data`
    (what it wrote there), remember that instead. True when the read had been shared."""
    _forget_immutable(path)
    op = _OP_READS.get()
    if op is None:
        return False
    if op.asked:
        _drop_asked(op, path)
    op.etags.pop(path, None)
    memo = op.reads
    if data is not None:
        memo[path] = bytes(data)
        return True
    return memo.pop(path, None) is not None


def read_bytes(path: str) -> bytes:
    """The whole file (FileNotFoundError when missing). One GET on S3."""
    pending = _PREFETCHED.get()
    ahead = pending.pop(path, None) if pending is not None else None
    if ahead is not None:
        return ahead.result()
    return _read_whole(path)


def _read_whole(path: str) -> bytes:
    if not is_remote(path):
        with open(path, "rb") as fh:
            return fh.read()
    if scheme(path) in ("s3", "s3a"):
        return _s3_get(path)   # one GET (pyarrow's stream would HEAD first)
    fs, p = filesystem(path)
    try:
        with fs.open_input_stream(p) as fh:
            data: bytes = fh.read()
            return data
    except FileNotFoundError:
        raise
    except OSError as exc:
        if "not found" in str(exc).lower() or "NoSuchKey" in str(exc):
            raise FileNotFoundError(path) from exc
        raise


def _s3_get(path: str, byte_range: str | None = None) -> bytes:
    return _s3_get_tagged(path, byte_range)[0]


def _s3_get_tagged(path: str, byte_range: str | None = None) -> tuple[bytes, str]:
    """The bytes (all, or `byte_range`) and the ETag of the object they came from ("" for an empty object)."""
    body, etag, _ = _s3_get_sized(path, byte_range)
    return body, etag


def _s3_get_sized(path: str, byte_range: str | None = None) -> tuple[bytes, str, int]:
    """`_s3_get_tagged`, with the whole object's size (a ranged GET's Content-Range gives it)."""
    from botocore.exceptions import ClientError

    bucket, key = _bucket_key(path)
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


def read_optional(path: str) -> bytes | None:
    try:
        return read_bytes(path)
    except FileNotFoundError:
        return None


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def open_input(path: str) -> Any:
    """A seekable reader (local file object, or a pyarrow RandomAccessFile doing ranged GETs on S3)."""
    if not is_remote(path):
        return open(path, "rb")
    fs, p = filesystem(path)
    return fs.open_input_file(p)


def parquet_source(path: str) -> Any:
    """What pyarrow.parquet takes as a source: the local path itself, or a remote random-access file."""
    return path if not is_remote(path) else open_input(path)


# ------------------------------------------------------------------------------------------- writing


def make_dirs(path: str) -> None:
    """Create a folder and its parents (no-op on S3, where folders are prefixes)."""
    if not is_remote(path):
        os.makedirs(path, exist_ok=True)


def write_bytes(path: str, data: bytes) -> None:
    """Write (or overwrite) a whole file; on S3 one PUT, so readers see the old object or the new one."""
    if not is_remote(path):
        with open(path, "wb") as fh:
            fh.write(data)
        return
    shared = _wrote(path)   # a failed PUT may still have replaced the object: forget it first
    if scheme(path) in ("s3", "s3a"):   # one PutObject (pyarrow's stream is a 3-request multipart upload)
        bucket, key = _bucket_key(path)
        s3_client().put_object(Bucket=bucket, Key=key, Body=data)
    else:
        fs, p = filesystem(path)
        with fs.open_output_stream(p) as out:
            out.write(data)
    if shared:   # the next read_shared gets what we just wrote (only for files the operation reads)
        _wrote(path, data)


def write_replace(path: str, data: bytes) -> None:
    """Replace a file whole: local temp + fsync + rename; on S3 a single PUT (atomic per object)."""
    if is_remote(path):
        write_bytes(path, data)
        return
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def open_output(path: str, exclusive: bool = False) -> Iterator[IO[bytes] | Any]:
    """A writable stream for a whole new file (Parquet writers), seen by readers only once complete. On S3 a
    file up to UPLOAD_PART_BYTES is one PutObject, a larger one a multipart upload; a failure inside the block
    publishes nothing (the upload is aborted). `exclusive` (S3 only; locally the caller links into place): the
    object is created only where none is (`If-None-Match: *` on the PutObject or the upload's completion),
    PublishConflict otherwise — a file no one else may have written is never replaced."""
    if not is_remote(path):
        with open(path, "wb") as fh:
            yield fh
        return
    _wrote(path)
    if scheme(path) in ("s3", "s3a"):
        out = S3Upload(path, exclusive=exclusive)
        try:
            yield out
        except BaseException:
            out.abort()
            raise
        out.close()
        return
    fs, p = filesystem(path)
    with fs.open_output_stream(p) as out:
        yield out


UPLOAD_PART_BYTES = 16 << 20


class S3Upload:
    """A write-only stream to one S3 object: buffered, then ONE PutObject on close when it stayed under
    UPLOAD_PART_BYTES (pyarrow's stream always makes a multipart upload: 3 requests even for a small file);
    beyond that a multipart upload whose parts go up on a background thread while the caller writes on."""

    def __init__(self, path: str, part_bytes: int | None = None, exclusive: bool = False) -> None:
        self.path = path
        # If-None-Match on the request that makes the object visible: S3 refuses it (412) when one is there
        self._condition = {"IfNoneMatch": "*"} if exclusive and conditional_put(path) else {}
        self._bucket, self._key = _bucket_key(path)
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
                    and _own_landed_put(self._bucket, self._key, body) is not None:
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


def create_exclusive(path: str, data: bytes, staging_dir: str | None = None, keep: bool = False) -> str | None:
    """Create `path` holding `data`, all at once, only if no file is there (PublishConflict otherwise). On S3 the
    new object's ETag (for a later `replace_if_match`), else None.

    Local: write `staging_dir`/<uuid> (default: a dot-temp beside `path`), fsync, hard-link it into place
    (the link refuses an existing name), unlink the temp. S3: one PutObject with `If-None-Match: *`; the
    store refuses the second of two racing writers (412). Other stores cannot do this: callers must hold a
    lock outside the store (see `engine.timeline.instants`); here they get a check-then-write.
    `keep`: on S3, keep `data` as `read_immutable` keeps what it reads, with the ETag the store gave the new
    object — this process's later operations then read what it published (a plan it scheduled, a commit it
    completed) without a GET, while their listings show that same object.
    """
    if not is_remote(path):
        directory = staging_dir or os.path.dirname(path)
        tmp = os.path.join(directory, f".temp-{uuid.uuid4().hex}")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            link_no_clobber(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return None
    _wrote(path)
    if scheme(path) in ("s3", "s3a") and conditional_put(path):
        etag = _s3_put_if_absent(path, data)
        if keep and etag:
            _keep_immutable(path, etag, data)
        return etag
    if exists(path):
        raise PublishConflict(f"{path} already exists")
    write_bytes(path, data)
    return None


def link_no_clobber(tmp: str, dest: str) -> None:
    """Hard-link local `tmp` to `dest`, refusing to replace a file (file systems without hard links: check,
    then rename — not race-free, but atomic to readers)."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise PublishConflict(f"{dest} already exists") from None
    except OSError:
        if os.path.exists(dest):
            raise PublishConflict(f"{dest} already exists") from None
        os.replace(tmp, dest)


_S3_CLIENTS: dict[tuple[str | None, ...], Any] = {}


def _forget_clients_after_fork() -> None:
    # A forked child (a Celery pool process, a Spark worker) must not share the parent's sockets, nor the AWS SDK's
    # threads a pyarrow S3 file system holds, nor a lock some parent thread held at the fork: it makes its own.
    global _LOCK, _IMMUTABLE_LOCK
    _LOCK = threading.Lock()
    _IMMUTABLE_LOCK = threading.Lock()   # the kept immutable files stay: their bytes are true in the child too
    _S3_CLIENTS.clear()
    _FILESYSTEMS.clear()


os.register_at_fork(after_in_child=_forget_clients_after_fork)


def is_store_client_error(exc: BaseException) -> bool:
    """Errors of the S3 client itself — no credentials, an endpoint that does not answer, a bucket the store
    does not have — which name their cause in one line."""
    return any(cls.__module__.split(".")[0] in ("botocore", "boto3") for cls in type(exc).__mro__)


def s3_client() -> Any:
    """A boto3 S3 client from the same AWS chain as pyarrow's (for what pyarrow.fs cannot say: If-None-Match)."""
    import boto3  # only object-store tables need it

    key = _env_key()
    with _LOCK:
        client = _S3_CLIENTS.get(key)
        if client is None:
            from botocore.config import Config

            # A connection for each thread that may ask at once (engine.io.threads' pools, plus a few callers'
            # own): past the pool's size urllib3 discards connections with a warning on stderr.
            connections = REQUEST_THREADS + UPLOAD_THREADS + DECODE_THREADS + 8
            session = boto3.session.Session(botocore_session=_botocore_session())
            client = session.client("s3", endpoint_url=endpoint_url(), region_name=region(),
                                    config=Config(max_pool_connections=connections))
            client.meta.events.register("before-call.s3", _send_small_bodies_at_once)
            _S3_CLIENTS[key] = client
    return client


# Below this, a PUT sends its body with its headers (the AWS SDK for Go's threshold, 2 MiB).
EXPECT_CONTINUE_BYTES = 2 << 20


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
    """A botocore session whose responses parse timestamps with `_parse_timestamp`."""
    import botocore.session

    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_parse_timestamp)
    return session


def _parse_timestamp(value: str) -> datetime.datetime:
    """A response's timestamp. Listings give one ISO-8601 `LastModified` per key, and botocore's default parser
    (dateutil) spends ~0.2 ms on each: a 1000-key page cost 200 ms of CPU to parse. `fromisoformat` reads S3's
    form in microseconds; anything else (RFC 1123 headers, epoch numbers) goes to botocore's own parser."""
    parsed = None
    if isinstance(value, str) and value[4:5] == "-":   # "YYYY-…" (a digit string is epoch seconds, not a date)
        with contextlib.suppress(ValueError):
            parsed = datetime.datetime.fromisoformat(value)
    if parsed is None:
        from botocore.utils import parse_timestamp

        fallback: datetime.datetime = parse_timestamp(value)
        return fallback
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def _bucket_key(path: str) -> tuple[str, str]:
    """Bucket and key of an `s3://bucket/key` path, the key as written: an object key is not a URL, so a "#" or
    "?" in it (a Hudi partition value such as `lang=C#`) is part of the name, not a fragment or a query."""
    rest = path.split("://", 1)[1] if "://" in path else path
    bucket, _, key = rest.partition("/")
    return bucket, key.lstrip("/")


# Tries of a conditional put the store answers 409 (another conditional write to the key in progress: AWS asks
# for a retry, which then gets 412 or succeeds), the pause doubling from the first.
CONFLICT_TRIES = 5
CONFLICT_PAUSE_S = 0.05


def _s3_put_if_absent(path: str, data: bytes) -> str:
    """PutObject with `If-None-Match: *`; the new object's ETag. PublishConflict when the object was there first."""
    return _conditional_put(path, data, {"IfNoneMatch": "*"}, "already exists (the store refused a second create")


def _conditional_put(path: str, data: bytes, condition: dict[str, str], refused: str) -> str:
    """PutObject under `condition` (If-None-Match / If-Match); the new object's ETag. PublishConflict (`refused`)
    when the store refuses it — unless an earlier try of ours landed and its lost answer made us try again into
    our own object (`_own_landed_put`): then the put happened, and is ours."""
    from botocore.exceptions import ClientError

    bucket, key = _bucket_key(path)
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
                own = _own_landed_put(bucket, key, data) if resent else None
                if own is not None:
                    return own
                raise PublishConflict(f"{path} {refused}: {code or status})") from None
            raise TidemarkError(f"{path}: conditional put failed: {code or exc}") from exc
    raise AssertionError("unreachable: the last try returns or raises")


def read_tagged(path: str) -> tuple[bytes, str] | None:
    """An S3 object's bytes and ETag, read now (never an operation's kept copy); None when there is none. What a
    conditional replace (`replace_if_match`) of it is then made against."""
    try:
        return _s3_get_tagged(path)
    except FileNotFoundError:
        return None


def replace_if_match(path: str, data: bytes, etag: str) -> str:
    """PutObject with `If-Match: etag`: replace the S3 object only while it is still the one with that ETag; the new
    object's ETag. PublishConflict when it changed (or went) since: another writer's put came first."""
    _wrote(path)
    return _conditional_put(path, data, {"IfMatch": etag}, "changed since it was read (the store refused the replace")


def still_tagged(path: str, etag: str) -> bool | None:
    """Whether the S3 object is still the one with `etag`: a HEAD with `If-Match`, which the store answers from
    the object as it is now (True), refuses with 412 when it was replaced (False), or 404 when it is gone (None).
    A fence: a lock holder proves the lock object is still its own lease without reading it."""
    from botocore.exceptions import ClientError

    bucket, key = _bucket_key(path)
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


def _own_landed_put(bucket: str, key: str, data: bytes) -> str | None:
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


def upload(local: str, dest: str) -> None:
    """Stream a local file to `dest` (a multipart upload on S3: the object appears only once complete)."""
    with open(local, "rb") as src, open_output(dest) as out:
        while True:
            chunk = src.read(8 << 20)
            if not chunk:
                break
            out.write(chunk)


def rename(src: str, dst: str) -> None:
    """Move a file over `dst` (local: atomic rename; S3: server-side copy, then delete the source)."""
    if not is_remote(src):
        os.replace(src, dst)
        return
    _wrote(src)
    _wrote(dst)
    fs, s = filesystem(src)
    _, d = filesystem(dst)
    fs.move(s, d)


def copy(src: str, dst: str) -> None:
    """Copy a file: on S3 server-side (CopyObject, no bytes through this process); locally a byte copy."""
    if not is_remote(src):
        import shutil

        shutil.copyfile(src, dst)
        return
    _wrote(dst)
    fs, s = filesystem(src)
    _, d = filesystem(dst)
    fs.copy_file(s, d)


COPY_OBJECT_MAX_BYTES = 5 << 30   # S3's limit of one CopyObject


def copy_new(src: str, dst: str, size: int | None = None) -> None:
    """`copy`, creating `dst` only where no object is: on S3 one CopyObject with `If-None-Match: *` (PublishConflict
    when the store refuses it; a store that ignores the condition copies anyway), elsewhere a plain `copy`."""
    if scheme(dst) not in ("s3", "s3a") or not conditional_put(dst) or (size or 0) >= COPY_OBJECT_MAX_BYTES:
        copy(src, dst)
        return
    from botocore.exceptions import ClientError

    _wrote(dst)
    bucket, key = _bucket_key(dst)
    src_bucket, src_key = _bucket_key(src)
    try:
        s3_client().copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": src_bucket, "Key": src_key},
                                IfNoneMatch="*")
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412:
            raise PublishConflict(f"{dst} already exists (the store refused to copy over it)") from None
        raise


def remove(path: str) -> None:
    """Delete a file (a local link, not its target); FileNotFoundError when a local file is missing (S3's
    DELETE does not say, and deleting what is gone is done)."""
    if not is_remote(path):
        os.unlink(path)
        return
    _wrote(path)
    if scheme(path) in ("s3", "s3a"):
        # One DELETE (S3's is idempotent; pyarrow would HEAD first and re-create a folder marker after).
        bucket, key = _bucket_key(path)
        s3_client().delete_object(Bucket=bucket, Key=key)
        return
    fs, p = filesystem(path)
    if fs.get_file_info(p).type == pafs.FileType.NotFound:
        raise FileNotFoundError(path)
    fs.delete_file(p)


def remove_if_exists(path: str) -> bool:
    try:
        remove(path)
        return True
    except FileNotFoundError:
        return False


def remove_tree(path: str) -> None:
    """Delete a folder and everything under it; nothing when it does not exist."""
    if not is_remote(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
        return
    op = _OP_READS.get()
    for known in [k for k in [*op.reads, *op.etags] if is_within(k, path)] if op is not None else []:
        _wrote(known)
    if op is not None and op.asked:
        _drop_asked(op, path, folder=True)
    with _IMMUTABLE_LOCK:
        kept = [k for k in _IMMUTABLE if is_within(k, path)]
    for known in kept:
        _forget_immutable(known)
    if scheme(path) in ("s3", "s3a"):
        # One LIST of the keys (folder markers other tools wrote included), then a DELETE per key; pyarrow
        # would HEAD and LIST the prefix twice even when nothing is there.
        bucket, key = _bucket_key(path)
        client = s3_client()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key.rstrip("/") + "/"):
            for obj in page.get("Contents") or []:
                client.delete_object(Bucket=bucket, Key=obj["Key"])
        return
    fs, p = filesystem(path)
    try:
        fs.delete_dir_contents(p, missing_dir_ok=True)
    except FileNotFoundError:
        return
    with contextlib.suppress(OSError):
        fs.delete_dir(p)


def buffer_reader(data: bytes) -> pa.BufferReader:
    return pa.BufferReader(pa.py_buffer(data))


class RangeReader:
    """Positional reads of one file: `pread` on a local descriptor, one ranged GET per call on a store.

    Given the size from a listing, opening a remote file costs no request (no HEAD)."""

    def __init__(self, path: str, known_size: int | None = None, data: bytes | None = None) -> None:
        self.path = path
        self._fd: int | None = None
        self._file: Any = None
        self._data = data
        self._s3: tuple[str, str] | None = None
        # ETags of the objects the ranged GETs read (one, unless the object was replaced between them)
        self.etags: set[str] = set()
        if data is not None:   # already read whole (a compaction reads every byte of its logs anyway)
            self.size = len(data)
            return
        if not is_remote(path):
            self._fd = os.open(path, os.O_RDONLY)
            self.size = os.fstat(self._fd).st_size
            return
        if known_size is not None and scheme(path) in ("s3", "s3a"):
            # pyarrow's file opens with a HEAD for the size; the listing already told it: ranged GETs only.
            self._s3 = _bucket_key(path)
            self.size = known_size
            return
        fs, p = filesystem(path)
        self._file = fs.open_input_file(p)
        self.size = int(self._file.size())

    def pread(self, length: int, offset: int) -> bytes:
        length = max(0, min(length, self.size - offset))
        if length == 0:
            return b""
        if self._data is not None:
            return bytes(self._data[offset : offset + length])
        if self._fd is not None:
            return os.pread(self._fd, length, offset)
        if self._s3 is not None:
            body, etag, total = _s3_get_sized(self.path, f"bytes={offset}-{offset + length - 1}")
            # an object of another size than the listing said (replaced since) read only up to the listed size:
            # not a read of that object whole, so its ETag must not vouch for what was derived ("": none)
            self.etags.add(etag if total == self.size else "")
            return body
        return bytes(self._file.read_at(length, offset))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
