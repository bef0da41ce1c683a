"""A table that runs for a year, compressed: 1,000 small commits with default settings (automatic clean and
archival, as Hudi's defaults), a compaction every 100 as a stream's compaction service would run.

The active timeline stays bounded, old slices are cleaned, hudi 0.5.0 reads exactly the rows written, the
archived instants read back from Hudi's own archive formats, and reads that reach into the archived range answer
as hudi 0.5.0 does or are refused naming the archive."""
from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.errors import ConfigError
from engine.io.naming import parse_log_file_name
from engine.read.query import QuerySpec, read_arrow
from engine.timeline.instants import DELTACOMMIT, Timeline
from tests.support.java_queries import assert_same
from tests.support.oracle import hudi_read, rows_by_key

COMMITS = 1_000
COMPACT_EVERY = 100
KEYS = 400
ROWS_PER_COMMIT = 8
REGIONS = ("eu", "us", "ap", "sa")
T0_MS = 1_735_689_600_000


def _batch(n: int, keys: list[int]) -> pa.Table:
    return pa.table({
        "id": [f"k{k:04d}" for k in keys],
        "region": [REGIONS[k % len(REGIONS)] for k in keys],
        "seq": pa.array([n] * len(keys), pa.int64()),
        "event_time": pa.array([T0_MS + n * 60_000 + k for k in keys], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "amount": pa.array([float(n * 1000 + k) for k in keys]),
    })


def _live(tmp_path: Path, version: int) -> tuple[Table, dict[str, dict], list[str]]:
    """The table after COMMITS writes; the model of its rows; every deltacommit instant written."""
    table = Table.create(str(tmp_path / f"v{version}"), name=f"year{version}", record_keys=["id"],
                         ordering_field="seq", event_time_field="event_time", partition_fields=["region"],
                         table_version=version)
    rng = random.Random(version)
    model: dict[str, dict] = {}
    written: list[str] = []
    source = str(tmp_path / "batch.parquet")
    for n in range(COMMITS):
        keys = rng.sample(range(KEYS), ROWS_PER_COMMIT)
        batch = _batch(n, keys)
        pq.write_table(batch, source)
        written.append(table.write([source], local=True).instant)
        for row in batch.to_pylist():
            model[row["id"]] = row
        if (n + 1) % COMPACT_EVERY == 0:
            table.schedule_compaction(strategy="unbounded")
            table.run_compaction()
    return table, model, written


@pytest.fixture(scope="module", params=[6, 8])
def year(request, tmp_path_factory) -> tuple[Table, dict[str, dict], list[str]]:
    return _live(tmp_path_factory.mktemp(f"year{request.param}"), request.param)


def test_the_active_timeline_stays_bounded(year) -> None:
    table, _, written = year
    timeline = Timeline.load(table.path)
    commits = [i for i in timeline.completed() if i.action in ("deltacommit", "commit")]
    # hoodie.keep.min/max.commits = 20/30, or the commits since the latest compaction (kept with it)
    assert 20 <= len(commits) <= COMPACT_EVERY + 30 + 1
    assert len(timeline.instants) <= 2 * (COMPACT_EVERY + 30 + 1), "cleans are archived by the same rule"
    archived = {i.instant for i in table.timeline(archived=True) if i.archived}
    active = {i.timestamp for i in timeline.instants}
    assert set(written) <= archived | active, "every deltacommit is either active or in the archive"
    assert archived & set(written), "most deltacommits were archived"


def test_old_slices_are_cleaned(year) -> None:
    table, _, _ = year
    groups: dict[tuple[str, str], set[str]] = {}
    for path in Path(table.path).rglob("*"):
        if ".hoodie" in path.parts or not path.is_file() or path.name == ".hoodie_partition_metadata":
            continue
        if path.suffix == ".parquet":
            file_id, instant = path.name.split("_")[0], path.name.rsplit("_", 1)[1].split(".")[0]
            groups.setdefault((path.parent.name, file_id), set()).add(instant)
        else:
            assert parse_log_file_name(path.name) is not None, path
    assert groups, "compactions wrote base files"
    assert max(len(v) for v in groups.values()) <= 2, "KEEP_LATEST_COMMITS(10) with a compaction per 100 commits"


def test_hudi_reads_exactly_the_rows_written(year) -> None:
    table, model, _ = year
    theirs = rows_by_key(hudi_read(table.path), with_meta=("_hoodie_record_key",))
    assert {k[1] for k in theirs} == set(model)
    assert {k[1]: v["seq"] for k, v in theirs.items()} == {k: v["seq"] for k, v in model.items()}
    assert_same(read_arrow(table.path, "snapshot"), hudi_read(table.path), "snapshot")
    assert_same(read_arrow(table.path, "read_optimized"), hudi_read(table.path, "read_optimized"), "read_optimized")


def test_reads_reaching_into_the_archive(year) -> None:
    """Incremental from the start and time travel to an archived instant: hudi 0.5.0's answer, or a refusal that
    names the archive (Java refuses a range that starts before the active timeline once it was archived)."""
    table, _, written = year
    first_active = Timeline.load(table.path).instants[0].timestamp
    archived = [t for t in written if t < first_active]
    cases = [QuerySpec("incremental", begin="0"), QuerySpec("incremental", begin=archived[len(archived) // 2]),
             QuerySpec("time_travel", as_of=archived[-1])]
    for spec in cases:
        what = f"{spec.query} {spec.begin or spec.as_of}"
        try:
            ours = read_arrow(table.path, spec)
        except ConfigError as exc:
            assert "archiv" in str(exc), what
            continue
        theirs = hudi_read(table.path, spec.query, begin=spec.begin, as_of=spec.as_of)
        assert_same(ours, theirs, what)


def test_incremental_within_the_active_timeline_matches_hudi(year) -> None:
    table, _, _ = year
    done = [i for i in Timeline.load(table.path).completed() if i.action == DELTACOMMIT]
    begin = done[len(done) // 2].timestamp
    assert_same(read_arrow(table.path, QuerySpec("incremental", begin=begin)),
                hudi_read(table.path, "incremental", begin=begin), f"incremental ({begin}, latest]")
