"""Sending work to the workers: a queued run's task, the sampling chunks, an alert delivery.

The one place that sends Celery messages. The tasks are named here and defined in `tasks.jobs` (the workers'
entry points, which import every module below them); a message is sent by its task's name through the Celery
app, so the web process and the modules under `tasks.jobs` send work without importing the task bodies (or the
engine). In a process that has the tasks loaded (a worker) the task's own `apply_async` sends it; elsewhere the
app sends the same message by name (Celery's `Signature.apply_async`).
"""
from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from engine import env
from webapp import queues
from webapp.celery import app
from webapp.tables.models import Run

JOBS = "tasks.jobs"


def run_task(kind: str) -> str:
    """The task of a run kind: `tasks.jobs.run_<kind>`, one per `Run.Kind`, each `tasks.runner.perform` of the run
    (tasks.jobs defines them from `Run.Kind`, so a new kind needs no other table)."""
    if kind not in Run.Kind.values:
        raise ValueError(f"unknown run kind {kind!r}; known kinds: {', '.join(Run.Kind.values)}")
    return f"{JOBS}.run_{kind}"


SAMPLE_TABLES = f"{JOBS}.sample_tables"
DELIVER_ALERT = f"{JOBS}.deliver_alert"


def chunk_size() -> int:
    """Tables per sampling task: big enough that a task's bookkeeping is one transaction, small enough
    that a cycle spreads across the sampling workers."""
    return env.whole("TIDEMARK_SAMPLE_CHUNK", 500, unit="tables")


def chunks(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def _send(task: str, args: tuple[object, ...], *, task_id: str | None = None, queue: str | None = None) -> None:
    options: dict[str, Any] = {"task_id": task_id, "queue": queue}   # left out when None: the app's defaults
    app.signature(task, args=args).apply_async(**{k: v for k, v in options.items() if v is not None})


def dispatch(run_id: int) -> str:
    """Send the task for run `run_id` (chosen by its kind) once the current transaction commits.

    Returns the Celery task id, stored on the run right away.
    """
    task = run_task(Run.objects.values_list("kind", flat=True).get(pk=run_id))
    task_id = str(uuid.uuid4())
    Run.objects.filter(pk=run_id).update(celery_task_id=task_id)
    transaction.on_commit(lambda: _send(task, (run_id,), task_id=task_id))
    return task_id


def send_samples(table_ids: list[int]) -> int:
    """Queue one sampling task per chunk of `table_ids` on the sampling queue; returns the number of chunks."""
    parts = chunks(table_ids, chunk_size())
    for part in parts:
        _send(SAMPLE_TABLES, (part,), queue=queues.sampling_queue())
    return len(parts)


def send_alert(delivery_id: int) -> None:
    """Queue the delivery of one alert (tasks.jobs.deliver_alert retries it with backoff)."""
    _send(DELIVER_ALERT, (delivery_id,))
