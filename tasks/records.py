"""What workers write about a run: its final state (once) and the audit entry that goes with it."""
from __future__ import annotations

from typing import Any

from django.utils import timezone

from webapp.alerts.events import notify
from webapp.tables.models import AuditEvent, Run

AUDITED_FIELDS = ("instant", "refusal_reason", "blocking_instant", "error")


def finish(run: Run, state: str, **fields: Any) -> bool:
    """Record the outcome if the run is still running (a sweep may have declared it lost); audit it.

    Returns whether this call recorded the outcome.
    """
    fields.setdefault("finished_at", timezone.now())
    recorded = Run.objects.filter(pk=run.pk, state=Run.State.RUNNING).update(state=state, **fields)
    if recorded:
        audit(run, state, {k: v for k, v in fields.items() if k in AUDITED_FIELDS})
        if state in (Run.State.FAILED, Run.State.REFUSED):
            notify(f"run_{state}", table=run.table, run=Run.objects.get(pk=run.pk),
                   reason=fields.get("refusal_reason") and f"{fields['refusal_reason']}: {fields.get('error', '')}"
                   or fields.get("error", ""))
    return bool(recorded)


def audit(run: Run, outcome: str, detail: dict[str, Any]) -> AuditEvent:
    """An audit entry for a run's outcome, attributed to whoever requested it (or the scheduler)."""
    user = run.requested_by
    actor = user.get_username() if user is not None else f"system ({run.trigger})"
    return AuditEvent.objects.create(at=timezone.now(), user=user, actor=actor, action=f"run.{run.kind}",
                                     table=run.table, run=run, outcome=outcome, detail=detail)
