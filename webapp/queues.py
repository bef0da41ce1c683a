"""The two Celery queues: runs (compactions, cleans, …) and samples, so a sample never waits behind a run.

Runs go to the default queue (`TIDEMARK_CELERY_QUEUE`, default "tidemark"); change checks and samples to
`TIDEMARK_SAMPLING_QUEUE` (default: the default queue's name + "-sampling"). A worker started without
`-Q` consumes both; `python -m tasks.supervisor` starts one worker per queue, so a long compaction holds
no sampling slot. Sampling needs no Spark, so a sampling-only worker can run with TIDEMARK_WARM_SPARK=0.
"""
from __future__ import annotations

from celery import Celery
from kombu import Exchange, Queue

from engine import env


def default_queue() -> str:
    from django.conf import settings

    return settings.CELERY_TASK_DEFAULT_QUEUE


def sampling_queue() -> str:
    return env.text("TIDEMARK_SAMPLING_QUEUE", f"{default_queue()}-sampling")


def names() -> tuple[str, str]:
    """Both queues' names; each has a direct exchange of its own name."""
    return default_queue(), sampling_queue()


def declare(app: Celery) -> None:
    """Both queues are the app's queues, so a worker without `-Q` consumes from both."""
    # As Celery declares its default queue: a direct exchange of the queue's name, routed by that name.
    app.conf.task_queues = tuple(Queue(name, Exchange(name, type="direct"), routing_key=name)
                                 for name in names())
