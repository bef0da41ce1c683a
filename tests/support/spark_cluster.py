"""A Spark standalone cluster on this machine for tests and benchmarks, from pyspark's own jars.

`standalone_cluster()` starts 1 master + N workers (`<pyspark>/bin/spark-class
org.apache.spark.deploy.master.Master` / `...deploy.worker.Worker`) on 127.0.0.1 with every port chosen by
the daemons themselves (port 0; the master's URL is read from its log), so parallel test processes never
collide, and stops them (and their executors) on exit.

`bare_executor_python()` is the executors' interpreter that proves the engine is shipped by the driver: a
venv whose one `.pth` line adds the test venv's site-packages as a plain path. Python then finds pyarrow,
fastavro, numpy, pandas and pyspark there, but never processes the `.pth` files inside it — so the
editable install of Tidemark (a `.pth` finder hook) is invisible and `import engine` fails.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = re.compile(r"Registering worker ")
START_TIMEOUT_S = 90


@dataclass
class Cluster:
    url: str
    workers: int
    root: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    def env(self, executor_python: Path | None = None) -> dict[str, str]:
        """Environment for a driver process (CLI or script) that runs its Spark jobs on this cluster."""
        env = dict(os.environ, SPARK_MASTER=self.url, SPARK_LOCAL_IP="127.0.0.1", TIDEMARK_EXECUTOR_MEMORY="512m",
                   TIDEMARK_DRIVER_MEMORY="1g")
        if executor_python is not None:
            env["PYSPARK_PYTHON"] = str(executor_python)
        return env


def _daemon_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_", "PYTHONPATH"))}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(root / "logs"),
               SPARK_DAEMON_MEMORY="256m", SPARK_NO_DAEMONIZE="1")
    return env


def _start(root: Path, name: str, args: list[str]) -> tuple[subprocess.Popen, Path]:
    log = root / f"{name}.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=_daemon_env(root), cwd=root, start_new_session=True)
    return proc, log


def _wait_for(log: Path, pattern: re.Pattern[str], count: int, proc: subprocess.Popen, what: str) -> list[str]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        text = log.read_text(errors="replace")
        found = pattern.findall(text)
        if len(found) >= count:
            return found
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up (exit {proc.poll()}); last log lines:\n"
                               + "\n".join(text.splitlines()[-20:]))
        time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    """The daemon and everything it launched (a worker's executors share its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """1 master + `workers` workers (each `cores` cores, `memory` for executors), all registered on return."""
    root.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(url="", workers=workers, root=root)
    try:
        master, master_log = _start(root, "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", "0",
                                                     "--webui-port", "0"])
        cluster.processes.append(master)
        cluster.url = _wait_for(master_log, _MASTER_URL, 1, master, "the Spark master")[0]
        for i in range(workers):
            work = root / f"worker-{i}"
            work.mkdir(exist_ok=True)
            proc, _ = _start(root, f"worker-{i}", [WORKER_CLASS, "--host", "127.0.0.1", "--port", "0",
                                                   "--webui-port", "0", "--cores", str(cores), "--memory", memory,
                                                   "--work-dir", str(work), cluster.url])
            cluster.processes.append(proc)
        _wait_for(master_log, _REGISTERED, workers, master, f"{workers} Spark workers")
        yield cluster
    finally:
        for proc in reversed(cluster.processes):
            _stop(proc)


def bare_executor_python(root: Path) -> Path:
    """A Python with the engine's runtime dependencies but without Tidemark (see the module doc)."""
    venv = root / "executor-venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        Path(site, "tidemark-runtime-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin" / "python"


def imports_engine(python: Path, cwd: Path) -> bool:
    """Whether `python` (run in `cwd`, with no PYTHONPATH) can import Tidemark's engine."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(python), "-c", "import engine"], cwd=cwd, env=env, capture_output=True).returncode == 0
