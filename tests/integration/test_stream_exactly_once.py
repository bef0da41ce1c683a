"""A streaming query through `writeStream.format("tidemark")`, killed mid-stream and restarted on its checkpoint:
every micro-batch is on the table exactly once, and hudi 0.5.0 reads exactly the source's rows.

The driver is a subprocess (tests/support/stream_driver.py): first SIGKILLed (with its JVM and Python workers)
once a few batches are committed; then restarted with a fault that kills the commit worker right after a
deltacommit completed and before Spark's commit log records the batch (Spark then runs that batch again); then
restarted cleanly until the source is drained.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import Table
from engine.timeline.instants import DELTACOMMIT, Timeline
from engine.timeline.stream_checkpoint import checkpoints
from tests.support.oracle import hudi_read
from tests.support.stream_tables import expected_rows, file_source, stream_table

ROOT = Path(__file__).resolve().parents[2]
FILES = 12


def _driver(source: Path, table: Path, checkpoint: Path, fault: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "TIDEMARK_FAULT"}
    if fault:
        env["TIDEMARK_FAULT"] = fault
    return subprocess.Popen([sys.executable, "-m", "tests.support.stream_driver", str(source), str(table),
                             str(checkpoint)], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _deltacommits(table: Path) -> int:
    return sum(1 for i in Timeline.load(str(table)).completed() if i.action == DELTACOMMIT)


def _kill_after(proc: subprocess.Popen[bytes], table: Path, commits: int, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while _deltacommits(table) < commits:
        assert proc.poll() is None, f"driver ended before {commits} commits: {proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "the stream did not commit in time"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("version", [6, 8])
def test_killed_and_restarted_stream_commits_each_batch_once(tmp_path: Path, version: int) -> None:
    table, checkpoint, source_dir = tmp_path / "events", tmp_path / "checkpoint", tmp_path / "source"
    stream_table(table, version)
    source = file_source(source_dir, FILES)

    _kill_after(_driver(source_dir, table, checkpoint), table, commits=3)
    killed_at = _deltacommits(table)
    assert 3 <= killed_at < FILES

    # The commit worker dies between our deltacommit and Spark's commit log: Spark runs that batch again.
    faulted = _driver(source_dir, table, checkpoint, fault="stream:committed")
    faulted.wait(timeout=120)
    assert _deltacommits(table) > killed_at
    on_table = max(cp.batch_id for cp in checkpoints(Timeline.load(str(table))))
    in_spark = max((int(n) for n in os.listdir(checkpoint / "commits") if n.isdigit()), default=-1)
    assert on_table > in_spark   # a batch on the table that Spark will run again

    clean = _driver(source_dir, table, checkpoint)
    assert clean.wait(timeout=120) == 0, clean.stderr.read().decode()[-2000:] if clean.stderr else ""

    timeline = Timeline.load(str(table))
    assert not timeline.pending()   # every killed write was rolled back by the next one
    batches = sorted(cp.batch_id for cp in checkpoints(timeline))
    assert batches == list(range(FILES))
    assert len({cp.query_id for cp in checkpoints(timeline)}) == 1   # one query across the restarts
    assert _deltacommits(table) == FILES

    want = expected_rows(source)
    theirs = hudi_read(table)
    assert dict(zip(theirs.column("id").to_pylist(), theirs.column("name").to_pylist())) == want
    assert theirs.num_rows == len(want)
    ours = Table.open(str(table)).read().table
    assert ours is not None
    assert dict(zip(ours.column("id").to_pylist(), ours.column("name").to_pylist())) == want
    assert not (checkpoint / "tidemark-staging").exists() or not any((checkpoint / "tidemark-staging").iterdir())
