"""What the pages and the API may do to tables: register, enqueue runs, preview plans.

Each action writes an AuditEvent naming its user. Runs are only *requested* here — the Celery task for
the run (webapp.dispatch) is sent after the transaction commits and does the work; no table logic
lives in the web process except the engine's dry-run plan for previews and a settings edit's clean policy and
retention, which the engine stores in the table's hoodie.properties (`Table.update_settings`).
"""
from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.text import slugify

from webapp.accounts.roles import AnyUser
from webapp.tables import access, inputs
from webapp.tables.activity import POLICY_KEY, RETAINED_KEYS
from webapp.tables.models import AuditEvent, RegisteredTable, Run
from webapp.tables.status import iso

NAME_MAX: int = RegisteredTable._meta.get_field("name").max_length or 100   # the SlugField's max_length
RUN_PARAMS = ("threshold", "data_latency", "carry_over", "exact", "instant", "file_group", "dry_run")


def actor_name(user: AnyUser | None) -> str:
    return user.get_username() if user is not None else "system"


def account(user: AnyUser | None) -> User | None:
    """The account row a request's user is (None: the system). The views in front of every action require a
    login, so an anonymous user here is a bug: refused, never recorded as the system."""
    if isinstance(user, AnonymousUser):
        raise PermissionError("an anonymous request reached an action that needs a login")
    return user


def audit(user: AnyUser | None, action: str, *, table: RegisteredTable | None = None, run: Run | None = None,
          outcome: str = "", detail: dict[str, Any] | None = None, actor: str | None = None) -> AuditEvent:
    return AuditEvent.objects.create(at=timezone.now(), user=account(user), actor=actor or actor_name(user), action=action,
                                     table=table, run=run, outcome=outcome, detail=detail or {})


# Run kinds that plan or execute a compaction: one at a time per table, from the request on (the serial trigger).
COMPACTION_RUNS = (Run.Kind.SCHEDULE, Run.Kind.SCHEDULE_EXECUTE, Run.Kind.EXECUTE)


def request_run(table: RegisteredTable, kind: str, user: AnyUser | None, trigger: str = "user", **params: Any) -> Run:
    """Create the queued Run, audit the request, and dispatch it to a worker when the transaction commits.

    The one door for every run, the pages' and the API's (a user) and beat's (`user` None, audited as
    `system (<trigger>)`)."""
    unknown = set(params) - set(RUN_PARAMS)
    if unknown:
        raise ValueError(f"unknown run parameters: {', '.join(sorted(unknown))}")
    if kind not in Run.Kind.values:
        raise ValueError(f"unknown run kind {kind!r}; known: {', '.join(Run.Kind.values)}")
    fields = {k: v for k, v in params.items() if v is not None}
    with transaction.atomic():
        if kind in COMPACTION_RUNS and trigger == "user":   # beat checks its own (periodic._busy)
            _refuse_a_second_compaction(table)
        run = Run.objects.create(table=table, kind=kind, state=Run.State.QUEUED, trigger=trigger,
                                 requested_by=account(user), queued_at=timezone.now(), **fields)
        audit(user, f"request.{kind}", table=table, run=run, outcome=Run.State.QUEUED,
              actor=None if user is not None else f"system ({trigger})",
              detail={k: (iso(v) if hasattr(v, "isoformat") else v) for k, v in fields.items()})
        transaction.on_commit(lambda: _dispatch(run.pk))
    return run


def _refuse_a_second_compaction(table: RegisteredTable) -> None:
    """Conflict while another compaction run of the table is queued or running: two requests a moment apart
    would otherwise plan or execute one after the other. (The engine's serial trigger refuses a second plan
    anyway; this refuses the request itself, before it queues.) The table's row stays locked until the caller's
    transaction ends, so of two requests at once the second sees the first's run (PostgreSQL; SQLite's immediate
    transactions already run one at a time)."""
    RegisteredTable.objects.select_for_update().filter(pk=table.pk).first()
    active = table.runs.filter(kind__in=COMPACTION_RUNS, state__in=(Run.State.QUEUED, Run.State.RUNNING)).first()
    if active is not None:
        raise Conflict(f"compaction run {active.pk} of table {table.name} is {active.state}: one compaction at a "
                       "time; wait for it or cancel it")


def _dispatch(run_id: int) -> None:
    from webapp.dispatch import dispatch  # the web process loads the Celery app only when it enqueues

    dispatch(run_id)


def default_latency(table: RegisteredTable) -> str | None:
    """The latency a trigger without T or latency plans with: the registered one, else the Hudi table's."""
    return table.data_latency or access.open_registered(table).default_data_latency


def trigger_args(table: RegisteredTable, data: dict[str, Any]) -> inputs.TriggerArgs:
    """The one validation of a trigger or preview of `table` (form, API and preview call this)."""
    return inputs.validate_trigger(data, default_latency=default_latency(table))


def trigger_compaction(table: RegisteredTable, user: AnyUser | None, args: inputs.TriggerArgs, execute: bool = True) -> Run:
    """Plan an event-time compaction and (unless `execute` is False: plan only, to inspect first) run it.
    Refused (Conflict) while another compaction run of the table is queued or running: two triggers a moment
    apart would otherwise both plan, one after the other, each with the threshold it was given."""
    _carry_over_for(table.path, args.carry_over or None)
    kind = Run.Kind.SCHEDULE_EXECUTE if execute else Run.Kind.SCHEDULE
    return request_run(table, kind, user, threshold=args.threshold,
                       data_latency=args.data_latency, carry_over=args.carry_over, exact=args.exact)


def register_table(user: AnyUser | None, data: dict[str, Any]) -> RegisteredTable:
    """Validate and register a table (its path must hold a Tidemark/Hudi table under an allowed root, not
    registered yet under any name: one registration — and so one lease — per physical table)."""
    path = inputs.table_path(data.get("path"))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise inputs.InvalidInput("name is required")
    name = name.strip()
    if len(name) > NAME_MAX:
        raise inputs.InvalidInput(f"name is {len(name)} characters long; at most {NAME_MAX} are allowed")
    if slugify(name) != name:
        raise inputs.InvalidInput(f"name {name!r} must be a slug (lower-case letters, digits, - and _)")
    if RegisteredTable.objects.filter(name=name).exists():
        raise inputs.InvalidInput(f"a table named {name!r} is already registered")
    same = registered_at(path)
    if same is not None:
        raise inputs.InvalidInput(f"the table at {path} is already registered as {same.name!r}")
    engine_table = access.open_location(path)
    values = inputs.table_settings(data, table_latency=lambda: engine_table.default_data_latency)
    values = replace(values, carry_over=_carry_over_for(path, inputs.parse_carry_over(data.get("carry_over"))))
    table = RegisteredTable.objects.create(name=name, path=path, created_by=account(user), **asdict(values))
    audit(user, "register", table=table, outcome=Run.State.SUCCEEDED, detail={"path": path})
    request_run(table, Run.Kind.METRICS, user)  # a first sample, so the list shows it at once
    return table


def _carry_over_for(path: str, asked: str | None) -> str:
    """Object stores have no links: their tables carry over by (server-side) copy; symlink is refused."""
    from engine import is_object_store

    if not is_object_store(path):
        return asked or "symlink"
    if asked == "symlink":
        raise inputs.InvalidInput(f"carry_over symlink is impossible on object storage ({path}); use copy")
    return "copy"


def registered_at(path: str) -> RegisteredTable | None:
    """The table registered for this physical table, comparing canonical paths (`..`, symlinks and
    trailing slashes resolved, for rows stored before paths were canonical too)."""
    wanted = inputs.canonical_path(path)
    for table in RegisteredTable.objects.only("pk", "name", "path"):
        if inputs.canonical_path(table.path) == wanted:
            return table
    return None


def preview(table: RegisteredTable, user: AnyUser | None, args: inputs.TriggerArgs) -> dict[str, Any]:
    """The engine's dry-run plan for these arguments (writes nothing), summarised per partition."""
    kwargs = args.engine_kwargs()
    if kwargs["threshold"] is None and kwargs["data_latency"] is None and table.data_latency:
        kwargs["data_latency"] = table.data_latency
    plan = access.open_registered(table).plan_compaction(strategy="event_time", **kwargs).to_dict()
    audit(user, "preview", table=table, outcome="shown",
          detail={"threshold": plan.get("threshold"), "operations": len(plan.get("operations") or [])})
    return {"plan": plan, "partitions": partition_summary(plan)}


def preview_maintenance(table: RegisteredTable, user: AnyUser | None, kind: str) -> dict[str, Any]:
    """The engine's dry run of a clean or a recover (writes nothing), as the run would report it: what the
    operator confirms before the real run is queued (the CLI's --dry-run)."""
    from engine import TidemarkError

    engine_table = access.open_registered(table)   # the roots re-checked, as for every read
    try:
        result = engine_table.clean(dry_run=True) if kind == Run.Kind.CLEAN else engine_table.recover(dry_run=True)
    except TidemarkError as exc:
        raise inputs.InvalidInput(f"the {kind} dry run failed: {exc}") from None
    shown = result.to_dict()
    audit(user, f"preview.{kind}", table=table, outcome="shown", detail={"message": shown.get("message", "")[:200]})
    return shown


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


# ------------------------------------------------------------------------------------------ pending-plan admin

PLAN_ADMIN = (Run.Kind.VALIDATE, Run.Kind.UNSCHEDULE, Run.Kind.REPAIR)


def administer_plan(table: RegisteredTable, user: AnyUser | None, kind: str, data: dict[str, Any]) -> Run:
    """Queue Hudi CLI's validate / unschedule / repair of pending compaction `data["instant"]` (unschedule: of
    `file_group` only when given; unschedule and repair: `dry_run` lists the renames and changes nothing)."""
    if kind not in PLAN_ADMIN:
        raise ValueError(f"{kind!r} is not a pending-plan action")
    allowed = {"instant"} | ({"file_group", "dry_run"} if kind == Run.Kind.UNSCHEDULE else set()) \
        | ({"dry_run"} if kind == Run.Kind.REPAIR else set())
    unknown = {k for k in data if k not in allowed and k != "csrfmiddlewaretoken"}
    if unknown:
        raise inputs.InvalidInput(f"{kind} takes {', '.join(sorted(allowed))}; not {', '.join(sorted(unknown))}")
    params: dict[str, Any] = {"instant": inputs.parse_instant(data.get("instant"))}
    if kind == Run.Kind.UNSCHEDULE:
        params["file_group"] = inputs.parse_file_group(data.get("file_group"))
    if kind != Run.Kind.VALIDATE:
        params["dry_run"] = inputs.parse_flag(data.get("dry_run"), "dry_run")
    return request_run(table, kind, user, **params)


# ------------------------------------------------------------------------------------------ operator controls

CANCELLABLE_RUNNING = (Run.Kind.EXECUTE, Run.Kind.SCHEDULE_EXECUTE)
# A compaction run past its last file group: the engine no longer looks at the cancel flag, it commits.
_COMMITTING = Q(progress_unit="file groups", progress_total__gt=0, progress_done__gte=F("progress_total"))


class Conflict(inputs.InvalidInput):
    """The request is well-formed but the run's or table's state does not allow it (HTTP 409)."""


def cancel_run(user: AnyUser | None, run: Run) -> Run:
    """A queued run never starts; a running compaction stops at its next file-group boundary (the engine
    rolls its inflight plan back and the worker releases the lease). Other running kinds end on their own.

    Once a compaction has written its last file group the engine commits without looking again: the cancel is
    refused (409). One accepted just before the engine's last look shows on the run as `cancel_too_late`."""
    now = timezone.now()
    if Run.objects.filter(pk=run.pk, state=Run.State.QUEUED).update(
            state=Run.State.CANCELLED, finished_at=now, cancel_requested=True,
            error=f"cancelled by {actor_name(user)} before it started"):
        outcome: str = Run.State.CANCELLED
    elif run.kind in CANCELLABLE_RUNNING and Run.objects.filter(pk=run.pk, state=Run.State.RUNNING).exclude(
            _COMMITTING).update(cancel_requested=True):
        outcome = "cancel_requested"
    else:
        run.refresh_from_db()
        if run.state == Run.State.RUNNING and run.kind in CANCELLABLE_RUNNING:
            raise Conflict(f"run {run.pk} has written all {run.progress_total} of its file groups and is committing "
                           f"compaction {run.instant}: a cancel can no longer take effect")
        if run.state == Run.State.RUNNING:
            raise Conflict(f"run {run.pk} ({run.kind}) is running and cannot be cancelled: it ends on its own")
        raise Conflict(f"run {run.pk} is already {run.state}")
    audit(user, "cancel", table=run.table, run=run, outcome=outcome)
    run.refresh_from_db()
    return run


def set_paused(user: AnyUser | None, table: RegisteredTable, paused: bool) -> RegisteredTable:
    """Pause (or resume) the table's schedule and SLA auto-trigger; manual runs stay possible."""
    RegisteredTable.objects.filter(pk=table.pk).update(paused=paused)
    table.refresh_from_db()
    audit(user, "pause" if paused else "resume", table=table, outcome=Run.State.SUCCEEDED)
    return table


CLEAN_FIELDS = ("clean_policy", "clean_retained")


def update_settings(user: AnyUser | None, table: RegisteredTable, data: dict[str, Any]) -> RegisteredTable:
    """Edit schedule, SLA, data latency, carry-over and exact (fields absent from `data` keep their value),
    with the same validation as registration, and the table's clean policy and retention (`clean_policy`,
    `clean_retained`: Hudi's keys in its hoodie.properties, stored through the engine only when they change);
    the audit entry holds the old and new values."""
    current = {field: getattr(table, field) for field in inputs.TableSettings.FIELDS}
    clean = {k: data[k] for k in CLEAN_FIELDS if k in data}
    data = {k: v for k, v in data.items() if k not in CLEAN_FIELDS}
    unknown = set(data) - set(current)
    if unknown:
        raise inputs.InvalidInput(f"unknown settings: {', '.join(sorted(unknown))}; known: "
                                  f"{', '.join((*inputs.TableSettings.FIELDS, *CLEAN_FIELDS))}")
    merged = {**current, **data}
    values = asdict(inputs.table_settings(merged, table_latency=lambda: access.open_registered(table).default_data_latency))
    if "carry_over" in data:   # an object store has no links: symlink refused there, as at registration
        values["carry_over"] = _carry_over_for(table.path, inputs.parse_carry_over(data.get("carry_over")) or None)
    changed: dict[str, Any] = {k: {"from": current[k], "to": v} for k, v in values.items() if current[k] != v}
    hudi = _clean_settings_changes(table, clean) if clean else {}
    if hudi:   # checked in full above, so a refused form changes neither the table on storage nor the row
        _store_hudi_settings(table, {key: change["to"] for key, change in hudi.items()})
    changed.update(hudi)
    RegisteredTable.objects.filter(pk=table.pk).update(**values)
    table.refresh_from_db()
    audit(user, "settings", table=table, outcome=Run.State.SUCCEEDED, detail=changed)
    if hudi:   # hoodie.properties is no timeline change the change checks see: sample the table again now
        request_run(table, Run.Kind.METRICS, user)
    return table


def _clean_settings_changes(table: RegisteredTable, clean: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{Hudi key: {"from", "to"}} for the clean policy and its retention asked, against the table's
    hoodie.properties (a key it does not set counts as Hudi's default); {} when nothing changes."""
    from engine import WRITE_SETTINGS

    props = access.open_registered(table).config.props
    stored = {key: props.get(key) or WRITE_SETTINGS[key][1] for key in (POLICY_KEY, *RETAINED_KEYS.values())}
    policy = clean.get("clean_policy") or stored[POLICY_KEY]
    if policy not in RETAINED_KEYS:
        raise inputs.InvalidInput(f"clean_policy must be one of {', '.join(RETAINED_KEYS)}, got {policy!r}")
    asked = {POLICY_KEY: policy}
    retained = inputs.bounded_int(clean.get("clean_retained"), "clean_retained", maximum=1_000_000,
                                  unit="commits, file versions or hours")
    if retained is not None:
        asked[RETAINED_KEYS[policy]] = str(retained)
    return {key: {"from": stored[key], "to": value} for key, value in asked.items() if stored[key] != value}


def _store_hudi_settings(table: RegisteredTable, settings: dict[str, str]) -> None:
    """Write Hudi settings into the table's hoodie.properties through the engine (under its table lock)."""
    from engine import TidemarkError

    try:
        access.open_registered(table).update_settings(settings)
    except TidemarkError as exc:   # ConfigError, a lock not granted: the form says why, nothing was saved
        raise inputs.InvalidInput(f"could not store {', '.join(sorted(settings))} on the table: {exc}") from None


def unregister(user: AnyUser | None, table: RegisteredTable) -> None:
    """Forget the table (its runs, samples and lease go with it; the audit log keeps its name). Refused while
    one of its runs is queued or running. The table on storage is not touched."""
    active = table.runs.filter(state__in=(Run.State.QUEUED, Run.State.RUNNING)).first()
    if active is not None:
        raise Conflict(f"table {table.name} has run {active.pk} {active.state}: cancel it or wait before unregistering")
    audit(user, "unregister", table=None, outcome=Run.State.SUCCEEDED, detail={"table": table.name, "path": table.path})
    table.delete()
