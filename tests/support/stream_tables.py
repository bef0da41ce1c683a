"""Tables and Parquet file sources for the streaming sink's tests."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Table

START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def stream_table(path: Path, table_version: int = 6, settings: dict[str, str] | None = None) -> Table:
    return Table.create(str(path), name="events", record_keys=["id"], ordering_field="ts",
                        event_time_field="event_time", partition_fields=["region"], settings=settings,
                        table_version=table_version)


def source_rows(first_id: int, rows: int, minutes_from: int = 0) -> pa.Table:
    """`rows` rows with ids from `first_id`, event times a minute apart from START + `minutes_from`."""
    ids = list(range(first_id, first_id + rows))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": [f"n{i}" for i in ids],
        "ts": pa.array([1] * rows, pa.int64()),
        "event_time": pa.array([START + dt.timedelta(minutes=minutes_from + k) for k in range(rows)],
                               pa.timestamp("us", tz="UTC")),
        "region": ["a" if i % 2 else "b" for i in ids],
    })


def file_source(folder: Path, files: int, rows: int = 40) -> pa.Table:
    """`files` Parquet files (one micro-batch each with maxFilesPerTrigger=1); every row they hold. The last file
    updates the first file's ids, so an upsert replayed wrongly would show."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for i in range(files):
        rows_i = source_rows(i * rows, rows, i * rows) if i < files - 1 else \
            source_rows(0, rows, i * rows).set_column(1, "name", pa.array([f"updated{k}" for k in range(rows)]))
        pq.write_table(rows_i, folder / f"part-{i:04d}.parquet")
        written.append(rows_i)
    return pa.concat_tables(written)


def expected_rows(source: pa.Table) -> dict[int, str]:
    """id -> name after upserting the source in order (the later row of a key wins: the same ts, later write)."""
    out: dict[int, str] = {}
    for i, name in zip(source.column("id").to_pylist(), source.column("name").to_pylist()):
        out[i] = name
    return out
