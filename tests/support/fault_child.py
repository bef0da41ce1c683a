"""One operation on a table_model table, run in a child process with TIDEMARK_FAULT set (fault injection
and heartbeat tests): the child dies or fails at the named step, the parent inspects what it left behind.

    python -m tests.support.fault_child DRIVER PATH ARG
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine.compaction import run_compaction, schedule_compaction
from engine.io import faults
from engine.services.clean import run_clean
from engine.services.rollback import rollback
from tests.support.inline_spark import InlineSpark
from tests.support.table_model import LAST_WRITE, T, write

ROOT = Path(__file__).resolve().parents[2]


def child(driver: str, path: str, arg: str) -> None:
    if driver == "write":
        write(path, *LAST_WRITE)
    elif driver == "overwrite":
        write(path, "insert_overwrite_table", LAST_WRITE[1])
    elif driver == "schedule":
        schedule_compaction(path, threshold_ms=T, carry_over="symlink")
    elif driver == "execute":
        run_compaction(path, spark=InlineSpark())
    elif driver == "clean":
        run_clean(path, retain_commits=1)
    elif driver in ("rollback", "rollback_compaction"):
        rollback(path, arg)


def run_child(driver: str, path: str, arg: str, fault: str) -> subprocess.CompletedProcess:
    env = {**os.environ, faults.ENV: fault, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tests.support.fault_child", driver, path, arg], env=env,
                          capture_output=True, text=True, timeout=300)


if __name__ == "__main__":
    child(*sys.argv[1:4])
