"""The Celery app of Tidemark's workers (`celery -A tasks worker` / `celery -A tasks beat`).

Configured from Django's settings (the `CELERY_*` block of webapp/settings.py) as in Celery's "First
steps with Django": the broker comes from `CELERY_BROKER_URL` (Redis in production, kombu's filesystem
broker under the state folder by default). Runs are recorded in the database by the tasks themselves,
so no result backend is configured. Tasks live in `tasks.jobs`; the beat schedule in `tasks.beat`.
"""
from __future__ import annotations

import os

from celery import Celery

from tasks import queues
from tasks.beat import beat_schedule

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("tidemark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.beat_schedule = beat_schedule()
queues.declare(app)  # runs and samples on separate queues (tasks.queues)
app.autodiscover_tasks(["tasks"], related_name="jobs")  # every task lives in tasks.jobs

__all__ = ["app"]
