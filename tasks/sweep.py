"""Runs whose worker died: found through their lapsed leases and marked failed ("worker lost").

A worker killed mid-run (kill -9, OOM, lost host) never records an outcome, and its lease stops being
renewed. Once the lease has expired, the run it belonged to (the owner names it) cannot still be making
progress, so the sweep marks it failed. A run that died before it ever took its lease has no lease row
naming it; it is declared lost once it has been running longer than any lease wait plus one lease ttl.
The sweep runs on beat's schedule and when a worker starts. The table itself is repaired by a recover
run (the engine rolls back what the dead run left pending), never by the sweep.
"""
from __future__ import annotations

import datetime as dt

from django.utils import timezone

from tasks import lease as lease_mod
from tasks.lease import RUN_OWNER_PREFIX, run_of_owner
from tasks.records import audit
from webapp.alerts.events import notify
from webapp.tables.models import Run, TableLease

LOST = "worker lost: its lease expired without the run finishing (run recover on the table before retrying)"


def _expired_lease_runs(now: dt.datetime) -> set[int]:
    owners = (TableLease.objects.filter(expires_at__lte=now, owner__startswith=RUN_OWNER_PREFIX)
              .values_list("owner", flat=True))
    return {rid for rid in map(run_of_owner, owners) if rid is not None}


def _never_leased_runs(now: dt.datetime) -> set[int]:
    """Running too long to still be waiting for a lease, yet no lease row names them."""
    grace = dt.timedelta(seconds=lease_mod.DEFAULT_WAIT_S + lease_mod.DEFAULT_TTL_S)
    stale = set(Run.objects.filter(state="running", started_at__lt=now - grace).exclude(kind="metrics")
                .values_list("pk", flat=True))
    holding = {run_of_owner(o) for o in TableLease.objects.exclude(owner=lease_mod.FREE)
               .values_list("owner", flat=True)}
    return stale - holding


def sweep_lost_runs() -> list[int]:
    """Mark runs of dead workers failed; returns their ids."""
    now = timezone.now()
    candidates = _expired_lease_runs(now) | _never_leased_runs(now)
    lost = []
    for run in Run.objects.filter(pk__in=candidates, state="running").select_related("table", "requested_by"):
        if Run.objects.filter(pk=run.pk, state="running").update(state="failed", finished_at=now, error=LOST):
            audit(run, "failed", {"error": LOST})
            notify("worker_lost", table=run.table, run=Run.objects.get(pk=run.pk), reason=LOST)
            lost.append(run.pk)
    return lost
