"""Soak of the control plane: random triggers, cleans, rollbacks, recovers and kill -9s against two workers.

    python -m bench.soak_control_plane [--minutes 30] [--backend postgresql|sqlite] [--seed 15]

Not part of `make bench` (it runs for half an hour). Builds the flights demo table, starts two warm Celery
workers (short lease ttl) on PostgreSQL + Redis, and until the time is up draws one step at random:
a compaction trigger at a random event-time threshold, a clean, a rollback of the newest compaction, a
recover, or a kill: a compaction is requested and, once it runs, the whole process group of the worker
holding its lease (main, pool child, Spark JVM) is killed with SIGKILL; recover runs are requested (the surviving worker takes them)
until one succeeds and no compaction is pending ("time to recover" is measured from the kill to that
moment), then the killed worker is restarted.
After every step the table's snapshot is read by Tidemark and by hudi 0.5.0 (hudi-rs) and both must equal
the snapshot before the soak (no step changes the table's logical content).
Reports runs by state, kills survived, mean/max time to recover and snapshot mismatches as one JSON line.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import emit, log
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import register, request, wait_final
from tests.support.stack import Stack, activate, backend_env, drop_pg_database, migrate

STEPS = ("trigger", "clean", "rollback", "recover", "kill")
WEIGHTS = (35, 15, 15, 15, 20)


def build_table(root: Path, batches: int) -> Path:
    from engine.demo import run_demo
    from engine.spark import get_spark, stop_spark

    path = root / "flights"
    run_demo(str(path), get_spark(), batches=batches)
    stop_spark()   # the soak's own JVM is not needed any more; the workers have theirs
    return path


def snapshot_ok(path: Path, baseline: dict) -> bool:
    from engine.read.query import read_arrow

    ours = rows_by_key(read_arrow(str(path), "snapshot"))
    oracle = rows_by_key(hudi_read(path, "snapshot"))
    return ours == oracle == baseline


def random_threshold(rng: random.Random) -> str:
    day = dt.datetime(2013, 1, 2, tzinfo=dt.UTC) + dt.timedelta(hours=rng.randrange(0, 24 * 10))
    return day.isoformat()


class Soak:
    def __init__(self, stack: Stack, table, path: Path, rng: random.Random) -> None:
        self.stack, self.table, self.path, self.rng = stack, table, path, rng
        self.kills = 0
        self.recover_times: list[float] = []

    def newest_compaction(self) -> str | None:
        from engine import Table

        done = [c.instant for c in Table.open(str(self.path)).compactions() if c.state == "completed"]
        return max(done) if done else None

    def pending(self) -> list[str]:
        from engine import Table

        return [c.instant for c in Table.open(str(self.path)).compactions() if c.state != "completed"]

    def worker_running(self, run_id: int) -> str | None:
        """The worker whose pool process holds the run's lease (its owner names the pid), if any yet."""
        from webapp.tables.models import TableLease

        owner = TableLease.objects.filter(owner__startswith=f"run:{run_id}@").values_list("owner", flat=True).first()
        if owner is None:
            return None
        pid = owner.split("@", 1)[1].split(":")[1]
        try:
            pgid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
        except (OSError, ValueError, IndexError):
            return None
        return next((name for name, proc in self.stack.processes.items() if proc.pid == pgid), None)

    def step(self, kind: str) -> None:
        if kind == "trigger":
            wait_final(request(self.table, "schedule_execute", threshold=random_threshold(self.rng)).pk, 600)
        elif kind == "clean":
            wait_final(request(self.table, "clean").pk, 600)
        elif kind == "rollback":
            instant = self.pending()[:1] or ([self.newest_compaction()] if self.newest_compaction() else [])
            if instant:
                wait_final(request(self.table, "rollback", instant=instant[0]).pk, 600)
        elif kind == "recover":
            wait_final(request(self.table, "recover").pk, 600)
        else:
            self.kill()

    def kill(self) -> None:
        from webapp.tables.models import Run

        run = request(self.table, "schedule_execute", threshold=random_threshold(self.rng))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            current = Run.objects.get(pk=run.pk)
            if current.state != "queued":
                break
            time.sleep(0.1)
        time.sleep(self.rng.uniform(0, 1.5))   # somewhere in planning or compacting
        name = self.worker_running(run.pk)
        if name is None or Run.objects.get(pk=run.pk).state != "running":
            wait_final(run.pk, 600)
            return   # finished (or refused) before the kill: nothing to survive
        victim = self.stack.processes[name]
        os.killpg(victim.pid, signal.SIGKILL)   # the worker, its pool child and their Spark JVM
        victim.wait()
        self.stack.processes.pop(name)
        killed_at = time.monotonic()
        self.kills += 1
        log(f"  killed {name} during run {run.pk}")
        refusals = 0
        while True:   # served by the surviving worker at once
            recovered = wait_final(request(self.table, "recover").pk, 600)
            if recovered.state == "succeeded" and not self.pending():
                break
            refusals += 1
            time.sleep(1)
        self.recover_times.append(time.monotonic() - killed_at)
        log(f"  recovered {time.monotonic() - killed_at:.1f} s after the kill ({refusals} recover(s) refused first)")
        self.stack.start_worker(name, extra_env={"TIDEMARK_LEASE_TTL": "10"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--backend", default="postgresql", choices=("postgresql", "sqlite"))
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--batches", type=int, default=4)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    state = Path(tempfile.mkdtemp(prefix="tidemark-soak-")) / "state"
    (state / "tables").mkdir(parents=True)
    env, database = backend_env(args.backend, state)
    stack = Stack(args.backend, state, env)
    try:
        activate(env)
        migrate()
        log("building the flights demo table ...")
        path = build_table(state / "tables", args.batches)
        table = register(path, name="flights")
        baseline = rows_by_key(hudi_read(path, "snapshot"))
        for name in ("w1", "w2"):
            stack.start_worker(name, extra_env={"TIDEMARK_LEASE_TTL": "10"})
        steps = {k: 0 for k in STEPS}
        mismatches: list[int] = []
        survived = 0
        soak = Soak(stack, table, path, rng)
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline:
            kind = rng.choices(STEPS, WEIGHTS)[0]
            steps[kind] += 1
            log(f"step {sum(steps.values())}: {kind}")
            kills_before = soak.kills
            soak.step(kind)
            if not snapshot_ok(path, baseline):
                mismatches.append(sum(steps.values()))
                log("  SNAPSHOT MISMATCH")
            elif soak.kills > kills_before:
                survived += 1
        from django.db.models import Count

        from webapp.tables.models import Run

        by_state = dict(Run.objects.exclude(kind="metrics").values_list("state").annotate(n=Count("id")))
        why: dict[str, int] = {}
        for kind, state, reason, error in (Run.objects.exclude(kind="metrics").filter(state__in=("failed", "refused"))
                                           .values_list("kind", "state", "refusal_reason", "error")):
            key = f"{kind} {state}: {reason or error.splitlines()[0][:90] if error else reason}"
            why[key] = why.get(key, 0) + 1
        emit("soak_control_plane", {
            "backend": args.backend, "minutes": args.minutes, "seed": args.seed, "steps": steps,
            "runs_by_state": by_state, "failed_or_refused_because": why, "kills": soak.kills, "kills_survived": survived,
            "mean_time_to_recover_s": round(statistics.mean(soak.recover_times), 1) if soak.recover_times else None,
            "max_time_to_recover_s": round(max(soak.recover_times), 1) if soak.recover_times else None,
            "snapshot_checks": sum(steps.values()), "snapshot_mismatches": mismatches,
            "pending_at_end": soak.pending()})
    finally:
        stack.stop_all()
        from django.db import connections

        connections.close_all()
        if database:
            drop_pg_database(database)


if __name__ == "__main__":
    main()
