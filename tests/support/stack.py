"""The control-plane stack for tests: a file-backed database, a live Django server, a real Celery worker.

Registered as a pytest plugin (`pytest_plugins` in tests/conftest.py, which every test folder shares). The
session fixture `stack` is parametrised over the two deployments the product supports:
- "sqlite": a SQLite file under the session's state folder + kombu's filesystem broker;
- "postgresql": a fresh PostgreSQL database per session (127.0.0.1:5432, user postgres) + Redis
  (127.0.0.1:6379) with a queue name of its own, so parallel sessions never take each other's tasks.
PostgreSQL and Redis are started with the system's service scripts when they are not already up.

The test process, the server and the worker share the one database (migrated once per session), so a
test can create rows with the ORM, act through HTTP or `dispatch`, and watch the worker's effects. pytest
groups tests by the backend parameter, and the in-process Django is pointed at each backend in turn.
"""
from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
BACKENDS = ("sqlite", "postgresql")


# ------------------------------------------------------------------------------------------ services

def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _wait_port(host: str, port: int, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not port_open(host, port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} is not listening on {host}:{port} after {timeout_s:.0f} s")
        time.sleep(0.2)


def ensure_postgres() -> None:
    """PostgreSQL on 127.0.0.1:5432 (trust auth): started with the service script when it is down."""
    if not port_open("127.0.0.1", 5432):
        subprocess.run(["service", "postgresql", "start"], check=False, capture_output=True)
        _wait_port("127.0.0.1", 5432, "PostgreSQL")


def ensure_redis() -> None:
    if not port_open(REDIS_HOST, REDIS_PORT):
        subprocess.run(["redis-server", "--port", str(REDIS_PORT), "--bind", REDIS_HOST, "--daemonize", "yes"],
                       check=True, capture_output=True)
        _wait_port(REDIS_HOST, REDIS_PORT, "Redis")


def create_pg_database(name: str) -> str:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def drop_pg_database(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------ the stack

@dataclass
class Stack:
    """One deployment under test: its environment, state folder and the processes serving it."""

    backend: str
    state: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    worker_queues: dict[str, str] = field(default_factory=dict)   # worker name -> the queue it consumes
    url: str = ""

    @property
    def table_root(self) -> Path:
        return self.state / "tables"

    def running(self, name: str) -> bool:
        proc = self.processes.get(name)
        return proc is not None and proc.poll() is None

    def spawn(self, name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start a process of the stack in its own process group, its output in `<state>/<name>.log`. One of the
        same name still running is stopped first: two workers on one broker would share its messages, and the
        old one keeps the environment it was started with."""
        self.stop(name)
        log = self.state / f"{name}.log"
        self.logs[name] = log
        env = {**os.environ, **self.env, **(extra_env or {})}
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.processes[name] = proc
        return proc

    def log_text(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace") if name in self.logs else ""

    def wait_for_log(self, name: str, text: str, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.log_text(name):
            proc = self.processes[name]
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_text(name)[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not log {text!r} within {timeout_s:.0f} s:\n"
                                   f"{self.log_text(name)[-4000:]}")
            time.sleep(0.2)

    def start_worker(self, name: str = "worker", concurrency: int = 1, warm: bool = True,
                     extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        """A real `celery -A tasks worker`; returns once it is ready (and its Spark is warm, if asked). Any
        other worker of the session on the same queue is stopped first: two workers on one queue share its
        messages, and one started with another environment (no `TIDEMARK_ALERT_ALLOW_PRIVATE`, another lease
        TTL) would answer some of the test's tasks differently."""
        queue = (extra_env or {}).get("TIDEMARK_CELERY_QUEUE", self.env.get("TIDEMARK_CELERY_QUEUE", "tidemark"))
        for other, other_queue in list(self.worker_queues.items()):
            if other != name and other_queue == queue:
                self.stop(other)
        argv = [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--loglevel", "INFO",
                "--concurrency", str(concurrency), "--pool", "prefork", "--without-gossip", "--without-mingle",
                "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h"]
        env = {"TIDEMARK_WARM_SPARK": "1" if warm else "0", **(extra_env or {})}
        proc = self.spawn(name, argv, env)
        self.worker_queues[name] = queue
        self.wait_for_log(name, "ready.")
        if warm:
            self.wait_for_log(name, "warm SparkSession ready", timeout_s=180)
        return proc

    def start_server(self) -> str:
        port = free_port()
        # no --insecure: the static files come from the app (WhiteNoise), as under gunicorn
        self.spawn("web", [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"])
        _wait_port("127.0.0.1", port, "the Django server", timeout_s=60)
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal a stack process and everything it started (pool children, Spark's JVM)."""
        proc = self.processes.pop(name)
        self.worker_queues.pop(name, None)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)

    def stop(self, name: str) -> None:
        proc = self.processes.get(name)
        if proc is None:
            return
        try:
            os.kill(proc.pid, signal.SIGTERM)  # the main process shuts its children down (warm shutdown)
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        self.processes.pop(name, None)
        self.worker_queues.pop(name, None)

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return resp.read()


def session_opener(base: str, username: str, password: str) -> urllib.request.OpenerDirector:
    """Logged in through the login form, as a browser would (session cookie + CSRF)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/accounts/login/").read().decode()
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, "the login page has no CSRF token"
    form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": found.group(1)})
    opener.open(urllib.request.Request(base + "/accounts/login/", form.encode(), headers={"Referer": base + "/"}))
    return opener


def backend_env(backend: str, state: Path) -> tuple[dict[str, str], str | None]:
    """Environment of a stack on `backend`; also the PostgreSQL database to drop afterwards."""
    queue = f"tidemark-test-{uuid.uuid4().hex[:8]}"
    env = {
        "TIDEMARK_STATE_DIR": str(state),
        "TIDEMARK_TABLE_ROOTS": str(state / "tables"),
        "TIDEMARK_CELERY_QUEUE": queue,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "TIDEMARK_CACHE": os.environ.get("TIDEMARK_CACHE", str(Path.home() / ".cache" / "tidemark")),
    }
    if backend == "sqlite":
        env["DATABASE_URL"] = f"sqlite:///{state / 'tidemark.sqlite3'}"
        env["CELERY_BROKER_URL"] = "filesystem://"
        return env, None
    if backend == "postgresql":
        ensure_postgres()
        ensure_redis()
        name = f"tidemark_test_{uuid.uuid4().hex[:10]}"
        env["DATABASE_URL"] = create_pg_database(name)
        env["CELERY_BROKER_URL"] = f"redis://{REDIS_HOST}:{REDIS_PORT}/0"
        return env, name
    raise ValueError(f"unknown stack backend {backend!r}; known: {', '.join(BACKENDS)}")


# ------------------------------------------------------------------------------------------ in-process Django

def activate(env: dict[str, str]) -> None:
    """Point this process's Django (database) and Celery app (broker) at a stack's environment.

    Settings are evaluated once per process, so a later stack (the other backend) swaps the database
    connections and the broker connection pool in place.
    """
    os.environ.update(env)
    import django
    from django.conf import settings

    if not settings.configured or not _apps_ready():
        django.setup()
        _reset_celery(settings)
        return
    _reload_settings(settings)
    _reset_database_connections()
    _reset_celery(settings)


def _apps_ready() -> bool:
    from django.apps import apps

    return apps.ready


def _reload_settings(settings) -> None:
    """Re-evaluate webapp/settings.py under the new environment and copy the values over."""
    import importlib

    import webapp.settings as module

    test_hosts = [h for h in settings.ALLOWED_HOSTS if h == "testserver"]   # Django's test client's host
    module = importlib.reload(module)
    for name in dir(module):
        if name.isupper():
            setattr(settings, name, getattr(module, name))
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, *test_hosts]


def _reset_database_connections() -> None:
    from asgiref.local import Local
    from django.db import connections

    connections.close_all()
    connections.__dict__.pop("settings", None)
    connections._settings = None
    connections._connections = Local(connections.thread_critical)


def _reset_celery(settings) -> None:
    from tasks import app

    app.conf.update({key[len("CELERY_"):].lower(): getattr(settings, key) for key in dir(settings)
                     if key.startswith("CELERY_")})
    app._after_fork()  # drops the broker connection and producer pools (as Celery does after a fork)


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


@pytest.fixture(scope="session", params=BACKENDS)
def stack_env(request, tmp_path_factory) -> Iterator[Stack]:
    """The backend's database (migrated) and broker, with this process's Django pointed at them."""
    backend = request.param
    state = tmp_path_factory.mktemp(f"stack-{backend}")
    (state / "tables").mkdir()
    env, pg_database = backend_env(backend, state)
    blocker = _pytest_django_blocker(request)
    stack = Stack(backend, state, env)
    try:
        with blocker:
            activate(env)
            migrate()
            yield stack
    finally:
        stack.stop_all()
        from django.db import connections

        connections.close_all()
        if pg_database:
            drop_pg_database(pg_database)


@pytest.fixture
def stack(stack_env: Stack) -> Stack:
    """`stack_env` plus a live Django server and one warm Celery worker: started by the first test that asks,
    kept for the session, and started again when a test before stopped them (a test that runs the stack with an
    environment of its own stops them, so no process of the session serves it with the old environment)."""
    if not stack_env.running("web"):
        stack_env.start_server()
    if not stack_env.running("worker"):
        stack_env.start_worker()
    return stack_env


@pytest.fixture(autouse=True)
def _stack_rows_cleared(request) -> Iterator[None]:
    """After a test on a live stack, delete the rows it committed (tables with their runs, samples, leases and
    audit, users). The in-process Django stays pointed at the stack's database for the rest of this worker
    process, so a later unit test (`db`, rolled back per test) would otherwise see them."""
    yield
    if "stack_env" not in request.fixturenames:
        return
    from django.contrib.auth import get_user_model

    from webapp.alerts.models import AlertChannel
    from webapp.tables.models import AuditEvent, RegisteredTable

    AlertChannel.objects.all().delete()   # with their deliveries: a later page test expects none
    AuditEvent.objects.all().delete()
    RegisteredTable.objects.all().delete()
    get_user_model().objects.all().delete()


def _pytest_django_blocker(request):
    """pytest-django (when configured) blocks DB access outside its fixtures; the stack's DB is ours."""
    import contextlib

    try:
        blocker = request.getfixturevalue("django_db_blocker")
    except pytest.FixtureLookupError:
        return contextlib.nullcontext()
    return blocker.unblock() if blocker is not None else contextlib.nullcontext()
