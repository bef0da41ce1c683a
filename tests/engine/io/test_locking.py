"""The table lock serialises critical sections across processes; committed files are never overwritten."""
from __future__ import annotations

import multiprocessing
import time

import pytest

from engine.io.locking import TableLocked, table_lock


def _hold(base: str, ready, release) -> None:
    with table_lock(base, "hold it"):
        ready.set()
        release.wait(10)


def test_second_holder_waits_then_gives_up_with_the_holder_named(tmp_path):
    (tmp_path / ".hoodie").mkdir()
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(tmp_path), ready, release))
    proc.start()
    try:
        assert ready.wait(10)
        started = time.monotonic()
        with pytest.raises(TableLocked, match=r"locked by pid \d+ \(hold it\).*waiting to write"):
            with table_lock(str(tmp_path), "write", timeout_s=0.3):
                pass
        assert time.monotonic() - started >= 0.3
    finally:
        release.set()
        proc.join(10)
    with table_lock(str(tmp_path), "write", timeout_s=1):  # free again once the holder is gone
        pass

