"""Celery tasks, the workers' entry points: one per run kind (all thin: `runner.perform`) and the periodic ones.

Each task is named in `webapp.dispatch`, which sends them (the web side creates a Run row, state "queued", and
calls `webapp.dispatch.dispatch(run.id)`; the task is sent once the creating transaction commits, so a worker
never looks for a row it cannot see yet). This module sits above every other task module: they never import it.
Tasks are not retried by Celery: a run is one attempt whose outcome the operator sees; a worker that dies
is detected by the lease sweep and the table repaired with a recover run.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready

from tasks import spark_session  # noqa: F401  (connects the worker-process signals that warm Spark)
from webapp.dispatch import DELIVER_ALERT, SAMPLE_TABLES, run_task, send_samples
from webapp.tables.models import RegisteredTable, Run

log = logging.getLogger(__name__)

# The task bodies import the engine-facing modules when they run: a worker that only samples, or the beat
# process, loads no Spark for them.


def _run_task(kind: str) -> Task[[int], str]:
    @shared_task(name=run_task(kind), bind=True, ignore_result=True)
    def task(self: Task[[int], str], run_id: int) -> str:
        from tasks import runner

        return runner.perform(run_id, task_id=self.request.id)

    task.__doc__ = f"Carry out a queued `{kind}` run (see tasks.runner.perform)."
    return task


# One task per run kind, built from `Run.Kind` (webapp.dispatch.run_task names them).
BY_KIND: dict[str, Task[[int], str]] = {kind: _run_task(kind) for kind in Run.Kind.values}


@shared_task(name=DELIVER_ALERT, bind=True, ignore_result=True, max_retries=None)
def deliver_alert(self: Task[[int], None], delivery_id: int) -> None:
    """Send one alert delivery; retried with backoff until it is sent or its attempts are used up."""
    from webapp.alerts import delivery

    retry_in = delivery.attempt(delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in)


# ------------------------------------------------------------------------------------------ periodic

@shared_task(name="tasks.jobs.trigger_due_tables", ignore_result=True)
def trigger_due_tables() -> list[int]:
    """Queue the event-time trigger of every table whose schedule is due; returns the new run ids."""
    from tasks import periodic

    return periodic.trigger_due_tables()


@shared_task(name="tasks.jobs.sample_all_tables", ignore_result=True)
def sample_all_tables() -> int:
    """Fan the registered tables out in chunks onto the sampling queue; returns the number of chunks."""
    return send_samples(list(RegisteredTable.objects.order_by("pk").values_list("pk", flat=True)))


@shared_task(name=SAMPLE_TABLES, ignore_result=True)
def sample_tables(table_ids: list[int]) -> dict[str, Any]:
    """Change-check a chunk of tables, fully sample the changed (and floor-due) ones, act on SLA breaches."""
    from tasks import change_sampling

    started = time.perf_counter()
    report = change_sampling.sample_tables(table_ids)
    log.info("sampling chunk of %d tables took %.2f s: %s", len(table_ids), time.perf_counter() - started, report)
    return {"checked": report.checked, "sampled": report.sampled, "skipped": report.skipped,
            "failed": report.failed, "triggered": report.triggered}


@shared_task(name="tasks.jobs.sync_owed_catalogs", ignore_result=True)
def sync_owed_catalogs() -> list[str]:
    """Retry the catalog sync of every idle table whose last sync failed or never happened."""
    from tasks import catalog

    return catalog.sync_owed_tables()


@shared_task(name="tasks.jobs.sweep_lost_runs", ignore_result=True)
def sweep_lost_runs() -> list[int]:
    """Mark runs of dead workers failed (their leases lapsed)."""
    from tasks import sweep

    return sweep.sweep_lost_runs()


@worker_ready.connect
def sweep_on_worker_start(**_: object) -> None:
    from tasks import sweep

    sweep.sweep_lost_runs()


@shared_task(name="tasks.jobs.roll_up_samples", ignore_result=True)
def roll_up_samples() -> dict[str, Any]:
    """Roll old samples up into hourly and daily rows and delete the expired (webapp.tables.retention)."""
    from webapp.tables import retention

    report = retention.roll_up()
    return {"rolled_hourly": report.rolled_hourly, "rolled_daily": report.rolled_daily, "deleted": report.deleted}
