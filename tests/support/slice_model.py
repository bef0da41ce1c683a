"""An in-memory model of an event-time MOR table, one record at a time, for the stateful model test.

The model keeps what a reader sees per file group (bucket): the base rows of the latest completed base
and the logs after it, each log a list of items in log order. Reads, compaction and rollback are written
here from the rules in docs/ARCHITECTURE.md ("Merge rules", compaction, rollback) as a plain scalar fold
per key, independently of the engine's vectorised code:

- the merge: a left fold over the logs per key (ordering ≥ the winner's replaces it, ties to the later;
  a delete without ordering value replaces anything, after it ordered deletes are ignored until the first
  record), then the winner meets the base row (a processing-time delete removes it, otherwise the greater
  ordering wins, ties to the log) — the rules tests/engine/read/test_merge_rules.py verifies against hudi 0.5.0;
- the event-time plan: per file group the prefix of logs up to the last one whose min event time is ≤ T
  or unknown (delete-only logs without ordering values, rollback command logs, masked logs, carry-forward
  logs holding deletes);
- the run: the prefix's winners go into the base, except what the carry-forward rules
  (engine/compaction/carry_forward.py's docstring) withhold or replay in the new slice's first log; in
  exact mode items with event time > T that a later on-time item does not always beat are replayed there;
- rollback: a deltacommit's items disappear (a rollback command log follows in every group it touched,
  or the group goes when the write created it and all else in it is dead); a compaction restores the
  groups it planned; both are refused when a later compaction planned over the groups.

Ordering and event time are the same field `ts` (epoch millis). Compaction forgets tombstones as Java's
does, so what a later write sees depends on where compactions cut: that is why the model keeps the
structure, not just a key → row map.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

PUT, DELETE, HARD = "put", "delete", "hard"   # HARD: a delete without ordering value ("processing time")
WRITE, CARRY, ROLLBACK = "write", "carry", "rollback"


@dataclass(frozen=True)
class Item:
    key: str
    kind: str             # PUT, DELETE or HARD
    ts: int | None        # ordering value (ms); None for HARD
    value: str | None = None
    event: int | None = None   # event time (ms) when it is not the ordering value (a table with both fields)

    @property
    def event_ms(self) -> int | None:
        """When it happened: its own event time, else its ordering value (ordering = event time); None unknown."""
        return self.event if self.event is not None else self.ts


@dataclass
class Log:
    origin: str           # the instant that wrote it (write, compaction, rollback)
    kind: str             # WRITE, CARRY or ROLLBACK
    items: list[Item]

    @property
    def min_event(self) -> int | None:
        """What the engine can tell of the log's min event time (None: unknown, "must compact"): data block
        headers, or a write's stats (ordered deletes carry event times there); nothing for a masked log,
        a rollback command log, a delete without ordering value, or a carry-forward log with deletes."""
        if not self.items or self.kind == ROLLBACK:
            return None
        if any(i.event_ms is None for i in self.items) or (self.kind == CARRY and any(i.kind != PUT for i in self.items)):
            return None
        return min(i.event_ms for i in self.items if i.event_ms is not None)


@dataclass
class Group:
    base: dict[str, Item] = field(default_factory=dict)   # key -> PUT item of the latest base file
    has_base: bool = False
    logs: list[Log] = field(default_factory=list)

    @property
    def exists(self) -> bool:
        return self.has_base or bool(self.logs)


def fold(items: list[Item]) -> tuple[Item | None, bool]:
    """The log winner of one key and whether it is a processing-time delete (kills the base row)."""
    winner: Item | None = None
    ignoring_ordered_deletes = False   # after a HARD delete until the first record
    for it in items:
        if it.kind == HARD:
            winner, ignoring_ordered_deletes = it, True
        elif ignoring_ordered_deletes:
            if it.kind == PUT:
                winner, ignoring_ordered_deletes = it, False
        elif winner is None or winner.ts is None or (it.ts is not None and it.ts >= winner.ts):
            winner = it
    return winner, winner is not None and winner.kind == HARD


def merge(base: Item | None, winner: Item | None, kills_base: bool) -> Item | None:
    """The row a reader returns for a base row and a log winner."""
    if winner is None:
        return base
    if kills_base:
        return None
    if base is None or (winner.ts is not None and base.ts is not None and winner.ts >= base.ts):
        return winner if winner.kind == PUT else None
    return base


def items_of(logs: list[Log]) -> list[Item]:
    return [it for log in logs for it in log.items]


def cut(logs: list[Log], threshold: int) -> int:
    """How many logs of a slice the event-time strategy compacts (a prefix)."""
    n = 0
    for i, log in enumerate(logs):
        if log.min_event is None or log.min_event <= threshold:
            n = i + 1
    return n


@dataclass
class Plan:
    instant: str
    threshold: int
    exact: bool
    cuts: dict[int, int]                  # bucket -> number of logs compacted
    saved: dict[int, Group]               # the planned groups as they were (for a rollback)
    replaced: set[tuple[str, str]] = field(default_factory=set)   # (file id, base instant) of the slices it replaces
    writes_into_slice: set[str] = field(default_factory=set)   # live writes into its planned groups
    completed: bool = False
    cleaned_since: bool = False


class TableModel:
    def __init__(self, buckets: int, logs_deleted_on_rollback: bool = False) -> None:
        # Table version 8: a rolled-back write's logs (named by it, holding only its blocks) are deleted instead
        # of masked by a rollback command log.
        self.logs_deleted_on_rollback = logs_deleted_on_rollback
        self.groups = {b: Group() for b in range(buckets)}
        self.plans: list[Plan] = []       # compactions on the timeline, oldest first
        self.writes: list[tuple[str, set[int]]] = []   # live deltacommits and the groups they touched
        self.overwritten = False          # a completed overwrite replaced every group (the table has a schema)

    # -------------------------------------------------------------------------------- reads

    def snapshot(self) -> dict[str, Item]:
        out: dict[str, Item] = {}
        for g in self.groups.values():
            per_key: dict[str, list[Item]] = {}
            for it in items_of(g.logs):
                per_key.setdefault(it.key, []).append(it)
            for key in set(g.base) | set(per_key):
                row = merge(g.base.get(key), *fold(per_key.get(key, [])))
                if row is not None:
                    out[key] = row
        return out

    def read_optimized(self) -> dict[str, Item]:
        return {k: it for g in self.groups.values() for k, it in g.base.items()}

    @property
    def pending(self) -> Plan | None:
        return next((p for p in self.plans if not p.completed), None)

    # -------------------------------------------------------------------------------- writes

    def write(self, instant: str, by_bucket: dict[int, list[Item]]) -> None:
        for b, items in by_bucket.items():
            self.groups[b].logs.append(Log(instant, WRITE, list(items)))
        self.writes.append((instant, set(by_bucket)))
        for plan in self.plans:
            if set(by_bucket) & set(plan.cuts):
                plan.writes_into_slice.add(instant)

    def rollback_write_allowed(self, instant: str) -> bool:
        """Refused when a later compaction planned over a file group the write touched."""
        touched = dict(self.writes)[instant]
        return not any(p.instant > instant and set(p.cuts) & touched for p in self.plans)

    def rollback_write(self, instant: str, rollback_instant: str) -> None:
        touched = dict(self.writes)[instant]
        self.writes = [w for w in self.writes if w[0] != instant]
        for b in touched:
            g = self.groups[b]
            # Created by it: every other log is dead (a write rolled back before, or a rollback command).
            created = not g.has_base and all(log.origin == instant or log.kind == ROLLBACK
                                             or (log.kind == WRITE and not log.items) for log in g.logs)
            if created:
                self.groups[b] = Group()
                continue
            if self.logs_deleted_on_rollback:
                g.logs = [log for log in g.logs if log.origin != instant]
                continue
            for log in g.logs:
                if log.origin == instant:
                    log.items = []       # masked: stays on disk, holds nothing committed
            g.logs.append(Log(rollback_instant, ROLLBACK, []))
        for plan in self.plans:
            plan.writes_into_slice.discard(instant)

    # -------------------------------------------------------------------------------- compaction

    @property
    def has_schema(self) -> bool:
        """A completed write or compaction is on the timeline (rolled-back writes leave none)."""
        return bool(self.writes) or any(p.completed for p in self.plans) or self.overwritten

    def schedule(self, instant: str | None, threshold: int, exact: bool,
                 replaced: set[tuple[str, str]] | None = None) -> dict[int, int]:
        if not self.has_schema:
            return {}
        cuts = {b: n for b, g in self.groups.items() if (n := cut(g.logs, threshold))}
        if instant is not None and cuts:
            self.plans.append(Plan(instant, threshold, exact, cuts, {b: copy.deepcopy(self.groups[b]) for b in cuts},
                                   replaced or set()))
        return cuts

    def run(self, instant: str) -> int:
        """Apply compaction `instant`; returns how many items its carry-forward logs replay."""
        plan = next(p for p in self.plans if p.instant == instant)
        carried = 0
        before = self.snapshot()
        for b, n in plan.cuts.items():
            g = self.groups[b]
            old_base = dict(g.base)
            carry = compact_group(g, g.logs[:n], g.logs[n:], plan.threshold if plan.exact else None)
            if plan.exact:   # the RO view gains nothing that happened after T
                gained = [it for k, it in g.base.items() if old_base.get(k) != it]
                assert all(it.event_ms is None or it.event_ms <= plan.threshold for it in gained), gained
            g.has_base = True
            g.logs = ([Log(instant, CARRY, carry)] if carry else []) + g.logs[n:]
            carried += len(carry)
        plan.completed = True
        # The model's own compaction rules must keep what a reader sees (docs/ARCHITECTURE.md invariant 3).
        assert self.snapshot() == before, "the model's compaction changed the snapshot"
        return carried

    def rollback_compaction_allowed(self, instant: str) -> bool:
        plan = next(p for p in self.plans if p.instant == instant)
        # Table version 8 names a log by its write: one written while the plan is pending falls back into the
        # previous slice by its completion time when the plan goes, so only a completed plan is held by it.
        held = bool(plan.writes_into_slice) and (plan.completed or not self.logs_deleted_on_rollback)
        return plan is self.plans[-1] and not held and not plan.cleaned_since

    def rollback_compaction(self, instant: str) -> None:
        plan = self.plans.pop()
        assert plan.instant == instant
        if not plan.completed and self.logs_deleted_on_rollback:
            # v8: a pending plan changed nothing yet, and the logs written since it stay where they are. (v6 restores
            # the groups as planned: the dead logs a rolled-back write left in slice C go with the plan.)
            return
        for b, saved in plan.saved.items():
            self.groups[b] = copy.deepcopy(saved)

    def overwrite(self, by_bucket: dict[int, list[Item]]) -> None:
        """insert_overwrite(_table) of an unpartitioned table: every live group is replaced; each bucket of the
        input becomes a new group with one base file (one row per key). The replaced groups' history (writes,
        compactions) can no longer be rolled back through them, so the model forgets it."""
        for b in self.groups:
            items = by_bucket.get(b, [])
            self.groups[b] = Group({it.key: it for it in items}, bool(items), [])
        self.writes = []
        self.plans = []
        self.overwritten = True

    def cleaned(self, slices: set[tuple[str, str]]) -> None:
        """A clean deleted files of these (file id, base instant) slices: a completed compaction that replaced
        one of them can no longer be rolled back."""
        for plan in self.plans:
            if plan.completed and plan.replaced & slices:
                plan.cleaned_since = True


def compact_group(g: Group, compacted: list[Log], rest: list[Log], threshold: int | None) -> list[Item]:
    """Fold the compacted logs into `g.base`; returns the carry-forward log's items."""
    late_items: list[Item] = []
    per_key: dict[str, list[Item]] = {}
    for it in items_of(compacted):
        per_key.setdefault(it.key, []).append(it)
    winners: dict[str, tuple[Item, bool]] = {}
    for key, items in per_key.items():
        late_items += _spilled(items, threshold)
        late = [_late(it, threshold) for it in items]
        on_time = [it for it, is_late in zip(items, late) if not is_late]
        winner, kills = fold(on_time)
        if winner is not None:
            winners[key] = (winner, kills)
    # Keep the spill in log order across keys.
    order = {id(it): n for n, it in enumerate(items_of(compacted))}
    late_items.sort(key=lambda it: order[id(it)])
    following = late_items + items_of(rest)
    carried: list[Item] = []
    for key, (winner, kills) in winners.items():
        withhold, carry = _carry_decision(key, winner, kills, g.base.get(key), following)
        if carry or withhold:
            carried.append(winner)
        if not withhold:
            row = merge(g.base.get(key), winner, kills)
            if row is None:
                g.base.pop(key, None)
            else:
                g.base[key] = row
    return carried + late_items


def _late(it: Item, threshold: int | None) -> bool:
    """Exact mode keeps out what happened after T; an item of unknown event time counts as on time."""
    return threshold is not None and it.event_ms is not None and it.event_ms > threshold


def _spilled(items: list[Item], threshold: int | None) -> list[Item]:
    """One key's compacted items that exact mode replays in the carry-forward log, in log order.

    A late ordered delete after a processing-time delete of its key, before any record, is dropped: the fold
    ignores it whatever follows. A late item is dropped when a later on-time item makes it irrelevant: a
    processing-time delete always does; a record or ordered delete of ordering ≥ its own does only when the key has no processing-time
    delete here (after one, a record ends "ignore ordered deletes", so the late item still matters). For a
    key with a processing-time delete here, every on-time item after the first kept late item is replayed
    too, so the key folds in its original order (without one, the greatest ordering wins whatever the order).
    """
    late = [_late(it, threshold) for it in items]
    has_hard = any(it.kind == HARD for it in items)

    def ignored(i: int) -> bool:   # an ordered delete after a processing-time delete, before any record
        before = [it.kind for it in items[:i] if it.kind != DELETE]
        return items[i].kind == DELETE and bool(before) and before[-1] == HARD

    def dominated(i: int) -> bool:
        return ignored(i) or any(not late[j] and (items[j].kind == HARD or (not has_hard and items[j].ts >= items[i].ts))
                   for j in range(i + 1, len(items)))

    kept = [late[i] and not dominated(i) for i in range(len(items))]
    first = next((i for i, k in enumerate(kept) if k), len(items))
    return [it for i, it in enumerate(items) if kept[i] or (has_hard and not late[i] and i > first)]


def _carry_decision(key: str, winner: Item, kills: bool, base: Item | None,
                    following: list[Item]) -> tuple[bool, bool]:
    """(withhold, carry) of a compacted winner, given the items of its key that follow it in slice C."""
    mine = [it for it in following if it.key == key]
    records = [it.ts for it in mine if it.kind == PUT]
    if not records:
        return False, False
    low = min(records)
    if kills:
        withhold = base is not None and base.ts > low
        return withhold, not withhold
    first_hard = next((i for i, it in enumerate(mine) if it.kind == HARD), None)
    after_hard = [it.ts for i, it in enumerate(mine) if it.kind == PUT and first_hard is not None and i > first_hard]
    withhold = bool(after_hard) and min(after_hard) < winner.ts
    carry = not withhold and winner.kind == DELETE and low < winner.ts
    return withhold, carry
