"""Tidemark's workers (`celery -A tasks worker` / `celery -A tasks beat`): the shared Celery app
(`webapp.celery`, through which the web process sends work) with the task bodies of `tasks.jobs` and beat's
schedule (`tasks.beat`) added."""
from __future__ import annotations

from tasks.beat import beat_schedule
from webapp.celery import app

app.conf.beat_schedule = beat_schedule()
app.autodiscover_tasks(["tasks"], related_name="jobs")  # every task lives in tasks.jobs

__all__ = ["app"]
