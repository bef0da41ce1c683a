"""The Java-written test tables of hudi 0.5.0's source distribution, fetched from the package index.

The hudi-rs project ships 73 tables written by Apache Hudi's own Spark writer (with the `.sql` / `.scala` that
made each) in `crates/test/data` of its PyPI sdist. `pip download --no-binary` cannot fetch that sdist (its
metadata build needs a Rust toolchain), so this module reads the index's PEP 503 simple page itself: the
index address comes from pip's own configuration (index-url, then extra-index-url, then pip's default), the
download is checked against a pinned sha256, cached under ~/.cache/tidemark (reused offline), and extracted
once. `python -m tests.support.hudi_sdist` prefetches it (the Makefile does, before the parallel test run).
"""
from __future__ import annotations

import fcntl
import hashlib
import html.parser
import os
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SDIST = "hudi-0.5.0.tar.gz"
SDIST_SHA256 = "dc8e1f3405d262491b97e8f009bcae2cbd66279dd2a8300b738ecdc3d9cba51d"
DATA_PREFIX = "hudi-0.5.0/crates/test/data/"


class SdistUnavailable(RuntimeError):
    """The sdist is neither cached nor fetchable from any configured index."""


def cache_dir() -> Path:
    """TIDEMARK_CACHE_DIR, else $XDG_CACHE_HOME/tidemark, else ~/.cache/tidemark."""
    explicit = os.environ.get("TIDEMARK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tidemark"


def configured_indexes() -> list[str]:
    """The simple-index addresses pip would use, in pip's order: index-url, then each extra-index-url.
    Taken from pip itself (`pip config list` covers its files and PIP_* variables); pip's built-in default
    stands in when no index-url is configured."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                         check=False).stdout
    index: list[str] = []
    extra: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        value = value.strip().strip("'\"")
        if key.endswith(".index-url") and not key.endswith("extra-index-url"):
            index = value.split()
        elif key.endswith(".extra-index-url"):
            extra += value.split()
    if not index:
        from pip._internal.models.index import PyPI  # pip's own default index when none is configured
        index = [PyPI.simple_url]
    return [u.rstrip("/") + "/" for u in index + extra]


class _Links(html.parser.HTMLParser):
    """The anchors of a PEP 503 project page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def _sdist_url(index: str) -> str | None:
    page = urllib.parse.urljoin(index, "hudi/")
    try:
        with urllib.request.urlopen(page, timeout=60) as resp:
            text = resp.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    links = _Links()
    links.feed(text)
    for href in links.hrefs:
        if urllib.parse.urlparse(href).path.rsplit("/", 1)[-1] == SDIST:
            return urllib.parse.urljoin(page, href)
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(dest: Path) -> None:
    tried = []
    for index in configured_indexes():
        url = _sdist_url(index)
        tried.append(index)
        if url is None:
            continue
        part = dest.with_suffix(".part")
        with urllib.request.urlopen(url.split("#", 1)[0], timeout=300) as resp, part.open("wb") as out:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
        got = _sha256(part)
        if got != SDIST_SHA256:
            part.unlink()
            raise SdistUnavailable(f"{url}: sha256 {got} is not the pinned {SDIST_SHA256}")
        part.rename(dest)
        return
    raise SdistUnavailable(f"{SDIST} is not cached in {dest.parent} and no configured index serves it "
                           f"(tried {', '.join(tried)})")


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    # Parallel test processes fetch and extract once: the first holds the lock, the rest find it done.
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def data_dir() -> Path:
    """crates/test/data of the sdist, fetched, checked and extracted on first use."""
    root = cache_dir()
    target = root / "hudi-0.5.0-test-data"
    done = target / ".complete"
    if done.exists():
        return target
    with _locked(root):
        if done.exists():
            return target
        archive = root / SDIST
        if not archive.exists() or _sha256(archive) != SDIST_SHA256:
            _download(archive)
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(DATA_PREFIX) and (m.isfile() or m.isdir())]
            for m in members:
                m.name = m.name[len(DATA_PREFIX):]
            tar.extractall(target, members=[m for m in members if m.name], filter="data")
        done.touch()
    return target


if __name__ == "__main__":
    print(data_dir())
