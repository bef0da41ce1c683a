"""The harness itself: each parametrisation really runs on its database and broker."""
from __future__ import annotations


def test_the_stack_runs_on_its_backend(stack_env):
    from django.db import connection

    from tasks import app

    assert connection.vendor == stack_env.backend
    broker = app.conf.broker_url
    assert broker.startswith("filesystem://" if stack_env.backend == "sqlite" else "redis://")
    assert app.conf.task_default_queue == stack_env.env["TIDEMARK_CELERY_QUEUE"]
