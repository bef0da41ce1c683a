"""The supervisor (`python -m tasks.supervisor`, what `make run` ends with) on both deployments:
- a worker or web killed with kill -9 (its whole process group: pool child, JVM) is restarted with a
  backoff while the others keep serving, and runs requested afterwards are carried out;
- with the compaction worker stopped (SIGSTOP), the sampling worker still sweeps: a queued run is failed
  within the queued timeout plus one sweep interval, and the table takes a new trigger;
- SIGTERM mid-compaction is graceful: no new runs, the running compaction finishes and is recorded as
  succeeded (no Recover needed), and only then do the worker and its JVM stop."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from engine import Table
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.runs import register, wait_final, wait_until
from tests.support.stack import REPO, Stack, free_port, port_open

T = dt.datetime(2013, 1, 6, tzinfo=dt.UTC)


class Supervisor:
    """A supervisor process of the test, its output in a log file; `queue` is its Celery queue."""

    def __init__(self, stack: Stack, warm: bool, extra_env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.queue = f"sup-{uuid.uuid4().hex[:6]}"
        self.log = stack.state / f"supervisor-{self.queue}.log"
        env = {**os.environ, **stack.env, "TIDEMARK_BIND": f"127.0.0.1:{self.port}", "TIDEMARK_CELERY_QUEUE": self.queue,
               "TIDEMARK_WARM_SPARK": "1" if warm else "0", "TIDEMARK_RESTART_MAX_S": "2", "PYTHONUNBUFFERED": "1",
               "TIDEMARK_WEB_WORKERS": "1", "TIDEMARK_WEB_THREADS": "2", "TIDEMARK_EMBEDDED_METASTORE": "0",
               **(extra_env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "tasks.supervisor"], cwd=REPO, env=env,
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def pids(self, name: str) -> list[int]:
        return [int(p) for p in re.findall(rf"{name} started \(pid (\d+)\)", self.text())]

    def wait_log(self, pattern: str, timeout_s: float = 180) -> None:
        wait_until(lambda: re.search(pattern, self.text()) is not None or self.proc.poll() is not None, timeout_s,
                   f"the supervisor to log {pattern!r}")
        assert re.search(pattern, self.text()), f"supervisor exited ({self.proc.returncode}):\n{self.text()[-3000:]}"

    def healthz(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=10) as resp:
            return json.loads(resp.read())

    def wait_healthy(self, timeout_s: float = 90) -> None:
        def answers() -> bool:
            try:
                return self.healthz()["status"] == "ok"
            except (OSError, urllib.error.HTTPError):
                return False
        wait_until(answers, timeout_s, "the web server to answer /healthz")

    def terminate(self, timeout_s: float = 240) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def kill_all(self) -> None:
        children = re.findall(r"\w+ started \(pid (\d+)\)", self.text())   # every child ever started
        for pid in {self.proc.pid, *map(int, children)}:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _group_alive(pgid: int) -> bool:
    """Some process of the group still runs (a killed one not yet reaped — a zombie — does not count)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def test_a_killed_worker_and_web_are_restarted_while_the_others_keep_running(stack_env, flights):
    from tasks import jobs
    from webapp.tables.models import Run

    sup = Supervisor(stack_env, warm=False)
    try:
        sup.wait_log(r"worker started \(pid \d+\)")
        sup.wait_healthy()
        [worker] = sup.pids("worker")
        os.killpg(worker, signal.SIGKILL)     # the worker, its pool child and anything they started
        sup.wait_log(r"worker exited with -9; restarting")
        assert sup.healthz()["status"] == "ok", "the web server went down with the worker"
        wait_until(lambda: len(sup.pids("worker")) == 2, 30, "the worker to be restarted")
        table = register(flights)
        run = Run.objects.create(table=table, kind="metrics", state="queued")
        jobs.BY_KIND["metrics"].apply_async(args=[run.pk], queue=sup.queue)
        assert wait_final(run.pk, 180).state == "succeeded"

        [web] = sup.pids("web")
        os.killpg(web, signal.SIGKILL)
        sup.wait_log(r"web exited with -9; restarting")
        wait_until(lambda: len(sup.pids("web")) == 2, 30, "the web server to be restarted")
        sup.wait_healthy()
        assert sup.proc.poll() is None and _group_alive(sup.pids("worker")[-1]) and _group_alive(sup.pids("beat")[0])
        assert sup.terminate() == 0
        assert not port_open("127.0.0.1", sup.port)
    finally:
        sup.kill_all()


def test_sigterm_mid_compaction_lets_the_run_finish_then_stops(stack_env, flights):
    from tasks import jobs
    from webapp.tables.models import Run

    sup = Supervisor(stack_env, warm=True)
    try:
        sup.wait_log(r"warm SparkSession ready", timeout_s=300)
        table = register(flights)
        before = rows_by_key(hudi_read(Path(flights), "snapshot"))
        run = Run.objects.create(table=table, kind="schedule_execute", state="queued", threshold=T)
        jobs.BY_KIND["schedule_execute"].apply_async(args=[run.pk], queue=sup.queue)
        wait_until(lambda: Run.objects.get(pk=run.pk).instant != "", 180, "the compaction to be planned")
        assert Run.objects.get(pk=run.pk).state == "running"
        [worker] = sup.pids("worker")
        os.kill(sup.proc.pid, signal.SIGTERM)
        assert sup.proc.wait(timeout=300) == 0
        done = Run.objects.get(pk=run.pk)
        assert done.state == "succeeded", (done.state, done.error)
        assert not _group_alive(worker), "the worker's pool child or JVM outlived the supervisor"
        pending = [c.instant for c in Table.open(str(flights)).compactions() if c.state != "completed"]
        assert pending == [], f"a compaction left pending: {pending}"
        assert rows_by_key(hudi_read(Path(flights), "snapshot")) == before
    finally:
        sup.kill_all()


QUEUED_TIMEOUT_S, SWEEP_S = 6, 2


def test_a_stopped_worker_does_not_stop_the_sweep(stack_env, flights):
    from tasks import jobs
    from webapp.tables import inputs, services
    from webapp.tables.models import Run

    sup = Supervisor(stack_env, warm=False, extra_env={"TIDEMARK_QUEUED_TIMEOUT": str(QUEUED_TIMEOUT_S),
                                                       "TIDEMARK_SWEEP_SECONDS": str(SWEEP_S)})
    worker = 0
    try:
        for name in ("worker", "sampler", "beat"):
            sup.wait_log(rf"{name} started \(pid \d+\)")
        [worker] = sup.pids("worker")
        os.killpg(worker, signal.SIGSTOP)     # stopped, not dead: its lease and its queue look alive
        table = register(flights)
        run = Run.objects.create(table=table, kind="schedule_execute", state="queued", threshold=T)
        jobs.BY_KIND["schedule_execute"].apply_async(args=[run.pk], queue=sup.queue)
        wait_until(lambda: Run.objects.get(pk=run.pk).state != "queued", QUEUED_TIMEOUT_S + SWEEP_S + 20,
                   "the sweep to fail the queued run")
        swept = Run.objects.get(pk=run.pk)
        assert swept.state == "failed" and f"queued for more than {QUEUED_TIMEOUT_S} s" in swept.error
        waited = (swept.finished_at - swept.queued_at).total_seconds()
        assert waited <= QUEUED_TIMEOUT_S + SWEEP_S + 3, f"swept after {waited:.1f} s"   # + beat's tick
        args = inputs.TriggerArgs(threshold=T)
        again = services.trigger_compaction(table, None, args)   # no 409: the table takes a new trigger
        assert again.state == "queued"
    finally:
        if worker:
            os.killpg(worker, signal.SIGCONT)
        sup.kill_all()
