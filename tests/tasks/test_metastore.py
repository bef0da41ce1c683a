"""`python -m tasks.metastore`: a TERM stops the metastore's JVM with it, so the port is free again."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from tasks.metastore import free_port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_term_stops_the_jvm_too(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tasks.metastore", str(tmp_path / "ms"), str(port)],
                            stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("metastore: thrift://")
        assert _listening(port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        deadline = time.monotonic() + 30
        while _listening(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _listening(port), "the metastore's JVM outlived its process"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_wildcard_bind_needs_no_jdk_and_one_address_the_launcher(tmp_path, monkeypatch):
    """Every interface (a compose container others reach by name) is Hive's own main on a JRE; one address is
    the loopback launcher, compiled with the JDK's javac."""
    from tasks import metastore

    monkeypatch.setattr(metastore.shutil, "which", lambda name: None)   # a JRE only, as in the image
    wide = metastore.command(tmp_path, 9083, "0.0.0.0")
    assert metastore.HIVE_MAIN in wide and wide[-2:] == ["-p", "9083"]
    try:
        metastore.command(tmp_path, 9083, "127.0.0.1")
    except RuntimeError as exc:
        assert "javac" in str(exc) and "TIDEMARK_EMBEDDED_METASTORE=0" in str(exc)
    else:
        raise AssertionError("a loopback bind without javac must say what it needs")
