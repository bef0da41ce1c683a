"""Run the whole control plane in one terminal: web server (gunicorn), Celery workers (runs; samples) and
Celery beat, supervised.

`python -m tasks.supervisor` (what `make run` ends with) starts the four processes (web, worker, sampler, beat)
and prints the URL. The sampler is a second Celery worker on the sampling queue only (webapp.queues), with
no warm Spark, so change checks and samples never wait behind a compaction (`TIDEMARK_SAMPLER_CONCURRENCY`,
default 1).

- A process that dies is restarted after a backoff (1 s, doubling up to `TIDEMARK_RESTART_MAX_S`, reset once
  it has stayed up a minute); the others keep running, so a crashed worker never takes the dashboard
  down with it, and the dashboard never stays up without a worker for long.
- Ctrl-C / SIGTERM stops gracefully: beat first (no new automatic runs), then the sampler, then the worker gets one SIGTERM
  on its main process only — Celery's warm shutdown: it takes no new runs and waits for the running ones —
  for up to `TIDEMARK_STOP_GRACE_S`; only then is its process group (pool children, Spark's JVM) killed.
  The pool children stop their JVMs themselves after their runs. The web server stops last.

The web server is gunicorn with a bounded number of workers × threads (`TIDEMARK_WEB_WORKERS`, default 2,
`TIDEMARK_WEB_THREADS`, default 4): each thread holds at most one database connection, so the web side
holds at most workers × threads connections (docs/ARCHITECTURE.md, "Database connections").

It also runs a Hive metastore (tasks.metastore: pyspark's jars on Derby in `$TIDEMARK_STATE_DIR/metastore`)
that tables with catalog sync enabled (the demo table) register `<name>_ro` / `<name>_rt` in: its URI is
given to web, the workers and beat as `TIDEMARK_HIVE_METASTORE_URIS`; it is supervised like them and stops last.

Environment: `TIDEMARK_BIND` (default 127.0.0.1:8000: this host only; a wider address is warned about),
`TIDEMARK_WORKER_CONCURRENCY` (default 1: one warm SparkSession per pool process, and Spark itself uses every
core); `TIDEMARK_METASTORE_PORT` (default 9083, or a free port when 9083 is taken) and `TIDEMARK_METASTORE_HOST`
(default 127.0.0.1); no embedded metastore when `TIDEMARK_HIVE_METASTORE_URIS` names one already or
`TIDEMARK_EMBEDDED_METASTORE=0`.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine import ConfigError, env
from tasks import metastore

ROOT = Path(__file__).resolve().parents[1]
# No new automatic runs, let running ones finish, then the UI, then the catalog they sync to.
STOP_ORDER = ("beat", "sampler", "worker", "web", "metastore")
HEALTHY_AFTER_S = 60.0                     # up this long: the next crash starts the backoff afresh


def commands(bind: str) -> dict[str, list[str]]:
    py = sys.executable
    web = [py, "-m", "gunicorn", "webapp.wsgi", "--bind", bind,
           "--workers", str(env.whole("TIDEMARK_WEB_WORKERS", 2)),
           "--threads", str(env.whole("TIDEMARK_WEB_THREADS", 4)),
           "--graceful-timeout", "10", "--access-logfile", "-"]
    concurrency = str(env.whole("TIDEMARK_WORKER_CONCURRENCY", 1))
    state = env.text("TIDEMARK_STATE_DIR", str(ROOT / "state"))
    # the names webapp.queues gives the two queues (computed here without loading Django)
    runs_queue = env.text("TIDEMARK_CELERY_QUEUE", "tidemark")
    sampling_queue = env.text("TIDEMARK_SAMPLING_QUEUE", f"{runs_queue}-sampling")
    return {
        "web": web,
        "worker": [py, "-m", "celery", "-A", "tasks", "worker", "--loglevel", "INFO", "--concurrency",
                   concurrency, "--without-gossip", "--without-mingle", "-Q", runs_queue, "-n", "worker@%h"],
        # change checks and samples on their own worker (no Spark), never behind a compaction (webapp.queues)
        "sampler": [py, "-m", "celery", "-A", "tasks", "worker", "--loglevel", "INFO", "--concurrency",
                    str(env.whole("TIDEMARK_SAMPLER_CONCURRENCY", 1)), "--without-gossip", "--without-mingle",
                    "-Q", sampling_queue, "-n", "sampler@%h"],
        "beat": [py, "-m", "celery", "-A", "tasks", "beat", "--loglevel", "INFO",
                 "--schedule", os.path.join(state, "celerybeat-schedule")],
    }


def metastore_port() -> int:
    wanted = env.whole("TIDEMARK_METASTORE_PORT", 9083)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", wanted))
            return wanted
        except OSError:
            if "TIDEMARK_METASTORE_PORT" in os.environ:
                raise SystemExit(f"TIDEMARK_METASTORE_PORT={wanted} is taken") from None
    return metastore.free_port()


def embedded_metastore_wanted() -> bool:
    return not env.text("TIDEMARK_HIVE_METASTORE_URIS") and env.flag("TIDEMARK_EMBEDDED_METASTORE", True)


def embedded_metastore() -> tuple[list[str], Path, str] | None:
    """(command, folder, thrift URI) of the metastore to run, or None when one is configured elsewhere."""
    if not embedded_metastore_wanted():
        return None
    state = Path(env.text("TIDEMARK_STATE_DIR", str(ROOT / "state")))
    folder = (state / "metastore").resolve()
    metastore.write_hive_site(folder)
    port = metastore_port()
    return metastore.command(folder, port), folder, f"thrift://127.0.0.1:{port}"


def log(message: str) -> None:
    print(f"supervisor: {message}", file=sys.stderr, flush=True)


@dataclass
class Child:
    """One supervised process and its restart state."""

    name: str
    argv: list[str]
    cwd: Path = ROOT
    log_file: Path | None = None     # None: the supervisor's own terminal
    env: dict[str, str] | None = None  # None: the supervisor's own environment
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff_s: float = 1.0
    restart_at: float | None = None
    restarts: int = 0
    history: list[int] = field(default_factory=list)   # exit codes, newest last

    def start(self) -> None:
        # Own process group: Ctrl-C in the terminal reaches only the supervisor, which stops each child in
        # order; a final kill of the group also reaches its children (pool processes, Spark's JVM).
        if self.log_file is None:
            self.proc = subprocess.Popen(self.argv, cwd=self.cwd, start_new_session=True, env=self.env)
        else:
            with open(self.log_file, "ab") as out:
                self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT,
                                             start_new_session=True, env=self.env)
        self.started_at = time.monotonic()
        self.restart_at = None
        log(f"{self.name} started (pid {self.proc.pid})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self, max_backoff_s: float) -> None:
        """Schedule a restart of a dead child after its backoff; start it once the backoff has passed."""
        now = time.monotonic()
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.restarts += 1
                self.start()
            return
        if self.proc is None or self.alive():
            return
        code = self.proc.returncode
        self.history.append(code)
        if now - self.started_at >= HEALTHY_AFTER_S:
            self.backoff_s = 1.0
        self.restart_at = now + self.backoff_s
        log(f"{self.name} exited with {code}; restarting in {self.backoff_s:g} s (the others keep running)")
        self.backoff_s = min(self.backoff_s * 2, max_backoff_s)

    def stop(self, grace_s: float) -> None:
        """SIGTERM to the main process only (it shuts its own children down), SIGKILL to the group after `grace_s`."""
        self.restart_at = None
        if not self.alive():
            return
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            log(f"{self.name} did not stop within {grace_s:g} s; killing it and its children")
        _kill_group(self.proc.pid)
        self.proc.wait()


def _kill_group(pgid: int) -> None:
    """Whatever is left in a child's process group (a pool process or JVM that outlived its parent)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


LOOPBACK = "127.0.0.1"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def web_bind() -> str:
    """gunicorn's address: `TIDEMARK_BIND` as host:port (or a port alone, on the loopback); 127.0.0.1:8000 by
    default, so a fresh `make run` is reachable from this host only."""
    bind = env.text("TIDEMARK_BIND", f"{LOOPBACK}:8000")
    return f"{LOOPBACK}:{bind}" if bind.isdigit() else bind


def warn_if_exposed(bind: str, metastore_host: str) -> None:
    """Listening beyond the loopback is allowed when asked for, and said out loud: the web asks for a login, but
    the embedded metastore's Thrift API asks for nothing."""
    web_host = bind.rsplit(":", 1)[0]
    if web_host not in LOOPBACK_HOSTS:
        log(f"WARNING: the web server listens on {bind} (TIDEMARK_BIND), beyond this host: put it behind TLS "
            "(DJANGO_BEHIND_TLS_PROXY, DJANGO_*_COOKIE_SECURE) and keep DJANGO_ALLOWED_HOSTS to your names")
    if metastore_host not in LOOPBACK_HOSTS and embedded_metastore_wanted():
        log(f"WARNING: the embedded Hive metastore listens on {metastore_host} (TIDEMARK_METASTORE_HOST): its Thrift "
            "API has no authentication; anyone who reaches it can change or drop the catalog's tables")


# Celery's own warning when a worker runs as root: ten lines per worker at every (re)start. The supervisor says it
# once instead (`warn_if_root`) and its children leave it out.
CELERY_ROOT_WARNING = "ignore:You're running the worker with superuser privileges"


def child_env(name: str) -> dict[str, str] | None:
    """A child's environment: the supervisor's own (None), but the sampling worker needs no Spark
    (webapp.queues), and as root Celery's root warning is said once by the supervisor, not by each worker."""
    if name not in ("worker", "sampler", "beat") or (os.geteuid() != 0 and name != "sampler"):
        return None
    extra = {"TIDEMARK_WARM_SPARK": "0"} if name == "sampler" else {}
    if os.geteuid() == 0:
        given = os.environ.get("PYTHONWARNINGS", "")
        extra["PYTHONWARNINGS"] = f"{given},{CELERY_ROOT_WARNING}" if given else CELERY_ROOT_WARNING
    return {**os.environ, **extra}


def warn_if_root() -> None:
    if os.geteuid() == 0:
        log("WARNING: running as root, so are the workers: run `make run` as an ordinary user where you can")


class _Stop(Exception):
    pass


def _interrupt(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def main() -> int:
    bind = web_bind()
    warn_if_exposed(bind, metastore.host())
    warn_if_root()
    grace_s = env.number("TIDEMARK_STOP_GRACE_S", 600.0, unit="seconds")
    max_backoff_s = env.number("TIDEMARK_RESTART_MAX_S", 30.0, unit="seconds")
    children: dict[str, Child] = {}
    hms = embedded_metastore()
    if hms is not None:
        argv, folder, uri = hms
        children["metastore"] = Child("metastore", argv, cwd=folder, log_file=folder / "metastore.log")
        os.environ["TIDEMARK_HIVE_METASTORE_URIS"] = uri   # inherited by web, the workers and beat
        print(f"Hive metastore: {uri} (Derby in {folder}; log metastore.log)", flush=True)
    # the sampling worker needs no Spark (webapp.queues)
    children.update({name: Child(name, argv, env=child_env(name)) for name, argv in commands(bind).items()})
    signal.signal(signal.SIGTERM, _interrupt)  # docker stop / kill: the same graceful stop as Ctrl-C
    signal.signal(signal.SIGINT, _interrupt)
    try:
        for child in children.values():
            child.start()
        host, port = bind.rsplit(":", 1)
        print(f"\nTidemark control plane: http://{LOOPBACK if host in ('0.0.0.0', '[::]') else host}:{port}/  "
              "(web, worker, sampler and beat supervised; Ctrl-C stops them)\n", flush=True)
        while True:
            for child in children.values():
                child.check(max_backoff_s)
            time.sleep(0.5)
    except _Stop as stop:
        log(f"{stop}: stopping beat, then the worker (running runs get up to {grace_s:g} s), then web"
            + (" and the metastore" if "metastore" in children else ""))
    finally:
        # Signals during the stop must not cut it short: the worker may be finishing a compaction.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for name in STOP_ORDER:
            if name in children:
                children[name].stop(grace_s if name == "worker" else 30)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ConfigError as exc:   # a malformed setting: one line naming it, before anything started
        sys.exit(f"tidemark: {exc}")
