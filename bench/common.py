"""Shared benchmark helpers: the anchors' synthetic records, timers, peak RSS, JSON output.

Schema: id string, region string, seq int64, event_time timestamp[ms, UTC],
amount double, note string (~16 chars); the `_hoodie_*` meta columns are added only where a bench
needs the exact bytes a log/base file holds (`with_meta_columns`).
"""
from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

T = TypeVar("T")
T0_MS = 1_735_689_600_000          # 2025-01-01T00:00:00Z
REGIONS = ("eu", "us")
META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
               "_hoodie_partition_path", "_hoodie_file_name")


# ------------------------------------------------------------------------------------------ data

def key_strings(numbers: np.ndarray) -> pa.Array:
    """Record keys `id-000000042` for the given integers (vectorised)."""
    digits = pc.utf8_lpad(pc.cast(pa.array(numbers, pa.int64()), pa.string()), 9, "0")
    return pc.binary_join_element_wise("id", digits, "-")


def records(n: int, *, first_key: int = 0, keys: np.ndarray | None = None, seq: int = 0,
            seed: int = 0) -> pa.Table:
    """n synthetic records; keys are `first_key..first_key+n-1` unless `keys` (ints) is given.

    The region (the partition field) is a function of the key, so an upsert of a key always lands in
    the partition of its insert; event_time spreads over ~12 days, one second per key.
    """
    rng = np.random.default_rng(seed)
    nums = np.arange(first_key, first_key + n, dtype=np.int64) if keys is None else np.asarray(keys, np.int64)
    region = pa.array(np.array(REGIONS, dtype=object)[nums % len(REGIONS)], pa.string())
    event_ms = T0_MS + nums * 1000 + rng.integers(0, 1000, len(nums))
    note_digits = pc.utf8_lpad(pc.cast(pa.array(rng.integers(0, 10**11, len(nums))), pa.string()), 11, "0")
    return pa.table({
        "id": key_strings(nums),
        "region": region,
        "seq": pa.array(np.full(len(nums), seq, np.int64)),
        "event_time": pa.array(event_ms, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "amount": pa.array(rng.random(len(nums)) * 1000.0),
        "note": pc.binary_join_element_wise("note", note_digits, "-"),
    })


def upsert_keys(total_keys: int, n: int, seed: int = 1) -> np.ndarray:
    """n distinct existing keys out of `0..total_keys-1`."""
    return np.sort(np.random.default_rng(seed).choice(total_keys, size=min(n, total_keys), replace=False))


def with_meta_columns(table: pa.Table, instant: str = "20250101000000000",
                      file_id: str = "5f0c2a9e-3b7d-4c1e-9a8f-2d6b4e1c7a90-0") -> pa.Table:
    """The table with the 5 `_hoodie_*` string columns first, filled the way our writer fills them."""
    n = table.num_rows
    seqno = pc.binary_join_element_wise(f"{instant}_0", pc.cast(pa.array(np.arange(n)), pa.string()), "_")
    partition = pc.binary_join_element_wise("region", table.column("region"), "=")
    meta = [pa.array([instant] * n, pa.string()), seqno, table.column("id"), partition,
            pa.array([file_id] * n, pa.string())]
    return pa.Table.from_arrays(meta + list(table.columns), names=list(META_FIELDS) + table.column_names)


def stage_parquet(table: pa.Table, directory: str, name: str = "input.parquet") -> str:
    """Write an input file for Spark to read (not part of any timing)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    pq.write_table(table, path)
    return path


def scratch_dir(prefix: str) -> str:
    base = os.environ.get("TIDEMARK_BENCH_DIR") or tempfile.gettempdir()
    return tempfile.mkdtemp(prefix=prefix, dir=base)


# ------------------------------------------------------------------------------------------ timing

@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """`with stopwatch() as t: ...` then `t["s"]` holds the wall seconds."""
    out: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield out
    finally:
        out["s"] = time.perf_counter() - start


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_time(fn: Callable[[], Any], repeats: int = 3, setup: Callable[[], Any] | None = None) -> dict:
    """Run `fn` `repeats` times (calling `setup` untimed before each); median and all runs, in seconds."""
    runs = []
    for _ in range(max(1, repeats)):
        if setup is not None:
            setup()
        runs.append(timed(fn)[0])
    return {"median_s": round(statistics.median(runs), 4), "runs_s": [round(r, 4) for r in runs]}


def rate(count: int, seconds: float, cores: int = 1) -> float:
    """Records per second per core."""
    return count / seconds / max(1, cores) if seconds > 0 else float("inf")


# ------------------------------------------------------------------------------------------ memory

def peak_rss_mb() -> dict[str, float]:
    """Peak resident set size of this process and of its waited-for children (Linux: ru_maxrss in KiB)."""
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"self_mb": round(self_kb / 1024, 1), "children_mb": round(child_kb / 1024, 1)}


def jvm_rss_mb(spark) -> float | None:
    """Current RSS of the Spark driver JVM (not our child in the rusage sense when py4j launched it)."""
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except Exception:  # noqa: BLE001 - best effort
        return None
    return None


# ------------------------------------------------------------------------------------------ output

def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "pyarrow": pa.__version__,
            "platform": platform.platform(terse=True), "load_avg_1m": round(os.getloadavg()[0], 2)}


def emit(bench: str, result: dict[str, Any]) -> dict[str, Any]:
    """Print one JSON line (the bench's whole output on stdout) and return it."""
    line = {"bench": bench, **result, "machine": machine(), "peak_rss": peak_rss_mb()}
    print(json.dumps(line, default=str), flush=True)
    return line


def log(message: str) -> None:
    """Progress to stderr so stdout stays one JSON line."""
    print(message, file=sys.stderr, flush=True)


def table_layout(path: str) -> dict:
    """Files of the table's latest slices, i.e. what a snapshot reads (older compacted logs not counted)."""
    from engine.read.query import plan_read

    slices = plan_read(path, "snapshot").slices
    logs = [p for s in slices for p in s.log_paths]
    bases = [s.base_path for s in slices if s.base_path]

    def mb(paths: list[str]) -> float:
        return round(sum(os.path.getsize(p) for p in paths) / 2**20, 1)

    return {"file_groups": len(slices), "base_files": len(bases), "base_mb": mb(bases), "log_files": len(logs),
            "log_mb": mb(logs)}


# ------------------------------------------------------------------------------------------ /proc

def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(root: int) -> list[int]:
    """`root` and every process below it (from /proc; Linux)."""
    kids, out, todo = _children_map(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (None once the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2:].split()


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user + system, with reaped children's) of `root` (default: this process) and every process
    below it — for a Spark run the driver JVM and its Python workers too."""
    total = 0
    for pid in descendants(os.getpid() if root is None else root):
        fields = _stat_fields(pid)
        total += sum(int(x) for x in fields[11:15]) if fields else 0
    return total / _TICKS


def cpu_split() -> dict[str, float]:
    """CPU seconds (user + system) used so far by this process ("self"), the JVMs below it ("jvm") and its other
    descendants ("workers": Spark's Python daemon and workers), from /proc. Differences over a timed call are what
    the machine spent on it whatever else runs (processes that exit in between are not counted)."""
    me = os.getpid()
    out = {"self": 0.0, "jvm": 0.0, "workers": 0.0}
    for pid in descendants(me):
        fields = _stat_fields(pid)
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if fields is None:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / _TICKS
        out["self" if pid == me else "jvm" if comm == "java" else "workers"] += seconds
    return out
