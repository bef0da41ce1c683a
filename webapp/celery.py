"""The Celery app that carries Tidemark's work: the web process sends runs through it, the workers run them.

Configured from Django's settings (the `CELERY_*` block of webapp/settings.py) as in Celery's "First steps
with Django": the broker comes from `CELERY_BROKER_URL` (Redis in production, kombu's filesystem broker under
the state folder by default), with the two queues of `webapp.queues`. Runs are recorded in the database by
the tasks themselves, so no result backend is configured. It lives here, below both the pages and the
workers, so the web side sends work by task name (`webapp.dispatch`) without importing `tasks`; the workers
(`celery -A tasks ...`) take this app and add the task bodies and beat's schedule to it (`tasks/__init__.py`).
"""
from __future__ import annotations

import os
from pathlib import Path

from celery import Celery

from webapp import broker, queues

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("tidemark")
app.config_from_object("django.conf:settings", namespace="CELERY")
queues.declare(app)  # runs and samples on separate queues (webapp.queues)
if app.conf.broker_url.startswith("filesystem://"):   # before anything binds (webapp.broker)
    broker.seed_exchanges(Path(app.conf.broker_transport_options["control_folder"]),
                          [*queues.names(), *broker.CONTROL_EXCHANGES])

__all__ = ["app"]
