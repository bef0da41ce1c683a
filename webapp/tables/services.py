"""What the pages and the API may do to tables: register, enqueue runs, preview plans.

Each action writes an AuditEvent naming its user. Runs are only *requested* here — the Celery task for
the run (tasks.jobs.dispatch) is sent after the transaction commits and does the work; no table logic
lives in the web process except the engine's dry-run plan for previews.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from webapp.tables import inputs
from webapp.tables.models import AuditEvent, RegisteredTable, Run

NAME_MAX = RegisteredTable._meta.get_field("name").max_length
RUN_PARAMS = ("threshold", "data_latency", "carry_over", "exact", "instant")


def actor_name(user) -> str:
    return user.get_username() if user is not None else "system"


def audit(user, action: str, *, table: RegisteredTable | None = None, run: Run | None = None,
          outcome: str = "", detail: dict[str, Any] | None = None) -> AuditEvent:
    return AuditEvent.objects.create(at=timezone.now(), user=user, actor=actor_name(user), action=action,
                                     table=table, run=run, outcome=outcome, detail=detail or {})


def request_run(table: RegisteredTable, kind: str, user, trigger: str = "user", **params: Any) -> Run:
    """Create the queued Run, audit the request, and dispatch it to a worker when the transaction commits."""
    unknown = set(params) - set(RUN_PARAMS)
    if unknown:
        raise ValueError(f"unknown run parameters: {', '.join(sorted(unknown))}")
    if kind not in Run.Kind.values:
        raise ValueError(f"unknown run kind {kind!r}; known: {', '.join(Run.Kind.values)}")
    fields = {k: v for k, v in params.items() if v is not None}
    with transaction.atomic():
        run = Run.objects.create(table=table, kind=kind, state=Run.State.QUEUED, trigger=trigger,
                                 requested_by=user, queued_at=timezone.now(), **fields)
        audit(user, f"request.{kind}", table=table, run=run, outcome="queued",
              detail={k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in fields.items()})
        transaction.on_commit(lambda: _dispatch(run.pk))
    return run


def _dispatch(run_id: int) -> None:
    from tasks.jobs import dispatch  # the web process loads Celery's task module only when it enqueues

    dispatch(run_id)


def trigger_compaction(table: RegisteredTable, user, args: inputs.TriggerArgs, execute: bool = True) -> Run:
    """Plan an event-time compaction and (unless `execute` is False: plan only, to inspect first) run it."""
    kind = Run.Kind.SCHEDULE_EXECUTE if execute else Run.Kind.SCHEDULE
    return request_run(table, kind, user, threshold=args.threshold,
                       data_latency=args.data_latency, carry_over=args.carry_over, exact=args.exact)


def register_table(user, data: dict[str, Any]) -> RegisteredTable:
    """Validate and register a table (its path must hold a Tidemark/Hudi table under an allowed root)."""
    path = inputs.table_path(data.get("path"))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise inputs.InvalidInput("name is required")
    if len(name) > NAME_MAX:
        raise inputs.InvalidInput(f"name is {len(name)} characters long; at most {NAME_MAX} are allowed")
    if slugify(name) != name:
        raise inputs.InvalidInput(f"name {name!r} must be a slug (lower-case letters, digits, - and _)")
    if RegisteredTable.objects.filter(name=name).exists():
        raise inputs.InvalidInput(f"a table named {name!r} is already registered")
    _require_table_at(path)
    table = RegisteredTable.objects.create(
        name=name, path=path, created_by=user,
        schedule_minutes=inputs.optional_positive_int(data.get("schedule_minutes"), "schedule_minutes"),
        data_latency=inputs.parse_latency(data.get("data_latency")),
        freshness_sla_minutes=inputs.optional_positive_int(data.get("freshness_sla_minutes"),
                                                           "freshness_sla_minutes"),
        carry_over=inputs.parse_carry_over(data.get("carry_over")) or "symlink",
        exact=bool(inputs.parse_exact(data.get("exact"))))
    audit(user, "register", table=table, outcome="succeeded", detail={"path": path})
    request_run(table, Run.Kind.METRICS, user)  # a first sample, so the list shows it at once
    return table


def _require_table_at(path: str) -> None:
    from engine import Table, TidemarkError

    try:
        Table.open(path)
    except TidemarkError as exc:
        raise inputs.InvalidInput(f"no Hudi table at {path}: {exc}") from None


def preview(table: RegisteredTable, user, args: inputs.TriggerArgs) -> dict[str, Any]:
    """The engine's dry-run plan for these arguments (writes nothing), summarised per partition."""
    from engine import Table

    kwargs = args.engine_kwargs()
    if kwargs["threshold"] is None and kwargs["data_latency"] is None and table.data_latency:
        kwargs["data_latency"] = table.data_latency
    # Re-checked on every preview: the registered folder may have been swapped for a link out of the roots.
    plan = Table.open(inputs.table_path(table.path)).plan_compaction(strategy="event_time", **kwargs).to_dict()
    audit(user, "preview", table=table, outcome="shown",
          detail={"threshold": plan.get("threshold"), "operations": len(plan.get("operations") or [])})
    return {"plan": plan, "partitions": partition_summary(plan)}


def partition_summary(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Per partition: file groups, logs and bytes compacted vs carried over."""
    rows: dict[str, dict[str, Any]] = {}
    for op in plan.get("operations") or []:
        row = rows.setdefault(op.get("partition") or "", {
            "partition": op.get("partition") or "", "file_groups": 0, "logs_compacted": 0, "logs_carried": 0,
            "bytes_compacted": 0, "bytes_carried": 0})
        row["file_groups"] += 1
        row["logs_compacted"] += len(op.get("logs_compacted") or [])
        row["logs_carried"] += len(op.get("logs_carried") or [])
        row["bytes_compacted"] += op.get("bytes_compacted") or 0
        row["bytes_carried"] += op.get("bytes_carried") or 0
    return sorted(rows.values(), key=lambda r: r["partition"])
