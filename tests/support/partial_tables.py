"""Hudi 1.1 tables with log histories of our choosing: partial-update blocks (IS_PARTIAL), full records and deletes.

Built from the Java fixture `table_partial_update_event_time` (table version 9, one file group, columns id, ts, a,
b, ordering field ts): its logs and later instants are dropped, its base file is rewritten with the rows asked for,
and each step becomes one completed deltacommit writing one log file of one block, as Java's MERGE INTO does. Both
hudi 0.5.0 and Tidemark then read the same bytes, so any difference is a difference in how they merge.
"""
from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.config.properties import COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING
from engine.logformat import append_blocks, encode_data_block, encode_delete_block
from engine.timeline.instants import commit_metadata_json, complete, create_requested, transition_to_inflight
from tests.support.fixtures import unzip_fixture

FIXTURE = "table_partial_update_event_time"
FILE_ID = "9f4d5814-dd4a-4278-a9da-0559d6e4156a-0"
BASE_INSTANT = "20260816160946106"
DATA_COLUMNS = ("ts", "a", "b")
META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")


@dataclass(frozen=True)
class Put:
    """One block of records: {key: {column: value}}; `columns` None is a full block, else a partial one holding
    those of ts, a, b (the key column `id` is never in a partial block, as in Java's)."""

    rows: dict[str, dict[str, object]]
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Delete:
    """One delete block of `keys`, with ordering value `ordering`, or None: processing-time deletes (Java's
    IntWrapper 0). One kind per block, as one block has one union branch."""

    keys: tuple[str, ...]
    ordering: int | None = None


Step = Put | Delete


Rows = Sequence[tuple[str, dict[str, object]]]   # (record key, {column: value}), a key may repeat


def build(tmp: Path, merge_mode: str, base: Rows, steps: Sequence[Step]) -> tuple[str, list[str]]:
    """The table at `tmp` and the instants of its steps, in order."""
    assert merge_mode in (COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING)
    path = unzip_fixture(FIXTURE, tmp)
    _reset(path, merge_mode)
    _write_base(path, base)
    instants = []
    for i, step in enumerate(steps):
        instant = f"202608161700{i:05d}"
        write_step(str(path), instant, step)
        instants.append(instant)
    return str(path), instants


def _reset(path: Path, merge_mode: str) -> None:
    """Only the first commit (the base file) stays."""
    for log in glob.glob(str(path / f".{FILE_ID}_*.log.*")):
        os.remove(log)
    timeline = path / ".hoodie" / "timeline"
    for name in os.listdir(timeline):
        if not name.startswith(BASE_INSTANT) and not os.path.isdir(timeline / name):
            os.remove(timeline / name)
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.record.merge.mode=EVENT_TIME_ORDERING",
                                               f"hoodie.record.merge.mode={merge_mode}"))


def _base_file(path: Path) -> str:
    (only,) = glob.glob(str(path / f"{FILE_ID}_*_{BASE_INSTANT}.parquet"))
    return only


def _write_base(path: Path, base: Rows) -> None:
    name = _base_file(path)
    schema = pq.read_schema(name)
    rows = [_row(key, BASE_INSTANT, i, os.path.basename(name), {"id": key, **values})
            for i, (key, values) in enumerate(base)]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), name)


def _row(key: str, instant: str, seq: int, file_name: str, values: dict[str, object]) -> dict[str, object]:
    return {"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_{seq}", "_hoodie_record_key": key,
            "_hoodie_partition_path": "", "_hoodie_file_name": file_name, **values}


def _table_schema(path: Path) -> dict[str, object]:
    props = (path / ".hoodie" / "hoodie.properties").read_text()
    line = next(ln for ln in props.splitlines() if ln.startswith("hoodie.table.create.schema="))
    table: dict[str, object] = json.loads(line.split("=", 1)[1].replace("\\:", ":"))
    return table


def write_step(path: str, instant: str, step: Step) -> None:
    """One completed deltacommit at `instant` writing `step` as the one block of a new log (named by the
    instant, as table version 9 names a write's log)."""
    table = _table_schema(Path(path))
    create_requested(path, instant, "deltacommit")
    transition_to_inflight(path, instant, "deltacommit")
    append_blocks(os.path.join(path, f".{FILE_ID}_{instant}.log.1_0-1-1"), [_block(instant, step, table)])
    complete(path, instant, "deltacommit", commit_metadata_json({}, schema=json.dumps(table), operation_type="UPSERT"))


def _block(instant: str, step: Step, table: dict[str, object]) -> bytes:
    if isinstance(step, Delete):
        keys = list(step.keys)
        ordering = None if step.ordering is None else [step.ordering] * len(keys)
        return encode_delete_block(keys, [""] * len(keys), instant, ordering)
    fields = table["fields"]
    assert isinstance(fields, list)
    wanted = {"id", *DATA_COLUMNS} if step.columns is None else set(step.columns)
    avro = {**table, "fields": [_nullable_meta(n) for n in META] + [f for f in fields if f["name"] in wanted]}
    rows = [_row(key, instant, i, "", {"id": key, **values} if step.columns is None else values)
            for i, (key, values) in enumerate(step.rows.items())]
    names = [*META, *(f["name"] for f in avro["fields"][len(META):])]
    arrow = pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=_arrow_schema(names))
    return encode_data_block(arrow, avro, instant, partial=step.columns is not None)


def _nullable_meta(name: str) -> dict[str, object]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


def _arrow_schema(names: list[str]) -> pa.Schema:
    return pa.schema([(n, pa.int64() if n == "ts" else pa.string()) for n in names])


def compact_with_late_writes(path: str, late: Sequence[Step]) -> tuple[str, pa.Table]:
    """Plan an unbounded compaction, write `late` into its pending slice, run it; its instant and hudi 0.5.0's
    snapshot from just before the run (what the compacted table must still read as)."""
    from engine.compaction import run_compaction, schedule_compaction
    from engine.io.naming import new_instant_time
    from tests.support.oracle import hudi_read

    plan = schedule_compaction(path, strategy="unbounded")
    for step in late:
        write_step(path, new_instant_time(after=plan.instant), step)
    before = hudi_read(path)
    run_compaction(path, local=True)
    return plan.instant, before
