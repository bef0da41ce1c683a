"""Read load on `make run`: 20 concurrent logged-in clients for 60 s against the default deployment.

    python -m bench.bench_read_load [--backend postgresql|sqlite] [--clients 20] [--seconds 60]

Starts `make run` (the supervisor: gunicorn 2 workers × 4 threads, a Celery worker, beat) on a fresh state
folder and database, logs every client in as the demo operator, and has each read `/`, `/api/tables` and
`/runs/` in turn as fast as it is answered. Reports requests/s, p50/p95/max latency, errors (any non-200 or
connection failure) and the PostgreSQL connections the deployment held (sampled every 0.2 s: peak and
mean). Targets (issue 15): 0 errors, ≤ 20 connections. One JSON line on stdout, progress on stderr.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.common import emit, log
from tests.support.stack import REPO, backend_env, drop_pg_database, free_port, session_opener

PATHS = ("/", "/api/tables", "/runs/")


def start_make_run(env: dict[str, str]) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen(["make", "--no-print-directory", "run"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    password = url = ""
    deadline = time.monotonic() + 900
    assert proc.stdout is not None
    while not url and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("make run ended before printing its URL")
        found = re.search(r"operator\s+user: operator\s+password: (\S+)", line)
        password = found.group(1) if found else password
        found = re.search(r"Tidemark control plane: (http://\S+)/", line)
        url = found.group(1) if found else url
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # keep the pipe drained
    return proc, url, password


def pg_connections(database: str | None) -> int:
    if database is None:
        return 0
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)).fetchone()[0]


def read_load(url: str, password: str, clients: int, seconds: float, database: str | None) -> dict:
    openers = [session_opener(url, "operator", password) for _ in range(clients)]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.monotonic()
    stop = start + seconds

    def client(opener) -> None:
        i = 0
        while time.monotonic() < stop:
            path = PATHS[i % len(PATHS)]
            i += 1
            t0 = time.perf_counter()
            try:
                with opener.open(url + path, timeout=30) as resp:
                    resp.read()
                    ok = resp.status == 200
            except Exception as exc:
                ok = False
                with lock:
                    errors.append(f"{path}: {exc!r}"[:200])
            with lock:
                if ok:
                    latencies.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=client, args=(o,)) for o in openers]
    for t in threads:
        t.start()
    held: list[int] = []
    while any(t.is_alive() for t in threads):
        held.append(pg_connections(database))
        time.sleep(0.2)
    elapsed = time.monotonic() - start
    latencies.sort()
    return {"requests": len(latencies) + len(errors), "errors": len(errors), "error_examples": errors[:3],
            "requests_per_s": round((len(latencies) + len(errors)) / elapsed, 1),
            "p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
            "p95_ms": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 1) if latencies else None,
            "max_ms": round(1000 * latencies[-1], 1) if latencies else None,
            "pg_connections_peak": max(held, default=0),
            "pg_connections_mean": round(statistics.mean(held), 1) if held else 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="postgresql", choices=("postgresql", "sqlite"))
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="tidemark-read-load-")) / "state"
    env, database = backend_env(args.backend, state)
    port = free_port()
    env = {**os.environ, **env, "TIDEMARK_BIND": f"127.0.0.1:{port}", "DEMO_BATCHES": "2", "PYTHONUNBUFFERED": "1",
           "TIDEMARK_CELERY_QUEUE": f"read-load-{port}"}
    log(f"make run on {args.backend} ...")
    proc, url, password = start_make_run(env)
    try:
        time.sleep(5)  # the web server binds right after the URL is printed
        log(f"{args.clients} clients for {args.seconds:g} s against {url}")
        result = read_load(url, password, args.clients, args.seconds, database)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
        if database:
            drop_pg_database(database)
    emit("read_load", {"backend": args.backend, "clients": args.clients, "seconds": args.seconds,
                       "server": "gunicorn 2 workers x 4 threads (make run)", **result})


if __name__ == "__main__":
    main()
