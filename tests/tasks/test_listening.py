"""`make run` listens on the loopback only: the supervisor started as the Makefile starts it (no TIDEMARK_BIND
host, the embedded metastore, a warm Spark session) has every listening socket of its process tree — gunicorn,
the Hive metastore's Thrift port, Spark's driver, Py4J — on 127.0.0.1 or ::1. A wider address is a choice the
supervisor warns about (tasks.supervisor.warn_if_exposed)."""
from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tasks import supervisor
from tests.support.runs import wait_until
from tests.support.stack import REPO, free_port, port_open

LISTEN = "0A"   # TCP_LISTEN in /proc/net/tcp's st column


def _listening_inodes() -> dict[str, str]:
    """socket inode -> "address:port" of every listening TCP socket of this machine."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != LISTEN:
                continue
            hex_addr, hex_port = fields[1].split(":")
            found[fields[9]] = f"{_address(hex_addr)}:{int(hex_port, 16)}"
    return found


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    # /proc prints each 32-bit word in host (little-endian) order; an IPv4 address an IPv6 socket serves
    # (::ffff:127.0.0.1, as Java binds) is shown as the IPv4 address it is
    address = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
    return str(getattr(address, "ipv4_mapped", None) or address)


def _tree(root: int) -> set[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def _sockets_of(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    listening = _listening_inodes()
    return {listening[i] for i in inodes if i in listening}


def test_make_run_listens_on_the_loopback_only(stack_env):
    web, hms = free_port(), free_port()
    log = stack_env.state / "supervisor-listening.log"
    env = {**os.environ, **stack_env.env, "TIDEMARK_BIND": str(web), "TIDEMARK_METASTORE_PORT": str(hms),
           "TIDEMARK_CELERY_QUEUE": f"listen-{web}", "PYTHONUNBUFFERED": "1", "TIDEMARK_WEB_WORKERS": "1",
           "TIDEMARK_WEB_THREADS": "2"}
    for wider in ("TIDEMARK_METASTORE_HOST", "TIDEMARK_HIVE_METASTORE_URIS", "TIDEMARK_EMBEDDED_METASTORE"):
        env.pop(wider, None)
    proc = subprocess.Popen([sys.executable, "-m", "tasks.supervisor"], cwd=REPO, env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: port_open("127.0.0.1", web) and port_open("127.0.0.1", hms) or proc.poll() is not None, 180,
                   "the web server and the metastore to listen")
        assert proc.poll() is None, log.read_text()[-3000:]
        wait_until(lambda: "warm SparkSession ready" in log.read_text() or proc.poll() is not None, 240,
                   "the worker's warm Spark session")
        time.sleep(2)   # Spark's Python workers (started by the warm-up) open theirs
        sockets = _sockets_of(_tree(proc.pid))
        assert f"127.0.0.1:{web}" in sockets and f"127.0.0.1:{hms}" in sockets, sockets
        exposed = {s for s in sockets if not ipaddress.ip_address(s.rsplit(":", 1)[0]).is_loopback}
        assert not exposed, f"listening beyond the loopback: {sorted(exposed)}"
        assert "listens on" not in log.read_text(), "a wider-address warning for the default addresses"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=240)


def test_a_wider_address_is_allowed_and_warned_about(capsys, monkeypatch):
    monkeypatch.setenv("TIDEMARK_BIND", "0.0.0.0:8000")
    assert supervisor.web_bind() == "0.0.0.0:8000"
    supervisor.warn_if_exposed(supervisor.web_bind(), "0.0.0.0")
    err = capsys.readouterr().err
    assert "WARNING: the web server listens on 0.0.0.0:8000 (TIDEMARK_BIND)" in err
    assert "WARNING: the embedded Hive metastore listens on 0.0.0.0 (TIDEMARK_METASTORE_HOST)" in err
    monkeypatch.setenv("TIDEMARK_BIND", "8123")
    assert supervisor.web_bind() == "127.0.0.1:8123"
    monkeypatch.delenv("TIDEMARK_BIND")
    assert supervisor.web_bind() == "127.0.0.1:8000"


def test_a_root_supervisor_says_so_once_and_its_workers_do_not(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    supervisor.warn_if_root()
    assert "WARNING: running as root" in capsys.readouterr().err
    worker = supervisor.child_env("worker")
    assert worker is not None and supervisor.CELERY_ROOT_WARNING in worker["PYTHONWARNINGS"]
    probe = ("import warnings; from celery.exceptions import SecurityWarning; "
             "warnings.warn(SecurityWarning(\"You're running the worker with superuser privileges: this is\"))")
    out = subprocess.run([sys.executable, "-c", probe], env=worker, capture_output=True, text=True)
    assert out.returncode == 0 and "superuser" not in out.stderr
    assert supervisor.child_env("sampler")["TIDEMARK_WARM_SPARK"] == "0"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert supervisor.child_env("worker") is None and supervisor.child_env("web") is None
