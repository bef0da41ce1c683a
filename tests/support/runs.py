"""Helpers for tests that drive runs through a real worker: register a table, request a run, await it."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

FINAL = ("succeeded", "failed", "refused", "cancelled")


def register(path: Path, name: str | None = None, **fields):
    from webapp.tables.models import RegisteredTable

    return RegisteredTable.objects.create(name=name or f"t-{uuid.uuid4().hex[:10]}", path=str(path), **fields)


def request(table, kind: str, **params):
    """Queue a run as the web side does (row + dispatch after commit); returns the Run."""
    from django.db import transaction
    from django.utils import timezone

    from webapp.dispatch import dispatch
    from webapp.tables.models import Run

    with transaction.atomic():
        run = Run.objects.create(table=table, kind=kind, state="queued", queued_at=timezone.now(), **params)
        dispatch(run.pk)
    return run


def wait_final(run_id: int, timeout_s: float = 300):
    """The run once it reached a final state (fails the test with its last state on timeout)."""
    from webapp.tables.models import Run

    deadline = time.monotonic() + timeout_s
    while True:
        run = Run.objects.get(pk=run_id)
        if run.state in FINAL:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} ({run.kind}) still {run.state} after {timeout_s:.0f} s; "
                                 f"progress {run.progress_done}/{run.progress_total} {run.progress_unit}")
        time.sleep(0.2)


def run_to_end(table, kind: str, timeout_s: float = 300, **params):
    return wait_final(request(table, kind, **params).pk, timeout_s)


def wait_until(predicate, timeout_s: float, what: str) -> None:
    """Poll `predicate` until it holds; fail the test naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
