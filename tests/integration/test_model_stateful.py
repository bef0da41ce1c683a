"""Randomized stateful test (issue 9): sequences of writes, compactions, cleans, rollbacks and recovers
against the in-memory model of tests/support/slice_model.py, with hudi 0.5.0 reading every step.

Each hypothesis example is one sequence on a fresh two-bucket table (keys k0..k5, ordering = event time
`ts` in whole seconds so CSV/JSONL spell them exactly). Rules:
- write: upsert / insert / delete with ordering values / delete without, 1–5 distinct keys, event times
  anywhere in a 30 s window (so late rows, ties and out-of-order deletes are common), from Parquet in ms
  or µs, CSV or JSONL (the first write fixes the table's unit, later ones are converted to it);
- schedule: event_time with a threshold in the data's window, carry-over symlink or copy, exact or not
  (the plan must compact exactly the model's log prefixes; while a plan is pending it must be refused);
- run, clean (either policy), rollback of the latest deltacommit or the latest compaction (refusals are
  allowed exactly where the model says a later instant depends on it, and then change nothing), recover
  (must find nothing to do);
- damage (issue 12): a committed block of the latest slices gets its header (`#XUDI#`) or its first record's
  length overwritten; a full read must fail naming the file, hudi 0.5.0 must fail or agree, a compaction must
  refuse (or fail and roll its plan back), a clean must keep a damaged copy's original; then the bytes are
  repaired and the model must hold again — nothing folded or cleaned away meanwhile;
- kills (issue 12): a write or a clean dies at a random fault point (`TIDEMARK_FAULT=…:abort`, in-process: no
  `except` handler of the operation runs), then `recover`; reads during a killed clean already equal the model;
- time travel to a completed write or compaction: the model's snapshot of that moment, and hudi 0.5.0's
  as-of read (a refusal only once a clean deleted a slice it needs); insert_overwrite (refused while a
  compaction is pending; otherwise every group replaced by the input's rows).
Every run publishes a completion time ≥ T; the model checks that its own compaction keeps the snapshot and
that an exact one adds nothing after T to the base. `OrderingApartSequences` runs the same steps (but damage and kills) on a table
whose ordering field `seq` is not its event-time field `ts` (a quarter of the profile's sequences): deletes carry
event times with and without ordering values, so one delete write often straddles an exact compaction's T.
After every step: our snapshot == the model's, our RO == the model's base rows, and — whenever no write has
gone into a pending compaction's slice (hudi 0.5.0 does not read those until the compaction completes) —
hudi 0.5.0's snapshot and RO equal ours.

Parquet writes use the in-process stand-in for Spark's scheduler (tests/support/inline_spark.py), compaction runs
the in-process runner (file groups on threads, as `tidemark compaction run` runs a small plan); CSV/JSONL writes
need the real session (their rows become a DataFrame). Profiles (tests/conftest.py):
`ci` (default; derandomized, a fixed number of sequences) and `soak` (TIDEMARK_MODEL_EXAMPLES sequences,
random), which bench/bench_model_sequences.py runs.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from engine import Table, logformat
from engine.compaction import run_compaction
from engine.errors import ConfigError, CorruptLogBlockError, Refused
from engine.index.bucket_hash import bucket_ids
from engine.io import faults
from engine.io.naming import parse_base_file_name, parse_log_file_name
from engine.read.query import QuerySpec, read_arrow
from engine.results import to_ms
from engine.services.recovery import recover as recover_table
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from engine.write.pipeline import write_file
from tests.support.inline_spark import InlineSpark
from tests.support.oracle import hudi_read
from tests.support.slice_model import DELETE, HARD, PUT, Item, TableModel

BUCKETS = 2
KEYS = [f"k{i}" for i in range(6)]
BUCKET_OF = dict(zip(KEYS, (int(b) for b in bucket_ids(pa.array(KEYS), BUCKETS))))
E0 = int(dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
SECONDS = 30
FORMATS = ["parquet_ms", "parquet_us", "csv", "jsonl"]
OPERATIONS = ["upsert", "insert", "delete_ordered", "delete_unordered"]
OUTCOMES: Counter[str] = Counter()   # what the sequences exercised, printed at the end (pytest -s)
# CSV/JSONL rows become a Spark DataFrame (~0.4 s a write): at most this many per sequence, the rest of the
# drawn text writes go as Parquet (counted under their real format).
TEXT_WRITES_PER_SEQUENCE = int(os.environ.get("TIDEMARK_MODEL_TEXT_WRITES", "1"))
OVERWRITE_AFTER_WRITES = 3   # live writes before an insert_overwrite may come
ROWS = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, SECONDS)), min_size=1, max_size=5,
                unique_by=lambda r: r[0])


def ms(second: int) -> int:
    return E0 + second * 1000


def iso(second: int) -> str:
    return dt.datetime.fromtimestamp(ms(second) / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def as_rows(table: pa.Table) -> dict[str, tuple[int, str]]:
    """id -> (ts in epoch ms, v) of a query result (ours or hudi's); duplicate keys fail."""
    if table.num_columns == 0 or table.num_rows == 0:
        return {}
    ts = table.column("ts").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    out = dict(zip(table.column("id").to_pylist(), zip(ts, table.column("v").to_pylist())))
    assert len(out) == table.num_rows, "duplicate keys"
    return out


def slice_of(file_name: str) -> tuple[str, str]:
    """(file id, base instant) of a base or log file."""
    name = os.path.basename(file_name)
    base = parse_base_file_name(name)
    if base is not None:
        return base.file_id, base.instant
    log = parse_log_file_name(name)
    return (log.file_id, log.base_instant) if log is not None else ("", "")


def model_rows(rows: dict[str, Item]) -> dict[str, tuple[int, str]]:
    return {k: (it.ts, it.value) for k, it in rows.items() if it.ts is not None and it.value is not None}


class TableSequences(RuleBasedStateMachine):
    """One table, one model; Spark (started on first need) only for CSV/JSONL writes."""

    spark_factory: Callable[[], Any] | None = None
    ordering_field = "ts"
    table_version = 6
    row_view = staticmethod(as_rows)        # a query result as the model's rows
    model_view = staticmethod(model_rows)

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="model-")
        self.path = os.path.join(self.dir, "t")
        self.table = Table.create(self.path, name="m", record_keys=["id"], ordering_field=self.ordering_field,
                                  event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": str(BUCKETS)},
                                  table_version=self.table_version)
        self.as_of: dict[str, dict] = {}     # completed instant -> the snapshot a time travel to it must return
        self.planned_view: dict[str, dict] = {}   # pending compaction -> the snapshot when it was planned
        self.model = TableModel(BUCKETS, logs_deleted_on_rollback=self.table_version >= 8)
        self.inputs = 0
        self.text_writes = 0
        self.late_bound: int | None = None   # the last threshold scheduled, in seconds
        self.slice_written = False   # a write went into the pending compaction's slice: hudi lags until it runs

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------------------------ inputs

    def _columns(self, op: str, rows: list[tuple], label: str) -> dict[str, list]:
        """Input columns of a write; rows are (key, second)."""
        cols: dict[str, list] = {"id": [r[0] for r in rows]}
        if op != "delete_unordered":
            cols["ts"] = [r[1] for r in rows]
        if op in ("upsert", "insert", "insert_overwrite"):
            cols["v"] = [f"{label}.{r[0]}" for r in rows]
        return cols

    def _item(self, kind: str, row: tuple, label: str) -> Item:
        key, second = row[0], row[1]
        return Item(key, kind, None if kind == HARD else ms(second), f"{label}.{key}" if kind == PUT else None)

    def _input(self, fmt: str, op: str, rows: list[tuple], label: str) -> str:
        self.inputs += 1
        name = os.path.join(self.dir, f"in{self.inputs}")
        cols = self._columns(op, rows, label)
        if fmt.startswith("parquet"):
            unit = "ms" if fmt == "parquet_ms" else "us"
            data = {c: (pa.array([ms(s) * (1 if unit == "ms" else 1000) for s in v], pa.int64())
                        .cast(pa.timestamp(unit, tz="UTC")) if c == "ts" else v) for c, v in cols.items()}
            pq.write_table(pa.table(data), name + ".parquet")
            return name + ".parquet"
        text = [{c: (iso(v[i]) if c == "ts" else v[i]) for c, v in cols.items()} for i in range(len(rows))]
        if fmt == "csv":
            lines = [",".join(cols)] + [",".join(str(r[c]) for c in cols) for r in text]
            with open(name + ".csv", "w") as fh:
                fh.write("\n".join(lines) + "\n")
            return name + ".csv"
        with open(name + ".jsonl", "w") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in text))
        return name + ".jsonl"

    def _write(self, fmt: str, op: str, rows: list[tuple[str, int]]) -> None:
        if not self.model.has_schema:
            op = "upsert"                  # every write rolled back: the table has no schema again
        if not fmt.startswith("parquet"):
            if self.text_writes >= TEXT_WRITES_PER_SEQUENCE:
                fmt = "parquet_us" if fmt == "jsonl" else "parquet_ms"   # each costs a Spark job
            self.text_writes += 1
        label = f"w{self.inputs + 1}"
        source = self._input(fmt, op, rows, label)
        factory = type(self).spark_factory
        assert factory is not None
        spark = InlineSpark() if fmt.startswith("parquet") else factory()
        operation = "delete" if op.startswith("delete") else op
        instant = write_file(self.path, source, operation, spark=spark).instant
        kind = {"delete_ordered": DELETE, "delete_unordered": HARD}.get(op, PUT)
        by_bucket: dict[int, list[Item]] = {}
        for row in rows:
            by_bucket.setdefault(BUCKET_OF[row[0]], []).append(self._item(kind, row, label))
        pending = self.model.pending
        if pending is not None and set(by_bucket) & set(pending.cuts):
            self.slice_written = True
        self.model.write(instant, by_bucket)
        self._remember(instant)
        OUTCOMES[f"write {op} {fmt}" + (" into a pending slice" if self.slice_written else "")] += 1

    # ------------------------------------------------------------------------------------ rules

    @initialize(fmt=st.sampled_from(FORMATS), rows=ROWS)
    def first_write(self, fmt, rows):
        """The first write is an upsert: it gives the table its schema (and its timestamp unit)."""
        self._write(fmt, "upsert", rows)

    @rule(fmt=st.sampled_from(FORMATS), op=st.sampled_from(OPERATIONS), rows=ROWS)
    def write(self, fmt, op, rows):
        self._write(fmt, op, rows)

    @precondition(lambda self: self.late_bound is not None)
    @rule(fmt=st.sampled_from(FORMATS), op=st.sampled_from(OPERATIONS), data=st.data())
    def late_write(self, fmt, op, data):
        """Rows at or before the last compaction threshold: the data the RO guarantee has to hear about."""
        late = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, max(0, self.late_bound))), min_size=1,
                        max_size=5, unique_by=lambda r: r[0])
        self._write(fmt, op, data.draw(late))

    @rule(threshold=st.integers(-1, SECONDS + 1), carry_over=st.sampled_from(["symlink", "copy"]), exact=st.booleans())
    def schedule(self, threshold, carry_over, exact):
        self._schedule(threshold, carry_over, exact)

    @precondition(lambda self: self.model.pending is None)
    @rule(threshold=st.integers(-1, SECONDS + 1), carry_over=st.sampled_from(["symlink", "copy"]), exact=st.booleans())
    def compact(self, threshold, carry_over, exact):
        """Schedule and run at once (the common case; `schedule` + `run` leave a window for writes)."""
        if self._schedule(threshold, carry_over, exact):
            self.run()

    def _schedule(self, threshold: int, carry_over: str, exact: bool) -> bool:
        if self.model.pending is not None:
            with self.unchanged():
                with pytest.raises(Refused):
                    self.table.schedule_compaction(strategy="event_time", threshold=ms(threshold),
                                                   carry_over=carry_over, exact=exact)
            OUTCOMES["schedule refused (one pending)"] += 1
            return False
        plan = self.table.schedule_compaction(strategy="event_time", threshold=ms(threshold), carry_over=carry_over,
                                              exact=exact)
        replaced = {(op.file_id, op.base_instant or "") for op in plan.operations}
        replaced |= {slice_of(c.target) for op in plan.operations for c in op.logs_carried}
        expected = self.model.schedule(plan.instant, ms(threshold), exact, replaced)
        planned = {int(op.file_id[:8]): len(op.logs_compacted) for op in plan.operations}
        assert planned == expected, (plan.state, planned, expected)
        assert (plan.state == "nothing_to_do") == (not expected)
        if expected:
            assert plan.exact is exact and plan.carry_over == carry_over
        if expected:
            self.planned_view[plan.instant] = self.model_view(self.model.snapshot())
        OUTCOMES[f"schedule {'exact ' if exact else ''}{carry_over}: {len(expected)} group(s)"] += 1
        self.late_bound = threshold
        self.slice_written = False
        return bool(expected)

    @precondition(lambda self: self.model.pending is not None)
    @rule()
    def run(self):
        instant = self.model.pending.instant
        threshold, exact = self.model.pending.threshold, self.model.pending.exact
        result = run_compaction(self.path, instant, local=True)
        carried = self.model.run(instant)
        self.as_of[instant] = self.planned_view.pop(instant)   # writes after C are not "as of C"
        # What the RO view claims: never less than T (exact mode: and the base gained nothing after T, checked
        # by the model; the invariant checks our RO equals the model's).
        completion = to_ms(result.ro_completion_time)
        assert completion is not None and completion >= threshold, (result, threshold)
        if exact:
            OUTCOMES["run exact"] += 1
        OUTCOMES[f"run ({carried} item(s) carried forward)" if carried else "run"] += 1
        self.slice_written = False

    @precondition(lambda self: bool(self.model.writes))
    @rule(retain=st.integers(1, 3), by_versions=st.booleans())
    def clean(self, retain, by_versions):
        before = self.reads()
        try:
            result = (self.table.clean(retain_versions=retain) if by_versions else
                      self.table.clean(retain_commits=retain))
        except Refused:
            assert self.reads() == before
            return
        assert not result.failed and not result.errors, result
        if result.deleted:
            self.model.cleaned({slice_of(f) for files in result.deleted.values() for f in files})
        OUTCOMES["clean deleted files" if result.deleted else "clean (nothing)"] += 1

    @precondition(lambda self: bool(self.model.writes))
    @rule()
    def rollback_latest_write(self):
        instant = self.model.writes[-1][0]
        if not self.model.rollback_write_allowed(instant):
            with self.unchanged():
                with pytest.raises(Refused):
                    self.table.rollback(instant)
            OUTCOMES["rollback write refused"] += 1
            return
        result = self.table.rollback(instant)
        OUTCOMES["rollback write"] += 1
        assert result.action == "deltacommit" and result.was_completed
        self.model.rollback_write(instant, result.rollback_instant)
        self._forget_from(instant)

    @precondition(lambda self: bool(self.model.plans))
    @rule()
    def rollback_latest_compaction(self):
        instant = self.model.plans[-1].instant
        if not self.model.rollback_compaction_allowed(instant):
            with self.unchanged():
                with pytest.raises(Refused):
                    self.table.rollback(instant)
            OUTCOMES["rollback compaction refused"] += 1
            return
        OUTCOMES[f"rollback {'completed' if self.model.plans[-1].completed else 'pending'} compaction"] += 1
        self.table.rollback(instant)
        self.model.rollback_compaction(instant)
        self.as_of.pop(instant, None)
        self.planned_view.pop(instant, None)
        self.slice_written = False

    @rule()
    def recover(self):
        with self.unchanged():
            assert not self.table.recover().changed

    # ------------------------------------------------------------------------ time travel and overwrites

    def _remember(self, instant: str) -> None:
        """A write completed: a time travel to it returns the snapshot of this moment from now on."""
        self.as_of[instant] = self.model_view(self.model.snapshot())

    def _forget_from(self, instant: str) -> None:
        """A rolled-back write: neither it nor any later instant's view holds what it wrote any more."""
        for i in [i for i in self.as_of if i >= instant]:
            del self.as_of[i]

    @precondition(lambda self: bool(self.as_of))
    @rule(data=st.data())
    def time_travel(self, data):
        """As of a completed write or compaction: the model's snapshot of that moment, and hudi 0.5.0's as-of
        read — or, once a clean deleted a slice that moment needs, a refusal naming the clean."""
        instant = data.draw(st.sampled_from(sorted(self.as_of)))
        try:
            ours = self.row_view(read_arrow(self.path, QuerySpec("time_travel", as_of=instant)))
        except ConfigError as exc:
            # Any clean may have (a killed one finished by `recover` too): the refusal must name one.
            cleans = [i.instant for i in self.table.timeline() if i.action == "clean"]
            assert any(f"clean {c} deleted" in str(exc) for c in cleans), exc
            OUTCOMES["time travel refused (cleaned)"] += 1
            return
        assert ours == self.as_of[instant], instant
        if self.model.pending is None:
            assert self.row_view(hudi_read(self.path, "time_travel", as_of=instant)) == ours
        OUTCOMES["time travel"] += 1

    @precondition(lambda self: len(self.model.writes) >= OVERWRITE_AFTER_WRITES)
    @rule(rows=ROWS)
    def insert_overwrite(self, rows):
        """insert_overwrite of the (unpartitioned) table: refused while a compaction is pending, else every
        group is replaced by new ones holding exactly the input's rows. Only once some writes are live: an
        overwrite ends the history the rollback rules work on, so it should not come every few steps."""
        if self.model.pending is not None:
            with self.unchanged():
                with pytest.raises(Refused):
                    self._overwrite(rows)
            OUTCOMES["insert_overwrite refused (pending compaction)"] += 1
            return
        instant, by_bucket = self._overwrite(rows)
        self.model.overwrite(by_bucket)
        self._remember(instant)
        OUTCOMES["insert_overwrite"] += 1

    def _overwrite(self, rows: list[tuple]) -> tuple[str, dict[int, list[Item]]]:
        label = f"w{self.inputs + 1}"
        source = self._input("parquet_ms", "insert_overwrite", rows, label)
        instant = write_file(self.path, source, "insert_overwrite", spark=InlineSpark()).instant
        by_bucket: dict[int, list[Item]] = {}
        for row in rows:
            by_bucket.setdefault(BUCKET_OF[row[0]], []).append(self._item(PUT, row, label))
        return instant, by_bucket

    # ------------------------------------------------------------------------------------ damage and kills

    # One rule for the three, so they stay a small share of each sequence's steps (the CI profile's time).
    @precondition(lambda self: bool(self.model.writes))
    @rule(kind=st.sampled_from(["damage", "kill_write", "kill_clean"]), data=st.data())
    def damage_or_kill(self, kind, data):
        if kind == "damage":
            self.damage_and_repair(data.draw(st.sampled_from(["header", "content"])), data.draw(st.integers(0, 999)),
                                   data.draw(st.booleans()), data.draw(st.booleans()),
                                   data.draw(st.sampled_from(["symlink", "copy"])))
        elif kind == "kill_write":
            self.killed_write(data.draw(st.sampled_from(OPERATIONS)), data.draw(ROWS),
                              data.draw(st.sampled_from(faults.STEPS["write"])))
        else:
            # Retaining one commit or version: a clean that has files to delete, so the kill lands mid-way.
            self.killed_clean(1, data.draw(st.booleans()), data.draw(st.sampled_from(faults.STEPS["clean"])),
                              data.draw(st.integers(1, 2)))

    def damage_and_repair(self, where: str, pick: int, compact: bool, clean: bool, carry_over: str) -> None:
        targets = committed_blocks(self.path, content=where == "content")
        if not targets:
            OUTCOMES[f"damage {where}: no committed block"] += 1
            return
        path, info = targets[pick % len(targets)]
        real = os.path.realpath(path)
        original = damage(real, info, where)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._while_damaged(path, compact, clean, carry_over)
        finally:
            with open(real, "wb") as fh:   # repaired: every record must be back (the invariant checks)
                fh.write(original)
        OUTCOMES[f"damage {where}" + (" + compact" if compact else "") + (" + clean" if clean else "")] += 1

    def _while_damaged(self, path: str, compact: bool, clean: bool, carry_over: str) -> None:
        name = re.escape(os.path.basename(path))
        with pytest.raises(CorruptLogBlockError, match=name):
            read_arrow(self.path, fail_on_corrupt=True)
        try:
            theirs = as_rows(hudi_read(self.path))
        except Exception:  # noqa: BLE001 - hudi 0.5.0 fails on the damage: loud, as it should be
            OUTCOMES["damage: hudi 0.5.0 fails"] += 1
        else:   # hudi 0.5.0 read it: then it agrees with the model or with what we return (warned)
            ours = as_rows(read_arrow(self.path))
            assert theirs in (ours, model_rows(self.model.snapshot())) or self.slice_written
            OUTCOMES["damage: hudi 0.5.0 reads"] += 1
        if compact and self.model.pending is None:
            try:
                plan = self.table.schedule_compaction(strategy="event_time", threshold=ms(SECONDS + 1),
                                                      carry_over=carry_over, exact=False)
            except CorruptLogBlockError:
                OUTCOMES["damage: schedule refused"] += 1
            else:   # damage only a decode sees: the run fails and rolls its own plan back
                assert plan.instant is not None
                with pytest.raises(CorruptLogBlockError, match=f"{name}.*was rolled back"):
                    run_compaction(self.path, plan.instant, local=True)
                assert not Timeline.load(self.path).get(plan.instant)
                OUTCOMES["damage: run failed, plan rolled back"] += 1
        if clean:
            self.clean(1, False)
            copied_from = carried_copy_original(self.path, path)
            assert copied_from is None or os.path.isfile(copied_from), f"clean deleted {copied_from}"

    def killed_write(self, op: str, rows: list[tuple[str, int]], step: str) -> None:
        """A Parquet write dies at `step`; `recover` rolls it back unless it completed."""
        if not self.model.has_schema:
            op = "upsert"
        label = f"w{self.inputs + 1}"
        source = self._input("parquet_ms", op, rows, label)
        before = {i.instant for i in self.table.timeline()}
        with fault(f"write:{step}:abort"):
            write_file(self.path, source, "delete" if op.startswith("delete") else op, spark=InlineSpark())
        (instant,) = [i.instant for i in self.table.timeline() if i.instant not in before and i.action == "deltacommit"]
        done = recover_table(self.path)
        by_bucket = model_items(op, rows, label)
        if Timeline.load(self.path).is_completed(instant):
            if self.model.pending is not None and set(by_bucket) & set(self.model.pending.cuts):
                self.slice_written = True
            self.model.write(instant, by_bucket)
        else:
            (rolled,) = [r for r in done.rollbacks if r.instant == instant]
            if rolled.rollback_log_files or rolled.deleted_files:   # its logs were published
                self.model.write(instant, by_bucket)
                self.model.rollback_write(instant, rolled.rollback_instant)
        OUTCOMES[f"write killed at {step}"] += 1

    def killed_clean(self, retain: int, by_versions: bool, step: str, nth: int) -> None:
        """A clean dies at `step` (after its `nth` deleted file for `deleting`): reads already equal the model
        (links go before their targets), and `recover` finishes it."""
        before = self.reads()
        point = f"clean:{step}@{nth}:abort" if step == "deleting" else f"clean:{step}:abort"
        try:
            with fault(point, required=False) as fired:
                result = (self.table.clean(retain_versions=retain) if by_versions else
                          self.table.clean(retain_commits=retain))
        except Refused:
            assert self.reads() == before
            return
        if not fired:   # nothing to clean, or fewer files than `nth`: an ordinary clean
            assert not result.failed and not result.errors, result
            if result.deleted:
                self.model.cleaned({slice_of(f) for files in result.deleted.values() for f in files})
            OUTCOMES["killed clean finished first"] += 1
            return
        assert self.reads() == before
        if self.model.writes and not self.slice_written:
            assert as_rows(hudi_read(self.path)) == before[0]
        (clean,) = [i for i in Timeline.load(self.path).instants if i.action == "clean"][-1:]
        finished = recover_table(self.path).finished_cleans
        assert finished == ([] if clean.is_completed else [clean.timestamp])
        planned = Timeline.load(self.path).clean_plan(clean.timestamp).deleted_names()
        self.model.cleaned({slice_of(n) for names in planned.values() for n in names})
        OUTCOMES[f"clean killed at {step}"] += 1

    # ------------------------------------------------------------------------------------ checks

    def reads(self) -> tuple[dict, dict]:
        if not any(i.action in ("deltacommit", "commit", "replacecommit") and i.state == "completed"
                   for i in self.table.timeline()):
            return {}, {}   # every write rolled back: no schema, nothing to read
        return self.row_view(read_arrow(self.path)), self.row_view(read_arrow(self.path, "read_optimized"))

    def unchanged(self):
        machine = self

        class Unchanged:
            def __enter__(self):
                self.before = machine.reads(), [(i.instant, i.action, i.state) for i in machine.table.timeline()]

            def __exit__(self, *exc):
                if exc[0] is None:
                    after = machine.reads(), [(i.instant, i.action, i.state) for i in machine.table.timeline()]
                    assert after == self.before
                return False

        return Unchanged()

    @invariant()
    def agrees_with_the_model_and_hudi(self):
        snapshot, ro = self.reads()
        assert snapshot == self.model_view(self.model.snapshot())
        assert ro == self.model_view(self.model.read_optimized())
        if self.model.has_schema and not self.slice_written:
            assert self.row_view(hudi_read(self.path)) == snapshot
            assert self.row_view(hudi_read(self.path, "read_optimized")) == ro
            OUTCOMES["checked against hudi 0.5.0"] += 1
        else:
            OUTCOMES["checked against the model only (slice C written)"] += 1


def committed_blocks(path: str, content: bool) -> list[tuple[str, logformat.BlockInfo]]:
    """(log path as readers list it, block) of every block of a committed, not rolled-back write or compaction
    in the latest slices; with `content`, Avro data blocks only (whose first record's length can be hit)."""
    timeline = Timeline.load(path)
    committed = {i.timestamp for i in timeline.completed() if i.action in ("deltacommit", "commit")}
    out = []
    for sl in FileSystemView(path, timeline).latest_slices():
        scans = [(lf.path, logformat.scan_log_file(lf.path)) for lf in sl.log_files]
        masked = {b.target_instant_time for _, scan in scans for b in scan.blocks
                  if b.block_type is logformat.BlockType.COMMAND}
        for log, scan in scans:
            out.extend((log, b) for b in scan.blocks if b.block_type is not logformat.BlockType.COMMAND
                       and b.instant_time in committed and b.instant_time not in masked
                       and (not content or b.block_type is logformat.BlockType.AVRO_DATA))
    return out


def damage(real: str, info: logformat.BlockInfo, where: str) -> bytes:
    """Overwrite the block's MAGIC (`#XUDI#`) or flip its first record's length; returns the original bytes."""
    with open(real, "rb") as fh:
        original = fh.read()
    data = bytearray(original)
    if where == "header":
        data[info.offset:info.offset + 6] = b"#XUDI#"
    else:
        data[info.content_offset + 8] ^= 0x7F   # int32 version, int32 count, then the first record's length
    with open(real, "wb") as fh:
        fh.write(bytes(data))
    return original


def carried_copy_original(path: str, log: str) -> str | None:
    """The log that `log` is a carried byte copy of (completed compactions' carry-over records), or None."""
    timeline = Timeline.load(path)
    for inst in timeline.completed():
        if inst.action == "commit":
            for entry in timeline.commit_metadata(inst).carried or ():
                if entry.mode == "copy" and entry.symlink == os.path.basename(log):
                    return os.path.join(os.path.dirname(log), entry.target)
    return None


def model_items(op: str, rows: list[tuple[str, int]], label: str) -> dict[int, list[Item]]:
    kind = {"delete_ordered": DELETE, "delete_unordered": HARD}.get(op, PUT)
    by_bucket: dict[int, list[Item]] = {}
    for key, s in rows:
        item = Item(key, kind, None if kind == HARD else ms(s), f"{label}.{key}" if kind == PUT else None)
        by_bucket.setdefault(BUCKET_OF[key], []).append(item)
    return by_bucket


class fault:   # noqa: N801 - a context manager used like a statement
    """Run the block with TIDEMARK_FAULT=`spec` (abort mode): the injected abort is swallowed here and `fired`
    says whether it came; `required` fails the test when the operation never crossed the point."""

    def __init__(self, spec: str, required: bool = True) -> None:
        self.spec, self.required, self.fired = spec, required, False

    def __enter__(self) -> fault:
        os.environ[faults.ENV] = self.spec
        return self

    def __bool__(self) -> bool:
        return self.fired

    def __exit__(self, exc_type, exc, tb) -> bool:
        del os.environ[faults.ENV]
        faults.reset_crossings()
        self.fired = exc_type is faults.InjectedAbort
        assert self.fired or not self.required or exc_type is not None, f"{self.spec} never fired"
        return self.fired


# ---------------------------------------------------------------- ordering apart from event time (issue 12)

ORDERINGS = st.integers(1, 6)   # 0 would be Java's "processing-time" ordering value
SEQ_ROWS = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, SECONDS), ORDERINGS), min_size=1, max_size=5,
                    unique_by=lambda r: r[0])


def as_seq_rows(table: pa.Table) -> dict[str, tuple[int, int, str]]:
    """id -> (seq, ts in epoch ms, v)."""
    if table.num_columns == 0 or table.num_rows == 0:
        return {}
    ts = table.column("ts").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    out = dict(zip(table.column("id").to_pylist(), zip(table.column("seq").to_pylist(), ts,
                                                        table.column("v").to_pylist())))
    assert len(out) == table.num_rows, "duplicate keys"
    return out


def model_seq_rows(rows: dict[str, Item]) -> dict[str, tuple[int, int, str]]:
    return {k: (it.ts, it.event, it.value) for k, it in rows.items()
            if it.ts is not None and it.event is not None and it.value is not None}


class OrderingApartSequences(TableSequences):
    """The same steps on a table whose ordering field `seq` is not its event-time field `ts`: a delete's
    ordering value says nothing about when it happened, deletes without ordering value still carry event
    times, and exact compactions see deletes on both sides of T in one write (issue 12 cases 3 and 4)."""

    ordering_field = "seq"
    row_view = staticmethod(as_seq_rows)
    model_view = staticmethod(model_seq_rows)

    def _columns(self, op: str, rows: list[tuple], label: str) -> dict[str, list]:
        cols: dict[str, list] = {"id": [r[0] for r in rows]}
        if op != "delete_unordered":
            cols["seq"] = [r[2] for r in rows]
        cols["ts"] = [r[1] for r in rows]
        if op in ("upsert", "insert", "insert_overwrite"):
            cols["v"] = [f"{label}.{r[0]}" for r in rows]
        return cols

    def _item(self, kind: str, row: tuple, label: str) -> Item:
        key, second, seq = row
        return Item(key, kind, None if kind == HARD else seq, f"{label}.{key}" if kind == PUT else None,
                    event=ms(second))

    @initialize(fmt=st.sampled_from(FORMATS), rows=SEQ_ROWS)
    def first_write(self, fmt, rows):
        self._write(fmt, "upsert", rows)

    @rule(fmt=st.sampled_from(FORMATS), op=st.sampled_from(OPERATIONS), rows=SEQ_ROWS)
    def write(self, fmt, op, rows):
        self._write(fmt, op, rows)

    @precondition(lambda self: self.late_bound is not None)
    @rule(fmt=st.sampled_from(FORMATS), op=st.sampled_from(OPERATIONS), data=st.data())
    def late_write(self, fmt, op, data):
        late = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, max(0, self.late_bound)), ORDERINGS),
                        min_size=1, max_size=5, unique_by=lambda r: r[0])
        self._write(fmt, op, data.draw(late))

    @precondition(lambda self: len(self.model.writes) >= OVERWRITE_AFTER_WRITES)
    @rule(rows=SEQ_ROWS)
    def insert_overwrite(self, rows):
        TableSequences.insert_overwrite(self, rows)

    def damage_or_kill(self, *args) -> None:   # not a rule here: the main machine covers damage and kills
        raise AssertionError("damage and kill steps run on TableSequences only")


class V8Sequences(TableSequences):
    """The same steps (but damage and kills) on a table-version-8 table (Hudi 1.x): logs named by their write and
    sliced by completion time, Avro commits, rollbacks that delete a write's logs, carried logs re-published under
    the compaction instant — hudi 0.5.0 still agreeing after every step (issue 17)."""

    table_version = 8

    def damage_or_kill(self, *args) -> None:   # not a rule here: the main machine covers damage and kills
        raise AssertionError("damage and kill steps run on TableSequences only")


class V9Sequences(V8Sequences):
    """The v8 machine's steps on a table-version-9 table (Hudi 1.1): the same timeline layout, with the ordering
    fields and merge mode stated outright in hoodie.properties — hudi 0.5.0 agreeing after every step."""

    table_version = 9


def _run(machine: type[TableSequences], request, examples: int) -> None:
    machine.spark_factory = lambda: request.getfixturevalue("spark")
    OUTCOMES.clear()
    run_state_machine_as_test(machine, settings=settings(stateful_step_count=STEPS, max_examples=examples))
    print("\n".join(f"{n:6d}  {what}" for what, n in sorted(OUTCOMES.items())))


def test_random_sequences_agree_with_the_model_and_hudi(request):
    _run(TableSequences, request, settings.default.max_examples)


def test_random_sequences_on_table_version_8(request):
    """A quarter of the profile's sequences, as for the ordering-apart machine: the shared steps on v8."""
    _run(V8Sequences, request, max(1, settings.default.max_examples // 4))


def test_random_sequences_on_table_version_9(request):
    """A quarter of the profile's sequences, as on v8: the shared steps on v9."""
    _run(V9Sequences, request, max(1, settings.default.max_examples // 4))


def test_random_sequences_with_ordering_apart_from_event_time(request):
    """A quarter of the profile's sequences (50 in CI): the machine above covers every step shared with this
    one, and CI time matters; the soak runs it a quarter as often too."""
    _run(OrderingApartSequences, request, max(1, settings.default.max_examples // 4))


STEPS = int(os.environ.get("TIDEMARK_MODEL_STEPS", "20"))
