"""Peak memory of compacting one file slice with a big base file and a few log records.

    python -m bench.bench_compaction_memory [--scale 1.0] [--rows 9000000] [--note-chars 96]
                                            [--updates 50000] [--inserts 10000] [--keep DIR]

Table (written directly with pyarrow + the log encoder, no Spark; see bench_compaction_planning.DirectTable):
one file group whose base file (written by a completed deltacommit) holds `--rows` records with an
incompressible `note` of `--note-chars` hex characters (~1.1 GB at scale 1; row groups of 1M rows as
hoodie.parquet.max.row.group.rows), plus one log file of `--updates` upserts of existing keys spread over
the whole base and `--inserts` new keys. An unbounded compaction is scheduled here and run in a
subprocess with get_spark(cores=1) (local[1]); while it runs this process polls /proc every 50 ms for
every descendant of that subprocess and keeps each one's VmHWM (peak RSS). The executor-side Python
(pyspark.daemon and its forked workers, which do the merge) is reported apart from the driver Python
and the JVM. Target: executor Python peak RSS well under the base file size.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.bench_compaction_planning import DirectTable
from bench.common import descendants, emit, log, records, scratch_dir, timed, with_meta_columns

CHUNK = 1_000_000
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def wide_note(n: int, chars: int, rng: np.random.Generator) -> pa.Array:
    data = _HEX[rng.integers(0, 16, n * chars, dtype=np.uint8)]
    offsets = np.arange(0, (n + 1) * chars, chars, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


def build(path: str, n_rows: int, note_chars: int, n_updates: int, n_inserts: int, row_group: int) -> dict:
    from engine.config import eventtime
    from engine.config.properties import load_table_config
    from engine.config.schema import table_read_schema
    from engine.io.naming import LogFileName, new_file_id
    from engine.logformat import append_blocks
    from engine.timeline.instants import Timeline
    from engine.timeline.metadata import WriteStat

    t = DirectTable(path, buckets=1, name="bench_mem")
    t.create()
    part, fid = "region=eu", new_file_id(0)
    # Deltacommit 1: the base file, written row group by row group.
    d1 = t.begin()
    pdir = t.partition_dir(part, d1)
    base_name = f"{fid}_0-0-0_{d1}.parquet"
    base_path = os.path.join(pdir, base_name)
    rng = np.random.default_rng(7)
    schema = None
    with timed_block() as tb:
        writer = None
        for start in range(0, n_rows, CHUNK):
            n = min(CHUNK, n_rows - start)
            rows = records(n, first_key=start, seed=start)
            rows = rows.set_column(1, "region", pa.array(["eu"] * n, pa.string()))
            rows = rows.set_column(rows.schema.get_field_index("note"), "note", wide_note(n, note_chars, rng))
            full = with_meta_columns(rows, d1, fid)
            if writer is None:
                schema = full.schema
                writer = pq.ParquetWriter(base_path, schema, compression="snappy")
            writer.write_table(full.cast(schema), row_group_size=row_group)
        writer.close()
    size = os.path.getsize(base_path)
    t.commit(d1, [WriteStat(file_id=fid, path=f"{part}/{base_name}", partition_path=part, num_writes=n_rows,
                             num_inserts=n_rows, total_write_bytes=size).to_json()])
    # The parquet schema must be the table's read schema (meta fields first, same types).
    read_schema = table_read_schema(load_table_config(path), Timeline.load(path).latest_schema())
    assert pq.read_schema(base_path).remove_metadata().equals(read_schema.remove_metadata(), check_metadata=False), \
        (pq.read_schema(base_path), read_schema)
    # Deltacommit 2: one log file with the chosen records.
    d2 = t.begin()
    upd = np.sort(np.random.default_rng(11).choice(n_rows, size=min(n_updates, n_rows), replace=False))
    new = np.arange(n_rows, n_rows + n_inserts)
    chosen = records(len(upd) + len(new), keys=np.concatenate([upd, new]), seq=1, seed=3)
    chosen = chosen.set_column(1, "region", pa.array(["eu"] * chosen.num_rows, pa.string()))
    name = LogFileName(fid, d1, 1, "0-0-0").name
    log_size = append_blocks(os.path.join(pdir, name), [t.log_block(chosen, d2, fid)])
    lo, hi = eventtime.bounds(chosen.column("event_time"))
    t.commit(d2, [t.log_stat(part, fid, d1, name, 1, log_size, chosen.num_rows, lo, hi)])
    pf = pq.ParquetFile(base_path)
    return {"base_rows": n_rows, "base_bytes": size, "base_mb": round(size / 2**20, 1),
            "row_groups": pf.num_row_groups, "uncompressed_mb": round(sum(
                pf.metadata.row_group(i).total_byte_size for i in range(pf.num_row_groups)) / 2**20, 1),
            "log_records": chosen.num_rows, "log_kb": round(log_size / 1024, 1), "base_write_s": round(tb["s"], 1),
            "note_chars": note_chars}


class timed_block:
    def __enter__(self):
        self.out = {}
        self.t = time.perf_counter()
        return self.out

    def __exit__(self, *exc):
        self.out["s"] = time.perf_counter() - self.t


# ------------------------------------------------------------------------------------------ /proc polling

def _status(pid: int) -> dict:
    info = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(("VmHWM:", "VmRSS:", "PPid:", "Name:")):
                    k, v = line.split(":", 1)
                    info[k] = v.split()[0] if k != "Name" else v.strip()
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            info["cmd"] = fh.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return {}
    return info


class Poller(threading.Thread):
    """Keep the max VmHWM of every descendant of `root` (sampled every `interval` s)."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.procs: dict[int, dict] = {}
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            for pid in descendants(self.root):
                st = _status(pid)
                if "VmHWM" not in st:
                    continue
                rec = self.procs.setdefault(pid, {"hwm_kb": 0})
                # Name and command line are refreshed: the launcher script execs into the JVM.
                rec.update(ppid=int(st["PPid"]), name=st["Name"], cmd=st["cmd"])
                rec["hwm_kb"] = max(rec["hwm_kb"], int(st["VmHWM"]))
            time.sleep(self.interval)

    def summary(self) -> dict:
        """Processes by kind: the driver Python (root), the JVM, the executor-side Python (Python processes
        under the JVM: pyspark.daemon and the workers it forks, which run the merge), other helpers."""
        jvm = {pid for pid, rec in self.procs.items() if rec["name"] == "java"}

        def under_jvm(pid: int) -> bool:
            seen = set()
            while pid in self.procs and pid not in seen:
                seen.add(pid)
                pid = self.procs[pid]["ppid"]
                if pid in jvm:
                    return True
            return False

        def kind(pid: int, rec: dict) -> str:
            if pid == self.root:
                return "driver_python"
            if pid in jvm:
                return "jvm"
            if rec["name"].startswith("python") and "pyspark.daemon" in rec["cmd"] and under_jvm(pid):
                return "executor_python"
            return "other"

        out: dict = {}
        for pid, rec in sorted(self.procs.items()):
            out.setdefault(kind(pid, rec), []).append({
                "pid": pid, "ppid": rec["ppid"], "name": rec["name"], "cmd": rec["cmd"][:60],
                "peak_rss_mb": round(rec["hwm_kb"] / 1024, 1)})
        return out


def run_compaction_subprocess(path: str) -> dict:
    cmd = [sys.executable, "-m", "bench.bench_compaction_memory", "--worker", path]
    proc = subprocess.Popen(cmd, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poller = Poller(proc.pid)
    poller.start()
    out, err = proc.communicate()
    poller.stop_flag.set()
    poller.join()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}", "stderr_tail": err.splitlines()[-8:], "procs": poller.summary()}
    return {**json.loads(lines[-1]), "procs": poller.summary()}


def worker(path: str) -> None:
    """Subprocess: local[1] Spark, run the pending compaction; the parent measures memory from /proc."""
    import resource

    from engine import Table
    from engine.spark import get_spark

    start_s, spark = timed(lambda: get_spark(cores=1))
    seconds, res = timed(lambda: Table.open(path).run_compaction())
    time.sleep(0.3)   # let the parent's poller take a last sample of the (reused) worker
    spark.stop()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"spark_start_s": round(start_s, 2), "compaction_s": round(seconds, 2),
                      "records_written": res.records_written, "base_files": res.base_files,
                      "rusage_children_max_mb": round(ru / 1024, 1),
                      "rusage_self_max_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}),
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --rows (and the log records)")
    ap.add_argument("--rows", type=int, default=9_000_000)
    ap.add_argument("--note-chars", type=int, default=96)
    ap.add_argument("--updates", type=int, default=50_000)
    ap.add_argument("--inserts", type=int, default=10_000)
    ap.add_argument("--row-group", type=int, default=1_000_000)
    ap.add_argument("--keep", help="build the table in this directory and keep it")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    from engine import Table

    n_rows = int(args.rows * args.scale)
    work = args.keep or scratch_dir("tm-bench-mem-")
    path = os.path.join(work, "table")
    try:
        build_s, lay = timed(lambda: build(path, n_rows, args.note_chars, max(1, int(args.updates * args.scale)),
                                           max(1, int(args.inserts * args.scale)), args.row_group))
        log(f"bench_compaction_memory: built in {build_s:.1f}s: {lay}")
        plan = Table.open(path).schedule_compaction(strategy="unbounded")
        run = run_compaction_subprocess(path)
        procs = run.get("procs", {})
        ex = max((p["peak_rss_mb"] for p in procs.get("executor_python", [])), default=None)
        base_mb = lay["base_bytes"] / 2**20
        emit("bench_compaction_memory", {
            "table": lay, "build_s": round(build_s, 1), "instant": plan.instant, "run": run,
            "executor_python_peak_rss_mb": ex,
            "driver_python_peak_rss_mb": max((p["peak_rss_mb"] for p in procs.get("driver_python", [])), default=None),
            "jvm_peak_rss_mb": max((p["peak_rss_mb"] for p in procs.get("jvm", [])), default=None),
            "ratio_executor_rss_vs_base_size": round(ex / base_mb, 3) if ex else None,
            "expected_rows": n_rows + max(1, int(args.inserts * args.scale)),
            "target": "executor Python peak RSS well under the base file size",
            "meets_target": bool(ex and ex < 0.5 * base_mb),
        })
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
