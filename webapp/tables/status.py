"""JSON shapes of tables and runs for the API (documented in webapp/api/openapi.yaml)."""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.urls import reverse

from webapp.tables.models import Run
from webapp.tables.overview import TableStatus
from webapp.tables.templatetags.tidemark import kind_label, state_class

SAMPLE_KEYS = ("ro_freshness_time", "freshness_lag_seconds", "remaining_log_files", "remaining_log_bytes",
               "file_slices_with_logs", "pending_compactions", "late_records", "corrupt_log_blocks")


def iso(value: dt.datetime | None) -> str | None:
    """ISO-8601 UTC with a Z, the one time format of the API (stored times are already UTC)."""
    if value is None:
        return None
    if value.utcoffset() != dt.timedelta(0):
        value = value.astimezone(dt.UTC)
    return value.replace(tzinfo=None).isoformat() + "Z"


def table_dict(status: TableStatus, api_prefix: str | None = None) -> dict[str, Any]:
    table, sample = status.table, status.sample
    prefix = api_prefix or reverse("api:tables")
    body = {key: table[key] for key in ("name", "path", "schedule_minutes", "data_latency",
                                        "freshness_sla_minutes", "carry_over", "exact", "paused")}
    body["url"] = f"{prefix}/{table['name']}"
    body["table_version"] = sample["table_version"] if sample else None
    body["sampled_at"] = iso(sample["taken_at"]) if sample else None
    body["ro_completion_time"] = iso(sample["ro_completion_time"]) if sample else None
    for key in SAMPLE_KEYS:
        body[key] = sample[key] if sample else None
    if sample:
        body["ro_freshness_time"] = iso(sample["ro_freshness_time"])
    body["catalog"] = (sample.get("catalog") or None) if sample else None
    body["sla_status"] = status.sla
    health = status.health
    body["health"] = {"level": health.level, "reasons": health.reasons}
    body["late_data"] = status.late
    run = status.last_run
    body["last_run"] = None if run is None else {"id": run["id"], "kind": run["kind"], "state": run["state"],
                                                 "refusal_reason": run["refusal_reason"]}
    return body


def run_dict(run: Run, summary: bool = False) -> dict[str, Any]:
    """A run as JSON; `summary` (the runs list) leaves out the plan and the result, which can be large."""
    body = {
        "id": run.pk, "url": reverse("api:run", args=[run.pk]), "table": run.table.name, "kind": run.kind,
        "state": run.state, "instant": run.instant or None, "threshold": iso(run.threshold),
        "data_latency": run.data_latency or None, "carry_over": run.carry_over or None, "exact": run.exact,
        "trigger": run.trigger,
        "requested_by": run.requested_by.get_username() if run.requested_by else None,
        "queued_at": iso(run.queued_at), "started_at": iso(run.started_at), "finished_at": iso(run.finished_at),
        "progress": {"done": run.progress_done, "total": run.progress_total, "unit": run.progress_unit or None},
        "plan": run.plan, "result": run.result, "error": run.error or None,
        "refusal_reason": run.refusal_reason or None, "blocking_instant": run.blocking_instant or None,
        "cancel_requested": run.cancel_requested, "cancel_too_late": cancel_too_late(run),
        "file_group": run.file_group or None, "dry_run": run.dry_run,
        # How pages show it, so a script renders exactly what the server-rendered page shows.
        "kind_label": kind_label(run.kind), "state_class": state_class(run.state),
        "final": not run.is_active, **progress_view(run),
    }
    if summary:
        del body["plan"], body["result"]
        body["file_groups"] = len((run.plan or {}).get("operations") or [])
    return body


def cancel_too_late(run: Run) -> bool:
    """A cancel was accepted while the run was running, and the run still committed: it came after the engine's
    last look (it checks between file groups), so the operator must not believe it took effect."""
    return run.cancel_requested and run.state == Run.State.SUCCEEDED


def progress_view(run: Run) -> dict[str, str]:
    """The table page's progress box for `run` in words and classes: the bar's class ("ok" succeeded, "bad"
    any other end, "" while active), the count under way, and one line of detail (instant, refusal, error)."""
    if run.is_active:
        bar = ""
    else:
        bar = "ok" if run.state == Run.State.SUCCEEDED else "bad"
    if run.progress_total:
        text = f"{run.progress_done} / {run.progress_total} {run.progress_unit}".rstrip()
    else:
        text = "waiting for a worker" if run.state == Run.State.QUEUED else ""
    detail = [f"instant {run.instant}"] if run.instant else []
    if run.refusal_reason:
        blocked = f" (blocked by {run.blocking_instant})" if run.blocking_instant else ""
        detail.append(f"refused: {run.refusal_reason}{blocked}")
    if cancel_too_late(run):
        detail.append("cancel came too late: the compaction had finished its file groups and was committed")
    if run.error:   # a failure's first line (its error id); a refusal's whole sentence
        detail.append(run.error if run.state == Run.State.REFUSED else run.error.split("\n")[0])
    return {"bar_class": bar, "progress_text": text, "detail": " · ".join(detail)}
