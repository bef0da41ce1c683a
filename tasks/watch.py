"""What a new metric sample tells people: a freshness SLA breach starting or ending, late data arriving,
corrupt log blocks appearing — each audited and alerted once per occurrence, by comparing the sample with
the table's previous one (a table's first sample compares with "nothing wrong", so a breach present at
registration is told too)."""
from __future__ import annotations

from typing import Any

from django.utils import timezone

from webapp.alerts.events import notify
from webapp.tables.health import STALE_AGE_S
from webapp.tables.models import AuditEvent, MetricSample, RegisteredTable
from webapp.tables.overview import written_at


def _say(table: RegisteredTable, event: str, reason: str, detail: dict[str, Any]) -> None:
    AuditEvent.objects.create(at=timezone.now(), actor="system (sla)" if event.startswith("sla") else "system",
                              action=event, table=table, outcome=event.rsplit("_", 1)[-1], detail=detail)
    notify(event, table=table, reason=reason, detail=detail)


def observe(table: RegisteredTable, sample: MetricSample, previous: MetricSample | None) -> list[str]:
    """Audit and alert what changed since `previous`; returns the events raised."""
    raised = []
    lag, sla = sample.freshness_lag_seconds, table.freshness_sla_minutes
    detail = {"freshness_lag_seconds": lag, "freshness_sla_minutes": sla,
              "ro_completion_time": sample.ro_completion_time.isoformat() if sample.ro_completion_time else None}
    was_breached = bool(previous and previous.sla_breached)
    if sample.sla_breached and not was_breached:
        _say(table, "sla_breached", f"freshness lag {(lag or 0) / 60:.0f} min exceeds the SLA of {sla} min", detail)
        raised.append("sla_breached")
    elif was_breached and not sample.sla_breached:
        _say(table, "sla_recovered", f"freshness lag {(lag or 0) / 60:.0f} min is within the SLA of {sla} min"
             if sla else "the SLA was removed", detail)
        raised.append("sla_recovered")
    late_before = previous.late_records if previous else 0
    if sample.late_records > late_before:
        _say(table, "late_data", f"{sample.late_records} records arrived with event times before the "
                                 "published completion time", {"late_records": sample.late_records})
        raised.append("late_data")
    corrupt_before = previous.corrupt_log_blocks if previous else 0
    if sample.corrupt_log_blocks > corrupt_before:
        _say(table, "corrupt_block", f"{sample.corrupt_log_blocks} corrupt log blocks of committed writes: their "
                                     "records are hidden from every read", {"corrupt_log_blocks": sample.corrupt_log_blocks})
        raised.append("corrupt_block")
    if stale_since(sample) is not None and stale_since(previous) is None:
        age = stale_since(sample) or 0.0
        _say(table, "table_stale", f"no write for {age / 3600:.0f} h: ingestion may have stopped",
             {"last_write_at": (sample.activity or {}).get("ingestion", {}).get("last_write_at"), "seconds": age})
        raised.append("table_stale")
    return raised


def stale_since(sample: MetricSample | None) -> float | None:
    """Seconds from the sample's last write to when it was taken, when past health's critical staleness
    (a table stays stale until a write lands, so the alert is told once, when it starts)."""
    written = written_at(((sample.activity or {}).get("ingestion") or {}).get("last_write_at")) if sample else None
    if sample is None or written is None:
        return None
    age = (sample.taken_at - written).total_seconds()
    return age if age >= STALE_AGE_S[1] else None
