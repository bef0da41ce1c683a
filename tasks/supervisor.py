"""Run the whole control plane in one terminal: web server, Celery worker and Celery beat.

`python -m tasks.supervisor` (what `make run` ends with) starts the three processes, prints the URL,
and stops all of them when any one exits or on Ctrl-C / SIGTERM — so a crashed worker never leaves a
dashboard that accepts clicks nobody will execute.

It also runs a Hive metastore (tasks.metastore: pyspark's jars on Derby in `$TIDEMARK_STATE_DIR/metastore`)
that tables with catalog sync enabled (the demo table) register `<name>_ro` / `<name>_rt` in: its URI is
given to web, worker and beat as `TIDEMARK_HIVE_METASTORE_URIS`, and it stops with them.

Environment: `TIDEMARK_BIND` (default 0.0.0.0:8000), `TIDEMARK_WORKER_CONCURRENCY` (default 1: one warm
SparkSession per pool process, and Spark itself uses every core), `TIDEMARK_WEB` = "gunicorn" to serve
with gunicorn instead of Django's development server; `TIDEMARK_METASTORE_PORT` (default 9083, or a free
port when 9083 is taken); no embedded metastore when `TIDEMARK_HIVE_METASTORE_URIS` names one already or
`TIDEMARK_EMBEDDED_METASTORE=0`.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tasks import metastore

ROOT = Path(__file__).resolve().parents[1]


def commands(bind: str) -> dict[str, list[str]]:
    py = sys.executable
    if os.environ.get("TIDEMARK_WEB") == "gunicorn":
        web = [py, "-m", "gunicorn", "webapp.wsgi", "--bind", bind, "--workers", "2", "--threads", "4"]
    else:
        web = [py, "manage.py", "runserver", bind, "--noreload", "--insecure"]
    concurrency = os.environ.get("TIDEMARK_WORKER_CONCURRENCY", "1")
    state = os.environ.get("TIDEMARK_STATE_DIR", str(ROOT / "state"))
    return {
        "web": web,
        "worker": [py, "-m", "celery", "-A", "tasks", "worker", "--loglevel", "INFO", "--concurrency",
                   concurrency, "--without-gossip", "--without-mingle"],
        "beat": [py, "-m", "celery", "-A", "tasks", "beat", "--loglevel", "INFO",
                 "--schedule", os.path.join(state, "celerybeat-schedule")],
    }


def start(argv: list[str], cwd: Path = ROOT, log: Path | None = None) -> subprocess.Popen:
    # Own process group: stopping a process also stops its children (pool processes, Spark's JVM).
    if log is None:
        return subprocess.Popen(argv, cwd=cwd, start_new_session=True)
    with open(log, "ab") as out:
        return subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def metastore_port() -> int:
    wanted = int(os.environ.get("TIDEMARK_METASTORE_PORT", "9083"))
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", wanted))
            return wanted
        except OSError:
            if "TIDEMARK_METASTORE_PORT" in os.environ:
                raise SystemExit(f"TIDEMARK_METASTORE_PORT={wanted} is taken") from None
    return metastore.free_port()


def embedded_metastore() -> tuple[list[str], Path, str] | None:
    """(command, folder, thrift URI) of the metastore to run, or None when one is configured elsewhere."""
    if os.environ.get("TIDEMARK_HIVE_METASTORE_URIS") or os.environ.get("TIDEMARK_EMBEDDED_METASTORE") == "0":
        return None
    state = Path(os.environ.get("TIDEMARK_STATE_DIR", str(ROOT / "state")))
    folder = (state / "metastore").resolve()
    metastore.write_hive_site(folder)
    port = metastore_port()
    return metastore.command(folder, port), folder, f"thrift://127.0.0.1:{port}"


def stop(procs: dict[str, subprocess.Popen], grace_s: float = 20) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            print(f"{name} did not stop in {grace_s:.0f} s; killing it", file=sys.stderr)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    bind = os.environ.get("TIDEMARK_BIND", "0.0.0.0:8000")
    procs: dict[str, subprocess.Popen] = {}
    hms = embedded_metastore()
    if hms is not None:
        argv, folder, uri = hms
        procs["metastore"] = start(argv, cwd=folder, log=folder / "metastore.log")
        os.environ["TIDEMARK_HIVE_METASTORE_URIS"] = uri   # inherited by web, worker and beat
        print(f"Hive metastore: {uri} (Derby in {folder}; log metastore.log)", flush=True)
    procs.update({name: start(argv) for name, argv in commands(bind).items()})
    host, port = bind.rsplit(":", 1)
    print(f"\nTidemark control plane: http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}/  "
          "(web, worker and beat running; Ctrl-C stops all three)\n", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # docker stop / kill: same clean shutdown as Ctrl-C
    exit_code = 0
    try:
        while True:
            ended = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
            if ended:
                print(f"stopping: {', '.join(f'{n} exited with {rc}' for n, rc in ended.items())}", file=sys.stderr)
                exit_code = 1
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        print(f"\nstopping {', '.join(procs)} ...", file=sys.stderr)
    finally:
        stop(procs)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
