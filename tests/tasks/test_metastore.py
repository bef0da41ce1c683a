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
