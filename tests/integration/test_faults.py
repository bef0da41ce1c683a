"""Fault injection: every operation killed (or failing) at every step boundary, then `recover`.

Each case runs the operation in a fresh process with TIDEMARK_FAULT set, checks the fault fired, runs
`recover` (twice: the second must change nothing) and compares the snapshot with the model of the table
— ours and hudi 0.5.0's — so nothing is lost, nothing resurrected, nothing duplicated. The children use
an in-process stand-in for Spark's scheduler (tests/support/inline_spark.py) so forty processes stay cheap.
"""
from __future__ import annotations

import os
import time

import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.config.properties import load_table_config
from engine.io import faults
from engine.services.recovery import recover
from engine.services.rollback import guarantee_before
from engine.timeline.instants import Timeline
from tests.support.fault_child import run_child
from tests.support.inline_spark import InlineSpark
from tests.support.table_model import HISTORY, LAST_WRITE, T, model_of, new_table, snapshot, write

DRIVER = {"carry_over": "execute", "commit": "write"}   # operations whose steps run inside another one
# The streaming sink's points run inside a Spark query: tests/integration/test_stream_exactly_once.py kills it there.
# Archival's need a table with a timeline long enough to archive: tests/engine/timeline/test_archive.py kills it.
OWN_TESTS = ("stream", "archive")
CASES = [(op, step, DRIVER.get(op, op)) for op, steps in faults.STEPS.items() for step in steps
         if op not in OWN_TESTS]
CASES += [("rollback", step, "rollback_compaction") for step in faults.STEPS["rollback"]]
# insert_overwrite_table: the same write protocol as a replacecommit with new base files.
CASES += [(op, step, "overwrite") for op in ("write", "commit") for step in faults.STEPS[op]]


def prepare(path: str, driver: str) -> str:
    """The table each operation starts from; returns the child's argument."""
    new_table(path)
    if driver == "execute":
        schedule_compaction(path, threshold_ms=T, carry_over="symlink")
    elif driver == "clean":
        schedule_compaction(path, strategy="unbounded")
        run_compaction(path, spark=InlineSpark())
        write(path, *LAST_WRITE)
    elif driver == "rollback":
        return write(path, *LAST_WRITE)
    elif driver == "rollback_compaction":   # the latest completed compaction, with its RO guarantee
        instant = schedule_compaction(path, threshold_ms=T, carry_over="symlink").instant
        run_compaction(path, spark=InlineSpark())
        return instant
    return ""


def expected(driver: str, path: str) -> dict[str, int]:
    """The model: the last write counts exactly when its deltacommit completed (and was not rolled back)."""
    if driver in ("rollback", "rollback_compaction"):
        return model_of(HISTORY)
    if driver == "clean":
        return model_of(HISTORY + [LAST_WRITE])
    if driver == "overwrite":   # a completed overwrite of the whole table leaves exactly its rows
        done = [i for i in Timeline.load(path).completed() if i.action == "replacecommit"]
        return model_of([LAST_WRITE]) if done else model_of(HISTORY)
    writes = [i for i in Timeline.load(path).completed() if i.action == "deltacommit"]
    return model_of(HISTORY + [LAST_WRITE] * (len(writes) - len(HISTORY)))


def check_quiescent(path: str) -> None:
    hoodie = os.path.join(path, ".hoodie")
    assert not [n for n in os.listdir(hoodie) if n.startswith(".temp-")]
    assert not os.listdir(os.path.join(hoodie, ".temp")) if os.path.isdir(os.path.join(hoodie, ".temp")) else True
    pending = [(i.action, i.state.value) for i in Timeline.load(path).pending()]
    assert pending in ([], [("compaction", "requested")]), pending
    assert not recover(path).changed   # idempotent
    published = load_table_config(path).props
    assert all(published.get(k) == v for k, v in guarantee_before(Timeline.load(path), None).items())


@pytest.mark.parametrize("operation,step,driver", CASES, ids=[f"{d}-{o}:{s}" for o, s, d in CASES])
def test_killed_at_every_step_then_recover(tmp_path, operation, step, driver):
    path = str(tmp_path / "t")
    arg = prepare(path, driver)
    done = run_child(driver, path, arg, f"{operation}:{step}")
    assert done.returncode == faults.EXIT_CODE, done.stderr[-2000:]
    time.sleep(0.3)   # the dead writer's heartbeat (100 ms × 2 misses) expires
    recover(path)
    check_quiescent(path)
    assert snapshot(path) == expected(driver, path)
    if driver == "rollback_compaction":
        assert not Timeline.load(path).get(arg) and load_table_config(path).props.get(
            "tidemark.ro.compaction.instant") is None
    if Timeline.load(path).pending_compactions():   # a reverted or never-run plan runs to the same snapshot
        before = snapshot(path)
        run_compaction(path, spark=InlineSpark())
        assert snapshot(path) == before


@pytest.mark.parametrize("step", faults.STEPS["write"])
def test_write_failing_at_every_step_leaves_nothing_visible(tmp_path, step):
    path = str(tmp_path / "t")
    new_table(path)
    done = run_child("write", path, "", f"write:{step}:raise")
    assert done.returncode == 1 and "injected fault" in done.stderr
    recover(path)   # no wait: a writer that failed stopped its heartbeat, so its instant expired at once
    check_quiescent(path)
    assert snapshot(path) == expected("write", path)
