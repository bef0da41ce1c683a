"""Which code made each store request: a tracer for `bench_s3_storage --trace`.

`engine.io.storage` is the one layer every read, write, list and copy goes through, so wrapping its functions
that reach the store names the caller of every request (the first frames outside the storage layer) — in the
driver and in Spark's Python workers alike: `worker_env(dir)` gives the environment that makes a new
interpreter (a Spark worker) install the tracer as soon as it imports `engine.io.storage` (a `sitecustomize`
import hook). Each process appends JSON lines to `<dir>/<pid>.jsonl`; `records(dir)` reads them back. The
driver's current phase (`phase(name)`) is written with each of its records.

Nothing here changes what the storage layer does: a wrapper records, then calls the original.
"""
from __future__ import annotations

import contextlib
import functools
import glob
import importlib
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

ENV = "TIDEMARK_S3_TRACE_DIR"
# The storage functions that make requests, by module (internal ones included: callers look them up in their module
# when called). The facade's are the callers' view; the S3 modules' are the requests themselves.
_TRACED = {
    "engine.io.storage": ("file_exists", "list_entries", "list_names_if_dir", "list_tree", "exists", "is_file",
                          "is_dir", "size", "mtime_ms", "write_bytes", "copy", "copy_new", "rename", "remove",
                          "remove_tree", "open_input", "parquet_source"),
    "engine.io.storage.s3": ("get_sized", "head_exists", "children_pages"),
    "engine.io.storage.s3_api": ("put_if_absent", "still_tagged"),
}
_SKIP_FILES = ("engine/io/storage/", "bench/s3_trace.py", "concurrent/futures", "threading.py", "contextlib.py")
_state = {"phase": "", "file": None}
_lock = threading.Lock()


def _caller() -> list[str]:
    frames = [f for f in traceback.extract_stack()[:-2] if not any(s in f.filename for s in _SKIP_FILES)]
    out = []
    for f in frames[-4:]:
        rel = f.filename.split("/engine/")[-1] if "/engine/" in f.filename else os.path.basename(f.filename)
        out.append(f"{rel}:{f.name}:{f.lineno}")
    return out


def _record(fn: str, args: tuple[Any, ...], kwargs: dict[str, Any], at: float | None = None) -> None:
    path = str(args[0]) if args else str(kwargs.get("path", ""))
    extra = kwargs.get("byte_range") or (args[1] if fn == "get_sized" and len(args) > 1 else None)
    now = time.time()
    rec = {"pid": os.getpid(), "at": at or now, "s": round(now - at, 4) if at else 0.0, "fn": fn, "path": path,
           "range": bool(extra), "phase": _state["phase"], "stack": _caller()}
    with _lock:
        fh = _state["file"]
        if fh is not None:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()


def _wrap(fn: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        at = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            _record(fn, args, kwargs, at)   # when it started and how long it took
    traced.__s3_traced__ = True  # type: ignore[attr-defined]
    return traced


def install(directory: str) -> None:
    """Wrap `engine.io.storage`'s store calls in this process (idempotent); records go to `directory`."""
    from engine.io import storage

    with _lock:
        if _state["file"] is None:
            os.makedirs(directory, exist_ok=True)
            _state["file"] = open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a")  # noqa: SIM115
    for module_name, names in _TRACED.items():
        module = importlib.import_module(module_name)
        for fn in names:
            original = getattr(module, fn)
            if not getattr(original, "__s3_traced__", False):
                setattr(module, fn, _wrap(fn, original))
    upload_close = storage.S3Upload.close
    if not getattr(upload_close, "__s3_traced__", False):
        def close(self: Any) -> None:
            at, was_open = time.time(), not self.closed
            try:
                upload_close(self)
            finally:
                if was_open:
                    _record("S3Upload.close", (self.path,), {}, at)
        close.__s3_traced__ = True  # type: ignore[attr-defined]
        storage.S3Upload.close = close  # type: ignore[method-assign]


def install_tasks(execute: Any) -> None:
    """Record each compaction task (`execute_operation`) of this worker as a span: what the store calls of a
    task leave between them is the task's own work (or Spark's, between tasks)."""
    original = execute.execute_operation
    if getattr(original, "__s3_traced__", False):
        return

    def task(op: Any) -> Any:
        at = time.time()
        try:
            return original(op)
        finally:
            _record("task", (f"{op.base_path}/{op.partition_path}/{op.file_id}",), {}, at)
    task.__s3_traced__ = True  # type: ignore[attr-defined]
    execute.execute_operation = task


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Records of this process made inside the block carry `name` (phases nest: the innermost wins)."""
    before = _state["phase"]
    _state["phase"] = name
    try:
        yield
    finally:
        _state["phase"] = before


_SITECUSTOMIZE = '''
import importlib.abc, importlib.util, os, sys

class _TraceStorage(importlib.abc.MetaPathFinder):
    names = {"engine.io.storage", "engine.compaction.file_group_task"}

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        self.names.discard(name)
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.names:
                sys.meta_path.insert(0, self)
        loader = spec.loader
        run = loader.exec_module
        def exec_module(module):
            run(module)
            sys.modules[name] = module
            from bench import s3_trace
            if name == "engine.io.storage":
                s3_trace.install(os.environ["@ENV@"])
            else:
                s3_trace.install_tasks(module)
        loader.exec_module = exec_module
        return spec

if os.environ.get("@ENV@"):
    sys.meta_path.insert(0, _TraceStorage())
'''.replace("@ENV@", ENV)


def worker_env(directory: str) -> dict[str, str]:
    """Environment for processes started from now on (Spark's workers): they trace into `directory` too."""
    site = os.path.join(directory, "_site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
        fh.write(_SITECUSTOMIZE)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [site, root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {ENV: directory, "PYTHONPATH": os.pathsep.join(paths)}


def records(directory: str) -> list[dict[str, Any]]:
    out = []
    for name in glob.glob(os.path.join(directory, "*.jsonl")):
        with open(name) as fh:
            out.extend(json.loads(line) for line in fh if line.strip())
    return sorted(out, key=lambda r: r["at"])


def clear(directory: str) -> None:
    """Drop the records so far (files stay open in their processes: truncate, not delete)."""
    for name in glob.glob(os.path.join(directory, "*.jsonl")):
        with open(name, "r+") as fh:
            fh.truncate(0)


if __name__ == "__main__":
    sys.exit("imported by bench.bench_s3_storage --trace")
