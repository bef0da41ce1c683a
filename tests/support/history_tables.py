"""A table with a known write history around a partial event-time compaction, and its model per instant.

Two file groups (bucket index), ordering field `seq` rising with every write (so the latest write of a key
wins), event times on 2024-01-01..04. The compaction's threshold falls between day 2 and day 3: logs whose
min event time is on day 1-2 are compacted, the day-3 log (and, being after it, the delete log) is carried
over; in exact mode the day-3 record of the mixed log is kept out of the base (carry-forward log). Writes
after the compaction land in slice C. `model_as_of` / `model_changes` give what a reader must return.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine import Table

THRESHOLD = "2024-01-02T12:00:00Z"

# (operation, [(id, event day)]): ids k0..k7 spread over both buckets.
HISTORY: list[tuple[str, list[tuple[str, str]]]] = [
    ("upsert", [(f"k{i}", "01") for i in range(8)]),                 # W0: everything, day 1
    ("upsert", [("k0", "02"), ("k1", "02"), ("k5", "03")]),           # W1: day 2 (+ one day-3 record)
    ("upsert", [("k1", "03"), ("k2", "03"), ("k6", "03")]),           # W2: day 3 only -> carried over
    ("delete", [("k3", "01"), ("k7", "01")]),                        # W3: deletes (after W2: carried too)
    ("compaction", []),
    ("upsert", [("k0", "04"), ("k3", "04"), ("k8", "04")]),           # W4: after C, k3 comes back
    ("upsert", [("k2", "02"), ("k5", "02")]),                        # W5: late updates after C
    ("delete", [("k6", "02")]),                                      # W6: delete of a carried record
]


@dataclass
class Step:
    instant: str
    operation: str
    seq: int
    keys: list[str] = field(default_factory=list)


@dataclass
class History:
    table: Table
    steps: list[Step]
    carry_over: str
    exact: bool

    @property
    def instants(self) -> list[str]:
        return [s.instant for s in self.steps]

    @property
    def compaction(self) -> str:
        return next(s.instant for s in self.steps if s.operation == "compaction")


def _batch(tmp: Path, seq: int, rows: list[tuple[str, str]]) -> str:
    src = tmp / f"w{seq}.jsonl"
    src.write_text("".join(json.dumps({"id": k, "seq": seq, "ts": f"2024-01-{day}T06:00:00Z", "val": f"{k}@{seq}"})
                           + "\n" for k, day in rows))
    return str(src)


def build_history(tmp: Path, carry_over: str = "symlink", exact: bool = False,
                  settings: Mapping[str, str] | None = None) -> History:
    """Run HISTORY into a new table under `tmp` (Spark is needed for the compaction)."""
    table = Table.create(str(tmp / "t"), name="hist", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "2", **(settings or {})})
    steps: list[Step] = []
    for seq, (operation, rows) in enumerate(HISTORY):
        if operation == "compaction":
            plan = table.schedule_compaction(threshold=THRESHOLD, carry_over=carry_over, exact=exact)
            assert plan.instant is not None, plan.message
            steps.append(Step(table.run_compaction(plan.instant).instant, operation, seq))
            continue
        result = table.write(_batch(tmp, seq, rows), operation)
        steps.append(Step(result.instant, operation, seq, [k for k, _ in rows]))
    return History(table, steps, carry_over, exact)


def _apply(state: dict[str, dict], step: Step) -> None:
    for key in step.keys:
        if step.operation == "delete":
            state.pop(key, None)
        else:
            state[key] = {"seq": step.seq, "_hoodie_commit_time": step.instant}


def model_as_of(history: History, instant: str) -> dict[str, dict]:
    """{record key: {seq, commit time}} of the table as of `instant` (writes with timestamp ≤ instant)."""
    state: dict[str, dict] = {}
    for step in history.steps:
        if step.instant <= instant:
            _apply(state, step)
    return state


def model_changes(history: History, begin: str | None, end: str) -> dict[str, dict]:
    """The latest version of every key among the writes in (begin, end]; a key whose latest change there is
    a delete is absent (as hudi-rs returns it: no tombstones)."""
    state: dict[str, dict] = {}
    for step in history.steps:
        if (begin is None or step.instant > begin) and step.instant <= end:
            _apply(state, step)
    return state


def versions(rows: list[dict]) -> dict[str, dict]:
    """A result's rows as {record key: {seq, commit time}}, failing on a duplicate key."""
    out = {r["_hoodie_record_key"]: {"seq": r["seq"], "_hoodie_commit_time": r["_hoodie_commit_time"]}
           for r in rows}
    assert len(out) == len(rows), f"duplicate keys: {sorted(r['_hoodie_record_key'] for r in rows)}"
    return out
