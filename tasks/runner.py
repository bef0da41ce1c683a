"""One run's life in a worker: queued → running → succeeded | failed | refused, recorded on its Run row.

`perform(run_id)` is the body of every Celery task that changes a table: fail a run that waited in the
queue past `TIDEMARK_QUEUED_TIMEOUT` (the table has moved on since it was asked for), mark the run
running, take the lease of the table's location (a refusal when another owner keeps it past the wait),
check the worker's Spark session is alive (a dead JVM is replaced first), resolve the registered path
again under the lease and check it against the allow-list (tasks.location), open the table there
through the engine and call the kind's operation with the lease as the engine's lock and a progress
callback, record the plan/result JSON, refresh the table's metric sample, record and audit the outcome,
release the lease. The engine decides everything about the table; this module only records what happened.
"""
from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import close_old_connections, transaction
from django.utils import timezone

from engine import Cancelled, RefusalReason, Refused, TidemarkError
from tasks import catalog, operations, sampling, spark_session, sweep
from tasks import location as locations
from tasks.lease import DEFAULT_WAIT_S, DatabaseLease, holder, run_of_owner, run_owner
from tasks.progress import RunProgress
from tasks.records import finish
from webapp.tables.models import Run

log = logging.getLogger(__name__)


def perform(run_id: int, task_id: str | None = None) -> str:
    """Carry out a queued run; returns its final state. A run that is no longer queued is left alone."""
    close_old_connections()
    if sweep.expire_queued(run_id):
        log.warning("run %s waited in the queue past its timeout: not executed", run_id)
        return Run.State.FAILED
    started = Run.objects.filter(pk=run_id, state=Run.State.QUEUED).update(
        state=Run.State.RUNNING, started_at=timezone.now(), celery_task_id=task_id or "")
    run = Run.objects.select_related("table", "requested_by").get(pk=run_id)
    if not started:
        log.info("run %s is %s, not queued: nothing to do", run_id, run.state)
        return run.state
    try:
        return _perform(run)
    except Exception as exc:  # whatever broke, the run ends with one line, not "running" until a sweep
        finish(run, Run.State.FAILED, error=internal_error(run.pk, exc, f"running {run.kind}"))
        return Run.objects.values_list("state", flat=True).get(pk=run_id)


def _perform(run: Run) -> str:
    if run.kind == Run.Kind.METRICS:
        return _refresh(run)
    if run.kind == Run.Kind.RECOVER:
        # A recover right after a crash: the dead run's lease is freed (and the run marked lost) at once
        # when its owner is known dead, rather than refusing the recover until the lease's ttl passes.
        sweep.sweep_lost_runs()
    try:
        lease = DatabaseLease(run.table_id, owner=run_owner(run.pk), path=run.table.path)
    except ValueError as exc:
        finish(run, Run.State.FAILED, error=f"ValueError: {exc}")
        return Run.State.FAILED
    if not lease.acquire(DEFAULT_WAIT_S):
        finish(run, Run.State.REFUSED, **_lock_refusal(run))
        return Run.State.REFUSED
    try:
        state, fields = _call_engine(run, lease)
        _record(run, state, fields)
    finally:
        lease.release()
    return Run.objects.values_list("state", flat=True).get(pk=run.pk)


def internal_error(run_id: int, exc: BaseException, during: str) -> str:
    """Log the trace under a fresh error id and return the one line the run shows (never the trace: pages
    and the API show what went wrong and the id to find the rest in the worker log)."""
    error_id = uuid.uuid4().hex[:12]
    log.error("run %s: internal error %s while %s", run_id, error_id, during, exc_info=exc)
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"internal error while {during}: {type(exc).__name__}: {first} (error id {error_id}; trace in the worker log)"


def _record(run: Run, state: str, fields: dict[str, Any]) -> None:
    """Record the outcome together with the table's new sample (one transaction, one timestamp), so whoever
    sees the run finished also sees the table's new freshness ("complete up to") and backlog. A failure to
    record still ends the run, as failed with one line and an error id."""
    try:
        if state != Run.State.REFUSED:
            # The engine synced the catalog after what it committed; a sync it could not finish is retried
            # here, after every run, so the catalog catches up as soon as it answers.
            catalog.sync_if_owed(run.table)
        sample = sampling.refresh_quietly(run.table) if state != Run.State.REFUSED else None
        with transaction.atomic():
            now = timezone.now()
            if sample is not None:
                type(sample).objects.filter(pk=sample.pk).update(taken_at=now)
            finish(run, state, finished_at=now, **fields)
    except Exception as exc:
        finish(run, Run.State.FAILED, error=internal_error(run.pk, exc, f"recording its {state} outcome"))


def _call_engine(run: Run, lease: DatabaseLease) -> tuple[str, dict[str, Any]]:
    """Run the kind's engine operation; returns the final state and the run fields to record."""
    progress = RunProgress(run.pk)
    try:
        spark_session.ensure_alive()
    except Exception as exc:
        return Run.State.FAILED, {"error": f"the worker's Spark session could not be started: {type(exc).__name__}: {exc}"}
    try:
        table = locations.open_table(_location_inside_lease(run, lease))
        outcome = operations.BY_KIND[run.kind](table, run, lease, progress)
    except Cancelled as cancelled:
        return Run.State.CANCELLED, {"instant": cancelled.instant, "error": cancelled.message}
    except Refused as refusal:
        return Run.State.REFUSED, {"refusal_reason": refusal.reason, "blocking_instant": refusal.blocking_instant or "",
                           "error": refusal.message}
    except (TidemarkError, ValueError) as exc:
        _after_failure(exc)
        return Run.State.FAILED, {"error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # an engine bug must still end the run: one line here, the trace in the log
        _after_failure(exc)
        return Run.State.FAILED, {"error": internal_error(run.pk, exc, f"running {run.kind}")}
    fields = {"instant": outcome.instant or run.instant or "", "plan": outcome.plan, "result": outcome.result}
    if not lease.is_held():
        # The work finished but our lease lapsed meanwhile: say so rather than claim a clean success.
        return Run.State.FAILED, {**fields, "error": "lease lost while running (its heartbeat could not renew it); "
                                             "check the table with a recover run"}
    return Run.State.SUCCEEDED, fields


def _after_failure(exc: BaseException) -> None:
    """A run that failed on a Py4J / gateway error may have lost its JVM: drop a dead session right away."""
    if spark_session.is_jvm_failure(exc):
        spark_session.forget_if_dead()


def _location_inside_lease(run: Run, lease: DatabaseLease) -> str:
    """Where the engine works: the registered path resolved now, under the lease, checked against the
    allow-list and against the location the lease guards (Refused otherwise). The engine is opened at
    this resolved location, so a link swapped later cannot redirect the run."""
    location = locations.checked(run.table.path)
    if location != lease.location:
        raise Refused(locations.LOCATION_CHANGED,
                      f"table path {run.table.path} now resolves to {location}, not {lease.location} as when its "
                      "lease was taken; nothing was done")
    return location


def _lock_refusal(run: Run) -> dict[str, Any]:
    """Another owner keeps the table's lease: the refusal names the run (and its instant) that blocks."""
    current = holder(run.table_id)
    blocker_id = run_of_owner(current.owner) if current else None
    blocker = Run.objects.filter(pk=blocker_id).values("kind", "instant").first() if blocker_id else None
    who = f"run {blocker_id} ({blocker['kind']})" if blocker else (current.owner if current else "another owner")
    return {"refusal_reason": RefusalReason.LOCK_UNAVAILABLE, "blocking_instant": (blocker["instant"] if blocker else "") or "",
            "error": f"table {run.table.name} is locked by {who}; waited {DEFAULT_WAIT_S:g} s"}


def _refresh(run: Run) -> str:
    try:
        sample = sampling.refresh(run.table)
        finish(run, Run.State.SUCCEEDED, result={"sample_id": sample.pk, "taken_at": sample.taken_at.isoformat()})
    except TidemarkError as exc:
        finish(run, Run.State.FAILED, error=f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        finish(run, Run.State.FAILED, error=internal_error(run.pk, exc, "sampling metrics"))
    return Run.objects.values_list("state", flat=True).get(pk=run.pk)
