"""Runs whose worker died: found through their lapsed leases and marked failed ("worker lost").

A worker killed mid-run (kill -9, OOM, lost host) never records an outcome, and its lease stops being
renewed. Once the lease has expired, the run it belonged to (the owner names it) cannot still be making
progress, so the sweep marks it failed. A run that died before it ever took its lease has no lease row
naming it; it is declared lost once it has been running longer than any lease wait plus one lease ttl.
On the dead worker's own host the sweep need not wait for the ttl: a lease whose owner process is known
gone (pid and start time, `tasks.lease.owner_dead`) lapses at once, so a recover right after a crash (which
sweeps first) is not refused for the rest of the ttl.
A run still *queued* past `TIDEMARK_QUEUED_TIMEOUT` (Airflow's task_queued_timeout: every worker dead, or its
message lost with one) is failed too, so beat stops treating its table as busy, and a worker that receives
its message later never executes it. The sweep runs on beat's schedule and when a worker starts. The table itself is repaired by a recover
run (the engine rolls back what the dead run left pending), never by the sweep.
"""
from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone

from tasks import lease as lease_mod
from tasks import location as locations
from tasks.lease import RUN_OWNER_PREFIX, run_of_owner
from tasks.records import audit
from webapp.alerts.events import notify
from webapp.tables.models import Run, TableLease

LOST = "worker lost: its lease expired without the run finishing (run recover on the table before retrying)"


def queued_expired_error() -> str:
    return (f"queued for more than {settings.TIDEMARK_QUEUED_TIMEOUT_S:g} s without a worker starting it "
            "(TIDEMARK_QUEUED_TIMEOUT); not executed — request it again if it is still wanted")


def expire_queued(run_id: int | None = None) -> list[int]:
    """Fail the queued runs (all, or just `run_id`) older than the queued timeout; returns their ids."""
    now = timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.TIDEMARK_QUEUED_TIMEOUT_S)
    stale = Run.objects.filter(state=Run.State.QUEUED, queued_at__lt=cutoff)
    if run_id is not None:
        stale = stale.filter(pk=run_id)
    expired, error = [], queued_expired_error()
    for run in stale.select_related("table", "requested_by"):
        if Run.objects.filter(pk=run.pk, state=Run.State.QUEUED).update(state=Run.State.FAILED, finished_at=now, error=error):
            audit(run, Run.State.FAILED, {"error": error})
            expired.append(run.pk)
    return expired


def _expired_lease_runs(now: dt.datetime) -> set[int]:
    owners = (TableLease.objects.filter(expires_at__lte=now, owner__startswith=RUN_OWNER_PREFIX)
              .values_list("owner", flat=True))
    return {rid for rid in map(run_of_owner, owners) if rid is not None}


def _never_leased_runs(now: dt.datetime) -> set[int]:
    """Running too long to still be waiting for a lease, yet no lease row names them."""
    grace = dt.timedelta(seconds=lease_mod.DEFAULT_WAIT_S + lease_mod.DEFAULT_TTL_S)
    stale = set(Run.objects.filter(state=Run.State.RUNNING, started_at__lt=now - grace).exclude(kind=Run.Kind.METRICS)
                .values_list("pk", flat=True))
    holding = {run_of_owner(o) for o in TableLease.objects.exclude(owner=lease_mod.FREE)
               .values_list("owner", flat=True)}
    return stale - holding


def expire_dead_owners(now: dt.datetime) -> list[str]:
    """Let the live leases of owners known dead (this host, process gone: tasks.lease.owner_dead) lapse now,
    instead of after their ttl; returns their owners. Compare-and-set on the owner, so a lease handed on
    meanwhile is untouched."""
    live = TableLease.objects.filter(expires_at__gt=now).exclude(owner=lease_mod.FREE).values_list("owner", flat=True)
    dead = [owner for owner in live if lease_mod.owner_dead(owner)]
    for owner in dead:
        TableLease.objects.filter(owner=owner, expires_at__gt=now).update(expires_at=now)
    return dead


def sweep_lost_runs() -> list[int]:
    """Mark runs of dead workers, and runs queued past their timeout, failed; returns their ids."""
    now = timezone.now()
    expire_dead_owners(now)
    candidates = _expired_lease_runs(now) | _never_leased_runs(now)
    lost = []
    for run in Run.objects.filter(pk__in=candidates, state=Run.State.RUNNING).select_related("table", "requested_by"):
        if _committed_before_lost(run):
            note = (f"its worker was lost after compaction {run.instant} committed: the compaction is complete; "
                    "what the run did after its commit (catalog sync, the sample) is redone by the next run")
            if Run.objects.filter(pk=run.pk, state=Run.State.RUNNING).update(
                    state=Run.State.SUCCEEDED, finished_at=now, result={"instant": run.instant, "note": note}):
                audit(run, Run.State.SUCCEEDED, {"note": note})
            continue
        if Run.objects.filter(pk=run.pk, state=Run.State.RUNNING).update(state=Run.State.FAILED, finished_at=now, error=LOST):
            audit(run, Run.State.FAILED, {"error": LOST})
            notify("worker_lost", table=run.table, run=Run.objects.get(pk=run.pk), reason=LOST)
            lost.append(run.pk)
    return lost + expire_queued()


def _committed_before_lost(run: Run) -> bool:
    """Whether the compaction a lost run was executing had completed on the table's timeline (the worker died
    after the commit): then the run did what it was asked. Only a run that planned its compaction itself: an
    instant given to an execute run may have been completed by another run. Unknown (the table unreadable now,
    whatever the error) counts as not: one unreadable table must not stop the sweep of the others."""
    if run.kind != Run.Kind.SCHEDULE_EXECUTE or not run.instant:
        return False
    try:
        timeline = locations.open_table(run.table.path).timeline()
        return any(i.instant == run.instant and i.state == "completed" for i in timeline)
    except Exception:  # noqa: BLE001 - see above
        return False
