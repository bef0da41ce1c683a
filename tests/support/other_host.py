"""Running work as another host would, inside one test process: its own flock folder (this host's flock cannot
see it) and its own thread (no lock of the test thread's operation in its context). The storage-lock tests use it
to race two "hosts" on one moto bucket."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest


def as_another_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, work: Callable[[], object]) -> None:
    """Run `work` as another host; an exception it raises is raised here."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failed.append(exc)

    mine = os.environ.get("TIDEMARK_LOCK_DIR")
    monkeypatch.setenv("TIDEMARK_LOCK_DIR", str(tmp_path / "other-host-locks"))
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        if mine is None:
            monkeypatch.delenv("TIDEMARK_LOCK_DIR")
        else:
            monkeypatch.setenv("TIDEMARK_LOCK_DIR", mine)
    if failed:
        raise failed[0]
