"""The control plane's latencies and the worker's memory, on a live stack (Django server + Celery worker).

    python -m bench.bench_control_plane [--backend sqlite|postgresql] [--tables 1000] [--requests 100]

- tables list page (`/`) and `GET /api/tables` with `--tables` registered tables (each with a day of
  metric samples and a run): p50/p95 over `--requests` sequential requests (target p95 < 100 ms);
- click-to-plan with a warm worker: `POST /api/tables/<name>/compactions` → the plan's
  `.compaction.requested` on the table's timeline (target < 5 s), over `--clicks` copies of the demo table;
- worker RSS (the worker, its pool process and their Spark JVM together) idle and at its peak while it
  compacts the flights demo table.
Prints one JSON line; progress on stderr.
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.support.stack import Stack, activate, backend_env, drop_pg_database, migrate, session_opener

THRESHOLD = "2013-01-20T00:00:00Z"
SAMPLES_PER_TABLE = 24


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ fixtures

def register_many(count: int, root: Path) -> None:
    """`count` registered tables with SAMPLES_PER_TABLE hourly samples and one finished run each."""
    from django.utils import timezone

    from webapp.tables.models import MetricSample, RegisteredTable, Run

    now = timezone.now()
    tables = RegisteredTable.objects.bulk_create(
        [RegisteredTable(name=f"bench-{i:04d}", path=str(root / f"bench-{i:04d}"), freshness_sla_minutes=120)
         for i in range(count)])
    samples = [MetricSample(table=t, taken_at=now - dt.timedelta(hours=h), ro_completion_time=now - dt.timedelta(hours=h + 3),
                            freshness_lag_seconds=3 * 3600, remaining_log_files=10 + h, remaining_log_bytes=1 << 20,
                            file_slices_with_logs=4, pending_compactions=0, sla_breached=True,
                            tide=[{"start": "2013-01-01T00:00:00Z", "end": "2013-01-01T01:00:00Z",
                                   "log_files": 1, "log_records": 5, "log_bytes": 100}])
               for t in tables for h in range(SAMPLES_PER_TABLE)]
    MetricSample.objects.bulk_create(samples, batch_size=2000)
    Run.objects.bulk_create([Run(table=t, kind="schedule_execute", state="succeeded", instant="20250101000000000",
                                 started_at=now, finished_at=now) for t in tables])


def operator_token() -> tuple[str, str]:
    """An operator with a known password, and an API token for it."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from webapp.accounts.models import ApiToken

    call_command("tidemark_users", "--groups-only", stdout=io.StringIO())   # stdout carries only the JSON line
    user = get_user_model().objects.create_user("bench-operator", password="bench-password-1")
    user.groups.set([Group.objects.get(name="operator")])
    return "bench-password-1", ApiToken.issue(user, "bench")[1]


# ------------------------------------------------------------------------------------------ measures

def latencies(fetch, n: int) -> dict[str, float]:
    for _ in range(5):
        fetch()  # warm caches, connections, templates
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fetch()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(times[int(0.95 * (n - 1))], 1),
            "max_ms": round(times[-1], 1), "requests": n}


def tree_rss_mb(root_pid: int) -> float:
    """RSS of a process and all its descendants (worker, pool processes, Spark JVM, Python workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return round(total / 1024, 1)


class PeakRss:
    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mb(self.pid))
            time.sleep(0.1)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def requested_plan(path: Path) -> bool:
    return any(p.name.endswith(".compaction.requested") for p in (path / ".hoodie").iterdir())


def click_to_plan(stack: Stack, token: str, name: str, path: Path) -> tuple[float, int]:
    body = json.dumps({"threshold": THRESHOLD}).encode()
    req = urllib.request.Request(f"{stack.url}/api/tables/{name}/compactions", body, method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req) as resp:
        run_id = json.loads(resp.read())["id"]
    while not requested_plan(path):
        if time.perf_counter() - start > 120:
            raise RuntimeError(f"no plan on {name}'s timeline after 120 s (run {run_id})")
        time.sleep(0.02)
    return time.perf_counter() - start, run_id


def wait_run(run_id: int, timeout_s: float = 900) -> str:
    from webapp.tables.models import Run

    deadline = time.monotonic() + timeout_s
    while (state := Run.objects.get(pk=run_id).state) not in ("succeeded", "failed", "refused"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} still {state}")
        time.sleep(0.2)
    return state


def register_copy(template: Path, root: Path, name: str) -> tuple[str, Path]:
    from webapp.tables.models import RegisteredTable

    path = root / name
    shutil.copytree(template, path, symlinks=True)
    RegisteredTable.objects.create(name=name, path=str(path))
    return name, path


def demo_table(path: Path) -> None:
    from engine.demo import run_demo
    from engine.spark import get_spark, stop_spark

    run_demo(str(path), get_spark(), batches=12)
    stop_spark()


# ------------------------------------------------------------------------------------------ main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--clicks", type=int, default=3)
    args = ap.parse_args()

    state = Path(tempfile.mkdtemp(prefix="bench-cp-"))
    (state / "tables").mkdir()
    env, pg_database = backend_env(args.backend, state)
    stack = Stack(args.backend, state, env)
    out: dict = {"bench": "control_plane", "backend": args.backend, "tables": args.tables}
    try:
        activate(env)
        migrate()
        log(f"registering {args.tables} tables ...")
        register_many(args.tables, state / "tables")
        password, token = operator_token()
        stack.start_server()
        pages = session_opener(stack.url, "bench-operator", password)
        out["tables_list_page"] = latencies(lambda: pages.open(stack.url + "/").read(), args.requests)
        api = urllib.request.Request(stack.url + "/api/tables", headers={"Authorization": f"Bearer {token}"})
        out["api_tables"] = latencies(lambda: urllib.request.urlopen(api).read(), args.requests)
        log(f"list page {out['tables_list_page']}, api {out['api_tables']}")

        log("streaming the flights demo table ...")
        template = state / "flights-template"
        demo_table(template)
        copies = [register_copy(template, state / "tables", f"flights-{i}") for i in range(args.clicks)]

        worker = stack.start_worker("worker", warm=True)
        time.sleep(5)
        out["worker_rss_idle_mb"] = tree_rss_mb(worker.pid)
        clicks, peaks = [], []
        for name, path in copies:
            with PeakRss(worker.pid) as peak:
                seconds, run_id = click_to_plan(stack, token, name, path)
                state_ = wait_run(run_id)
            clicks.append(round(seconds, 2))
            peaks.append(peak.peak)
            log(f"{name}: click-to-plan {seconds:.2f} s, run {state_}, peak worker RSS {peak.peak} MB")
        out["click_to_plan_s"] = {"each": clicks, "median": statistics.median(clicks), "max": max(clicks)}
        out["worker_rss_compacting_peak_mb"] = max(peaks)
        out["cpus"] = os.cpu_count()
        print(json.dumps(out))
    finally:
        stack.stop_all()
        from django.db import connections

        connections.close_all()
        if pg_database:
            drop_pg_database(pg_database)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
