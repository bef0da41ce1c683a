"""Locations: what a path or URI names, and how locations combine — no request to any store.

A plain path (or `file://…`) is the local file system; anything with another scheme (`s3://bucket/t`,
`gs://…`, `hdfs://…`) is an object store or a remote file system reached through `pyarrow.fs`.
"""
from __future__ import annotations

import os
import posixpath
import re
from urllib.parse import unquote, urlsplit

from engine.errors import ConfigError

_SCHEME_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
S3_SCHEMES = ("s3", "s3a")
GCS_SCHEMES = ("gs", "gcs")


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


def on_s3(path: str) -> bool:
    return scheme(path) in S3_SCHEMES


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


def bucket_key(path: str) -> tuple[str, str]:
    """Bucket and key of an `s3://bucket/key` path, the key as written: an object key is not a URL, so a "#" or
    "?" in it (a Hudi partition value such as `lang=C#`) is part of the name, not a fragment or a query."""
    rest = path.split("://", 1)[1] if "://" in path else path
    bucket, _, key = rest.partition("/")
    return bucket, key.lstrip("/")
