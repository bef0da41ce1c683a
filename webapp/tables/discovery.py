"""Bulk registration: every Hudi table under a root, in one action (the page, the API-less CLI
`python manage.py tidemark_discover ROOT`).

The engine finds the tables (`Table.discover`: folders holding `.hoodie/hoodie.properties`, never the
metadata table under `.hoodie/metadata`); this module decides, per table found:
- "already registered": a registered table has this path — nothing changes (so discovery is idempotent:
  running it again registers only what is new);
- "refused": the derived name is taken by another path or by an earlier table of the same run, or the
  engine cannot open the table (unsupported version, unreadable properties) — with the reason;
- "new": registered (unless a dry run), audited like a single registration, and its first change check
  and sample queued on the sampling queue.
Names are the table's path relative to the root, slugified ("sales/orders" → "sales-orders"), after an
optional prefix; the root itself, when it is a table, is named after its folder.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from webapp.accounts.roles import AnyUser
from webapp.tables import inputs
from webapp.tables.models import AuditEvent, RegisteredTable, Run, SamplingState
from webapp.tables.services import account, actor_name

log = logging.getLogger(__name__)

NAME_MAX = 100
BATCH = 500


@dataclass
class Candidate:
    path: str
    name: str
    outcome: str          # new | registered | already registered | refused
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "outcome": self.outcome, "reason": self.reason or None}


@dataclass
class Defaults:
    """Registration settings applied to every new table of a discovery."""

    schedule_minutes: int | None = None
    data_latency: str = ""
    freshness_sla_minutes: int | None = None
    carry_over: str = "symlink"

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Defaults:
        return cls(schedule_minutes=inputs.bounded_int(data.get("schedule_minutes"), "schedule_minutes"),
                   data_latency=inputs.parse_latency(data.get("data_latency")),
                   freshness_sla_minutes=inputs.bounded_int(data.get("freshness_sla_minutes"),
                                                                "freshness_sla_minutes"),
                   carry_over=inputs.parse_carry_over(data.get("carry_over")) or "symlink")


@dataclass
class Report:
    root: str
    dry_run: bool
    candidates: list[Candidate] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(c.outcome == outcome for c in self.candidates)

    def summary(self) -> dict[str, int]:
        return {"found": len(self.candidates), "new": self.count("new"), "registered": self.count("registered"),
                "already_registered": self.count("already registered"), "refused": self.count("refused")}

    def to_dict(self) -> dict[str, Any]:
        return {"root": self.root, "dry_run": self.dry_run, **self.summary(),
                "tables": [c.to_dict() for c in self.candidates]}


def table_name(relative: str, root: str, prefix: str = "") -> str:
    base = os.path.basename(root.rstrip(os.sep)) if relative in (".", "") else relative.replace(os.sep, "-")
    return slugify(f"{prefix}{base}")[:NAME_MAX]


def discover(user: AnyUser | None, root_raw: Any, *, dry_run: bool, prefix: str = "", defaults: Defaults | None = None) -> Report:
    """Find the tables under `root_raw` (an allowed root or a folder under one) and register the new ones."""
    from engine import Table

    root = inputs.table_path(root_raw)
    if not re.fullmatch(r"[-a-z0-9_]*", prefix):
        raise inputs.InvalidInput(f"prefix {prefix!r} must be a slug (lower-case letters, digits, - and _)")
    report = Report(root, dry_run)
    known_paths = dict(RegisteredTable.objects.values_list("path", "name"))
    taken = dict(RegisteredTable.objects.values_list("name", "path"))
    for found in Table.discover(root):
        report.candidates.append(_judge(found.path, table_name(found.relative, root, prefix), known_paths, taken))
    if not dry_run:
        _register(account(user), report, defaults or Defaults())
    return report


def _judge(path: str, name: str, known_paths: dict[str, str], taken: dict[str, str]) -> Candidate:
    from engine import Table, TidemarkError

    path = inputs.canonical_path(path)   # a URI stays one (realpath would take it for a relative folder)
    if path in known_paths:
        return Candidate(path, known_paths[path], "already registered")
    if not name:
        return Candidate(path, name, "refused", "no usable name can be derived from its path; register it by hand")
    if name in taken:
        return Candidate(path, name, "refused", f"the name {name} is taken by the table at {taken[name]}")
    try:
        Table.open(path)
    except TidemarkError as exc:
        return Candidate(path, name, "refused", f"the engine cannot open it: {exc}")
    taken[name] = path
    return Candidate(path, name, "new")


def _register(user: User | None, report: Report, defaults: Defaults) -> None:
    new = [c for c in report.candidates if c.outcome == "new"]
    ids: list[int] = []
    for i in range(0, len(new), BATCH):
        ids.extend(_register_batch(user, report.root, new[i:i + BATCH], defaults))
    AuditEvent.objects.create(at=timezone.now(), user=user, actor=actor_name(user), action="discover",
                              outcome=Run.State.SUCCEEDED, detail={"root": report.root, **report.summary()})
    if ids:
        transaction.on_commit(lambda: _queue_first_samples(ids))


def _register_batch(user: User | None, root: str, batch: list[Candidate], defaults: Defaults) -> list[int]:
    """A batch in three bulk inserts (tables, their sampling states, their audit events) in one transaction;
    when a name was registered meanwhile, the batch again one table at a time, so only that one is refused."""
    try:
        with transaction.atomic():
            return _register_bulk(user, root, batch, defaults)
    except IntegrityError:
        with transaction.atomic():
            return _register_each(user, root, batch, defaults)


def _carry_over(path: str, defaults: Defaults) -> str:
    """The default carry-over, but copy on an object store (it has no links)."""
    from engine import is_object_store

    return "copy" if is_object_store(path) else defaults.carry_over


def _register_bulk(user: User | None, root: str, batch: list[Candidate], defaults: Defaults) -> list[int]:
    now = timezone.now()
    tables = RegisteredTable.objects.bulk_create([
        RegisteredTable(name=c.name, path=c.path, created_by=user, created_at=now,
                        schedule_minutes=defaults.schedule_minutes, data_latency=defaults.data_latency,
                        freshness_sla_minutes=defaults.freshness_sla_minutes,
                        carry_over=_carry_over(c.path, defaults))
        for c in batch])
    if any(t.pk is None for t in tables):   # a backend that cannot return ids: look them up
        ids = dict(RegisteredTable.objects.filter(name__in=[c.name for c in batch]).values_list("name", "pk"))
        for t in tables:
            t.pk = ids[t.name]
    # bulk_create sends no post_save: the rows webapp.tables.latest would have made
    SamplingState.objects.bulk_create([SamplingState(table_id=t.pk) for t in tables], ignore_conflicts=True)
    AuditEvent.objects.bulk_create([
        AuditEvent(at=now, user=user, actor=actor_name(user), action="register", table=t, outcome=Run.State.SUCCEEDED,
                   detail={"path": t.path, "discovered_under": root}) for t in tables])
    for c in batch:
        c.outcome = "registered"
    return [t.pk for t in tables]


def _register_each(user: User | None, root: str, batch: list[Candidate], defaults: Defaults) -> list[int]:
    ids = []
    for candidate in batch:
        try:
            with transaction.atomic():
                table = RegisteredTable.objects.create(
                    name=candidate.name, path=candidate.path, created_by=user,
                    schedule_minutes=defaults.schedule_minutes, data_latency=defaults.data_latency,
                    freshness_sla_minutes=defaults.freshness_sla_minutes,
                    carry_over=_carry_over(candidate.path, defaults))
                AuditEvent.objects.create(at=timezone.now(), user=user, actor=actor_name(user), action="register",
                                          table=table, outcome=Run.State.SUCCEEDED,
                                          detail={"path": candidate.path, "discovered_under": root})
        except IntegrityError:   # registered by someone else between our check and now
            candidate.outcome, candidate.reason = "refused", f"the name {candidate.name} was registered meanwhile"
            continue
        candidate.outcome = "registered"
        ids.append(table.pk)
    return ids


def _queue_first_samples(ids: list[int]) -> None:
    """The new tables' first change check and sample, now rather than at the next cycle (best effort: the
    registration is committed, and beat's next cycle samples them anyway)."""
    from webapp.dispatch import send_samples

    try:
        send_samples(ids)
    except Exception:
        log.exception("could not queue the first samples of %d discovered tables; the next sampling cycle "
                      "takes them", len(ids))
