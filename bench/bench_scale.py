"""Ten thousand tables: bulk registration, one sampling cycle, the list page / API / metrics, a month of samples.

    python -m bench.bench_scale [--backend sqlite|postgresql] [--tables 10000] [--changed-pct 1]
                                [--clients 20] [--requests 100] [--days 30]

- `--tables` tables under one root: `--changed-pct` % of them real tables (hard-linked copies of a small
  flights demo table), the rest synthetic timelines (a real `hoodie.properties` and 12 instant files —
  enough for discovery, `Table.open` and the change check, which is all an unchanged table costs);
- bulk registration: `discover` (dry run, then for real) of the whole root;
- one sampling cycle on one sampling worker (a real `celery worker`, concurrency 1, no Spark) after a
  compaction plan was scheduled on every real table: beat's fan-out → all tables checked; the changed ones
  fully sampled. Side by side: the mean full-sample time × tables = what sampling every table would cost;
- the list page (first page, a deep page, a filtered + sorted page), `GET /api/tables` and `/metrics` on
  gunicorn (2 workers × 4 threads, as `TIDEMARK_WEB=gunicorn`): p50/p95 for one client, then requests per
  second and p95 with `--clients` concurrent clients;
- database size after `--days` simulated days of samples as change-driven sampling stores them (the
  changed share every 5 minutes, every other table once a day), rolled up once per simulated day.
Prints one JSON line; progress on stderr.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.bench_control_plane import latencies, log, operator_token
from tests.support.stack import Stack, _wait_port, activate, backend_env, drop_pg_database, free_port, migrate

SYNTHETIC_INSTANTS = 12
TIDE_BUCKETS = 24


# ------------------------------------------------------------------------------------------ tables

def demo_template(path: Path) -> None:
    from engine.demo import run_demo
    from engine.spark import get_spark, stop_spark

    run_demo(str(path), get_spark(), batches=3)
    stop_spark()


def real_copy(template: Path, dest: Path) -> None:
    """A copy sharing the template's files (hard links): reads are real, new instants are its own."""
    shutil.copytree(template, dest, symlinks=True, copy_function=os.link)


def synthetic(template: Path, dest: Path, n: int) -> None:
    """A table whose `.hoodie/` holds the template's properties and a short completed timeline."""
    hoodie = dest / ".hoodie"
    hoodie.mkdir(parents=True)
    shutil.copyfile(template / ".hoodie" / "hoodie.properties", hoodie / "hoodie.properties")
    for k in range(SYNTHETIC_INSTANTS):
        ts = f"2026010{1 + k % 9}{n % 24:02d}{k:02d}00000"
        for suffix in (".deltacommit.requested", ".deltacommit.inflight", ".deltacommit"):
            (hoodie / f"{ts}{suffix}").write_bytes(b"{}" if suffix == ".deltacommit" else b"")


def build_root(root: Path, template: Path, tables: int, real: int) -> list[str]:
    names = []
    for i in range(tables):
        group = root / f"team-{i % 50:02d}"
        dest = group / f"t{i:05d}"
        if i < real:
            real_copy(template, dest)
        else:
            synthetic(template, dest, i)
        names.append(f"team-{i % 50:02d}-t{i:05d}")
    return names


# ------------------------------------------------------------------------------------------ phases

def register_all(root: Path) -> dict:
    from webapp.tables import discovery

    start = time.perf_counter()
    dry = discovery.discover(None, str(root), dry_run=True)
    dry_s = time.perf_counter() - start
    start = time.perf_counter()
    report = discovery.discover(None, str(root), dry_run=False)
    real_s = time.perf_counter() - start
    start = time.perf_counter()
    again = discovery.discover(None, str(root), dry_run=False)
    again_s = time.perf_counter() - start
    return {"found": len(dry.candidates), "dry_run_s": round(dry_s, 1), "register_s": round(real_s, 1),
            "registered": report.summary()["registered"], "second_run_s": round(again_s, 1),
            "second_run_new": again.summary()["registered"]}


def prime(real_paths: set[str]) -> None:
    """Real tables: a full sample each. Synthetic ones: their mark and a plausible latest sample, as a
    previous cycle would have left them (they cannot be fully sampled: their instants hold no data)."""
    from django.utils import timezone

    from engine import Table
    from tasks import change_sampling
    from webapp.tables import latest
    from webapp.tables.models import MetricSample, RegisteredTable, SamplingState

    tables = list(RegisteredTable.objects.order_by("pk").values_list("pk", "path"))
    change_sampling.sample_tables([pk for pk, path in tables if path in real_paths])
    now = timezone.now()
    synthetic_ids = [pk for pk, path in tables if path not in real_paths]
    rows = [sample_row(pk, now, i) for i, pk in enumerate(synthetic_ids)]
    MetricSample.objects.bulk_create(rows, batch_size=2000)
    latest.point_at_newest(synthetic_ids)
    marks = {pk: Table.mark(path) for pk, path in tables if path not in real_paths}
    states = list(SamplingState.objects.filter(table_id__in=synthetic_ids))
    for s in states:
        s.mark, s.newest_instant, s.checked_at = marks[s.table_id].digest, marks[s.table_id].newest_instant or "", now
    SamplingState.objects.bulk_update(states, ["mark", "newest_instant", "checked_at"], batch_size=1000)
    RegisteredTable.objects.filter(pk__in=[pk for i, pk in enumerate(synthetic_ids) if i % 3 == 0]).update(
        freshness_sla_minutes=120)


def sample_row(table_id: int, at: dt.datetime, i: int, tide: bool = True):
    from webapp.tables.models import MetricSample

    lag = float((i * 37) % 20_000)
    return MetricSample(table_id=table_id, taken_at=at, ro_completion_time=at - dt.timedelta(hours=3),
                        ro_freshness_time=at - dt.timedelta(hours=3), freshness_lag_seconds=lag,
                        remaining_log_files=i % 40, remaining_log_bytes=(i % 40) << 20, file_slices_with_logs=i % 9,
                        pending_compactions=1 if i % 17 == 0 else 0, late_records=i % 13 == 0 and 5 or 0,
                        sla_breached=lag > 7200,
                        tide=[{"start": f"2026-01-01T{h:02d}:00:00Z", "end": f"2026-01-01T{h:02d}:59:59Z",
                               "log_files": 2, "log_records": 1000 + h, "log_bytes": 40_000 + h}
                              for h in range(TIDE_BUCKETS)] if tide else [])


def change_real_tables(real_paths: list[str]) -> None:
    from engine import Table

    for path in real_paths:
        plan = Table.open(path).schedule_compaction(threshold="2013-01-04T00:00:00Z")
        if plan.instant is None:
            raise RuntimeError(f"no compaction to plan on {path}: {plan.message}")


def wait_idle(quiet_s: float = 5.0) -> None:
    """Until no check happened for `quiet_s` (whatever was queued before has been worked off)."""
    from django.db.models import Sum

    from webapp.tables.models import SamplingState

    last, since = None, time.perf_counter()
    while time.perf_counter() - since < quiet_s:
        checks = SamplingState.objects.aggregate(n=Sum("checks"))["n"]
        if checks != last:
            last, since = checks, time.perf_counter()
        time.sleep(0.5)


def sampling_cycle(stack: Stack, tables: int) -> dict:
    """Beat's fan-out on a real sampling worker; seconds until every table was checked."""
    from django.db.models import Sum
    from django.utils import timezone

    from tasks.jobs import sample_all_tables
    from webapp import queues
    from webapp.tables.models import SamplingState

    wait_idle()

    before = SamplingState.objects.aggregate(s=Sum("samples"), k=Sum("skips"), c=Sum("check_seconds"),
                                             f=Sum("sample_seconds"), n=Sum("checks"))
    t0 = timezone.now()
    start = time.perf_counter()
    sample_all_tables.apply_async(queue=queues.sampling_queue())
    while SamplingState.objects.filter(checked_at__gte=t0).count() < tables:
        if time.perf_counter() - start > 1800:
            raise RuntimeError("the sampling cycle did not finish in 30 minutes:\n" + stack.log_text("sampler")[-3000:])
        time.sleep(0.25)
    seconds = time.perf_counter() - start
    wait_idle(2.0)   # the last chunk's bookkeeping is committed
    after = SamplingState.objects.aggregate(s=Sum("samples"), k=Sum("skips"), c=Sum("check_seconds"),
                                            f=Sum("sample_seconds"), n=Sum("checks"))
    sampled = after["s"] - before["s"]
    sample_s = after["f"] - before["f"]
    mean_sample = sample_s / sampled if sampled else 0.0
    return {"cycle_s": round(seconds, 1), "checked": after["n"] - before["n"], "sampled": sampled,
            "skipped": after["k"] - before["k"],
            "check_s_total": round(after["c"] - before["c"], 1), "sample_s_total": round(sample_s, 1),
            "mean_full_sample_s": round(mean_sample, 3),
            "sample_every_table_estimate_s": round(mean_sample * tables, 0)}


def start_gunicorn(stack: Stack) -> str:
    port = free_port()
    stack.spawn("web", [sys.executable, "-m", "gunicorn", "webapp.wsgi", "--bind", f"127.0.0.1:{port}",
                        "--workers", "2", "--threads", "4", "--log-level", "warning"])
    _wait_port("127.0.0.1", port, "gunicorn", timeout_s=60)
    stack.url = f"http://127.0.0.1:{port}"
    return stack.url


def concurrent(fetch, clients: int, per_client: int) -> dict:
    times: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        mine = []
        for _ in range(per_client):
            start = time.perf_counter()
            fetch()
            mine.append((time.perf_counter() - start) * 1000)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    times.sort()
    return {"clients": clients, "requests": len(times), "req_per_s": round(len(times) / wall, 1),
            "p50_ms": round(statistics.median(times), 1), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1)}


def web(stack: Stack, token: str, clients: int, requests: int) -> dict:
    auth = {"Authorization": f"Bearer {token}"}

    def get(path: str):
        return lambda: urllib.request.urlopen(urllib.request.Request(stack.url + path, headers=auth)).read()

    from tests.support.stack import session_opener

    pages = session_opener(stack.url, "bench-operator", "bench-password-1")
    first = json.loads(get("/api/tables?limit=100&sort=-lag")())
    deep = first
    for _ in range(40):                     # 40 pages in: rows 4,001–4,100 by lag (fewer with fewer tables)
        if not deep["next"] or not json.loads(get(deep["next"])())["next"]:
            break
        deep = json.loads(get(deep["next"])())
    deep_path = deep["next"] or "/api/tables?sort=-lag"
    out = {
        "list_page": latencies(lambda: pages.open(stack.url + "/").read(), requests),
        "list_page_filtered": latencies(lambda: pages.open(stack.url + "/?status=breached&sort=-lag").read(),
                                        requests),
        "api_tables": latencies(get("/api/tables"), requests),
        "api_tables_page_41": latencies(get(deep_path), requests),
        "metrics": latencies(get("/metrics"), max(requests // 10, 5)),
    }
    out["metrics_bytes"] = len(get("/metrics")())
    out["list_page_concurrent"] = concurrent(lambda: pages.open(stack.url + "/").read(), clients, 10)
    out["api_tables_concurrent"] = concurrent(get("/api/tables"), clients, 10)
    return out


def month_of_samples(days: int, changed_pct: float) -> dict:
    """`days` days of samples as change-driven sampling stores them, rolled up once per simulated day: the
    changed share ("streaming" tables) gets a new sample every 5-minute cycle, every other table changes
    once a day (a daily batch); floor samples that read what the latest says store nothing. Only the latest
    sample keeps its tide (webapp.tables.latest), so history rows carry none."""
    from django.db import connection

    from webapp.tables.models import MetricSample, RegisteredTable, SamplingState
    from webapp.tables.retention import Retention, roll_up

    SamplingState.objects.update(latest_sample=None)
    MetricSample.objects.all()._raw_delete(MetricSample.objects.db)
    ids = list(RegisteredTable.objects.order_by("pk").values_list("pk", flat=True))
    streaming = ids[: max(1, int(len(ids) * changed_pct / 100))]
    start_day = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    inserted, rollup_s = 0, 0.0
    for day in range(days):
        day_start = start_day + dt.timedelta(days=day)
        rows = [sample_row(pk, day_start + dt.timedelta(minutes=pk % 1440), pk + day, tide=False)
                for pk in ids[len(streaming):]]
        rows += [sample_row(pk, day_start + dt.timedelta(minutes=5 * k + 1), pk + k, tide=False)
                 for k in range(288) for pk in streaming]
        MetricSample.objects.bulk_create(rows, batch_size=5000)
        inserted += len(rows)
        t = time.perf_counter()
        roll_up(day_start + dt.timedelta(days=1), Retention.from_env())
        rollup_s += time.perf_counter() - t
        log(f"  day {day + 1}: {inserted} samples stored, {MetricSample.objects.count()} rows kept")
    return {"days": days, "samples_stored": inserted, "rows_kept": MetricSample.objects.count(),
            "rollup_s_total": round(rollup_s, 1), "database_mb": database_mb(connection)}


def database_mb(connection) -> float:
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("VACUUM")
            cur.execute("SELECT pg_database_size(current_database())")
            return round(cur.fetchone()[0] / 2**20, 1)
        cur.execute("VACUUM")
        cur.execute("PRAGMA page_count")
        pages = cur.fetchone()[0]
        cur.execute("PRAGMA page_size")
        return round(pages * cur.fetchone()[0] / 2**20, 1)


# ------------------------------------------------------------------------------------------ main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--changed-pct", type=float, default=1.0)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--days", type=int, default=30, help="simulated days of samples (0: skip)")
    ap.add_argument("--keep-logs", help="copy the stack's logs (sampler, web) into this folder")
    ap.add_argument("--skip-sampling", action="store_true",
                    help="no sampling cycles: registration, primed latest samples, then the web measures only")
    args = ap.parse_args()

    state = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    root = state / "tables"
    root.mkdir()
    env, pg_database = backend_env(args.backend, state)
    env["TIDEMARK_LOG_LEVEL"] = "WARNING"
    stack = Stack(args.backend, state, env)
    real = max(1, int(args.tables * args.changed_pct / 100))
    out: dict = {"bench": "scale", "backend": args.backend, "tables": args.tables, "changed": real,
                 "cpus": os.cpu_count()}
    try:
        activate(env)
        migrate()
        log("streaming a small flights demo table (3 batches) ...")
        template = state / "template"
        demo_template(template)
        log(f"laying out {args.tables} tables ({real} real) ...")
        t = time.perf_counter()
        build_root(root, template, args.tables, real)
        out["layout_s"] = round(time.perf_counter() - t, 1)
        out["registration"] = register_all(root)
        log(f"registration {out['registration']}")
        from webapp.tables.models import RegisteredTable

        real_paths = sorted(str(p) for p in RegisteredTable.objects.values_list("path", flat=True)
                            if os.path.basename(p) < f"t{real:05d}")
        prime(set(real_paths))
        _, token = operator_token()
        stack.env["METRICS_TOKEN"] = token   # /metrics is closed without a token: scrape it with the same one
        if args.skip_sampling:
            start_gunicorn(stack)
            out["web"] = web(stack, token, args.clients, args.requests)
            log(f"web {json.dumps(out['web'])}")
            print(json.dumps(out))
            return
        # The sampling worker: the sampling queue only, no Spark (sampling reads headers and the timeline).
        stack.spawn("sampler", [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--loglevel", "INFO",
                                "--concurrency", "1", "--pool", "prefork", "--without-gossip", "--without-mingle",
                                "-Q", f"{env['TIDEMARK_CELERY_QUEUE']}-sampling", "-n", "sampler@%h"],
                    {"TIDEMARK_WARM_SPARK": "0", "TIDEMARK_LOG_LEVEL": "INFO"})
        stack.wait_for_log("sampler", "ready.")
        unchanged = sampling_cycle(stack, args.tables)   # after the first samples discovery queued
        log(f"cycle with nothing changed: {unchanged}")
        change_real_tables(real_paths)
        out["sampling_cycle"] = sampling_cycle(stack, args.tables)
        out["sampling_cycle_unchanged"] = unchanged
        log(f"cycle with {real} changed: {out['sampling_cycle']}")
        stack.stop("sampler")
        start_gunicorn(stack)
        out["web"] = web(stack, token, args.clients, args.requests)
        log(f"web {json.dumps(out['web'])}")
        stack.stop("web")
        if args.days:
            log(f"simulating {args.days} days of samples ...")
            out["month"] = month_of_samples(args.days, args.changed_pct)
        print(json.dumps(out))
    finally:
        stack.stop_all()
        if args.keep_logs:
            for name, path in stack.logs.items():
                shutil.copyfile(path, Path(args.keep_logs) / f"{name}.log")
        from django.db import connections

        connections.close_all()
        if pg_database:
            drop_pg_database(pg_database)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
