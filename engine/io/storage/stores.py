"""Which store holds a path: one instance per kind, chosen by the path's scheme."""
from __future__ import annotations

from engine.io.storage.arrowfs import ArrowStore
from engine.io.storage.interface import Store
from engine.io.storage.local import LocalStore
from engine.io.storage.paths import S3_SCHEMES, scheme
from engine.io.storage.s3 import S3Store

LOCAL = LocalStore()
S3 = S3Store()
ARROW = ArrowStore()


def store_for(path: str) -> Store:
    """The store holding `path`: the local file system for a plain path (or `file://`), S3 for `s3://` and `s3a://`,
    `pyarrow.fs` for any other scheme."""
    s = scheme(path)
    return LOCAL if not s else S3 if s in S3_SCHEMES else ARROW
