"""Our readers return what hudi 0.5.0 returns on each Java-written fixture table."""
from __future__ import annotations

import os

import pytest

from engine.compaction import schedule_compaction
from engine.config.properties import load_table_config
from engine.errors import UnsupportedTableError
from engine.read.query import QuerySpec, read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline, create_requested
from tests.support.oracle import hudi_read, rows_by_key

V6 = ["v6_trips_8i1u", "v6_nonpartitioned", "v6_complexkeygen_hivestyle", "v6_simplekeygen_nonhivestyle"]


@pytest.mark.parametrize("name", V6)
@pytest.mark.parametrize("query", ["snapshot", "read_optimized"])
def test_fixture_reads_like_hudi(fixture_table, name, query):
    path = fixture_table(name)
    ours = read_arrow(str(path), query)
    theirs = hudi_read(path, query)
    assert ours.num_rows == theirs.num_rows > 0
    assert rows_by_key(ours) == rows_by_key(theirs, columns=None)


def test_trips_update_is_visible_in_snapshot_only(fixture_table):
    path = str(fixture_table("v6_trips_8i1u"))
    snap = {r["rider"]: r["fare"] for r in read_arrow(path).to_pylist()}
    ro = {r["rider"]: r["fare"] for r in read_arrow(path, "read_optimized").to_pylist()}
    assert snap["rider-D"] == 25.0 and ro["rider-D"] == 33.9


def test_empty_fixture_reads_nothing(fixture_table):
    path = fixture_table("v6_empty")
    ours = read_arrow(str(path))
    assert ours.num_rows == 0 and "id" in ours.column_names  # schema from hoodie.table.create.schema
    assert hudi_read(path).num_rows == 0


# ---------------------------------------------------------------------------------------------- table version 8

V8 = ["v8_trips_8i3u1d"]


def _v8_points(path: str) -> tuple[list[str], list[str]]:
    """The fixture's completed write instants (requested times) and every requested and completion time."""
    timeline = Timeline.load(path)
    writes = [i.timestamp for i in timeline.completed() if i.action in ("deltacommit", "commit", "replacecommit")]
    times = sorted({t for i in timeline.completed() for t in (i.timestamp, i.completion_time) if t})
    return writes, times


@pytest.mark.parametrize("name", V8)
@pytest.mark.parametrize("query", ["snapshot", "read_optimized"])
def test_v8_fixture_reads_like_hudi(fixture_table, name, query):
    path = fixture_table(name)
    ours = read_arrow(str(path), query)
    theirs = hudi_read(path, query)
    assert ours.num_rows == theirs.num_rows > 0
    assert rows_by_key(ours) == rows_by_key(theirs, columns=None)


@pytest.mark.parametrize("name", V8)
def test_v8_time_travel_at_every_write_reads_like_hudi(fixture_table, name):
    path = str(fixture_table(name))
    writes, _ = _v8_points(path)
    assert len(writes) >= 6
    seen = set()
    for ts in writes:
        ours = rows_by_key(read_arrow(path, QuerySpec("time_travel", as_of=ts)))
        assert ours == rows_by_key(hudi_read(path, "time_travel", as_of=ts)), ts
        seen.add(len(ours))
    assert len(seen) > 1   # the fixture's deletes make the table shrink over time


@pytest.mark.parametrize("name", V8)
def test_v8_incremental_ranges_by_completion_time_read_like_hudi(fixture_table, name):
    """Every range between the fixture's requested and completion times (the begin of a v8 range is judged
    against completion times: a begin at a write's requested time still returns that write)."""
    path = str(fixture_table(name))
    _, times = _v8_points(path)
    points = ["0", *times]
    checked = 0
    for i, begin in enumerate(points[:-1]):
        for end in [*points[i + 1:], None]:
            if end is None and begin == times[-1]:
                continue   # (latest, latest]: hudi returns nothing, Tidemark refuses the empty range (as on v6)
            ours = rows_by_key(read_arrow(path, QuerySpec("incremental", begin=begin, end=end)))
            assert ours == rows_by_key(hudi_read(path, "incremental", begin=begin, end=end)), (begin, end)
            checked += 1
    assert checked > 100


def test_v8_completion_time_places_the_post_compaction_log(fixture_table):
    """The log of deltacommit 20251220210130911 (requested after compaction 20251220210129235 completed) is in
    slice 20251220210129235; the logs that compaction compacted stay in the old slice."""
    path = str(fixture_table("v8_trips_8i3u1d"))
    view = FileSystemView(path)
    by_slice = {(g.file_id[:8], s.base_instant): [lf.base_instant for lf in s.log_files]
                for g in view.file_groups() for s in g.slices}
    assert by_slice[("8aa68f7e", "20251220210129235")] == ["20251220210130911"]
    assert by_slice[("8aa68f7e", "20251220210108078")] == ["20251220210125441"]
    assert by_slice[("6e1d5cc4", "20251220210129235")] == []


def test_v8_timeline_is_read_with_completion_times(fixture_table):
    path = str(fixture_table("v8_trips_8i3u1d"))
    timeline = Timeline.load(path)
    compaction = timeline.get("20251220210129235")[0]
    assert (compaction.action, compaction.completion_time) == ("commit", "20251220210129883")
    meta = timeline.commit_metadata(compaction)   # Avro commit metadata
    assert meta.is_compaction and len(meta.write_stats) == 3
    assert timeline.compaction_plan("20251220210129235").operations


def test_v8_first_instant_goes_to_the_timeline_folder_and_switches_the_mdt_off(fixture_table):
    path = str(fixture_table("v8_trips_8i3u1d"))
    snap = rows_by_key(hudi_read(path))
    assert os.path.isdir(os.path.join(path, ".hoodie", "metadata"))
    written = create_requested(path, "20260101000000000", "deltacommit")
    assert written == os.path.join(path, ".hoodie", "timeline", "20260101000000000.deltacommit.requested")
    assert not os.path.exists(os.path.join(path, ".hoodie", "20260101000000000.deltacommit.requested"))
    assert not os.path.exists(os.path.join(path, ".hoodie", "metadata"))
    props = load_table_config(path).props
    assert props["hoodie.table.metadata.partitions"] == "" and props["hoodie.table.version"] == "8"
    assert rows_by_key(hudi_read(path)) == snap == rows_by_key(read_arrow(path))   # listing storage instead


def test_an_unknown_table_version_is_reported_unsupported(fixture_table):
    path = fixture_table("v8_trips_8i3u1d")
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.version=8", "hoodie.table.version=10"))
    with pytest.raises(UnsupportedTableError, match="hoodie.table.version=10 is not supported"):
        read_arrow(str(path))


@pytest.mark.parametrize("key,value", [("hoodie.record.merge.mode", "CUSTOM"),
                                       ("hoodie.table.format", "iceberg"),
                                       ("hoodie.table.ordering.fields", "txn_ts,txn_id"),
                                       ("hoodie.table.partial.update.mode", "IGNORE_DEFAULTS"),
                                       ("hoodie.table.legacy.payload.class",
                                        "org.apache.hudi.common.model.AWSDmsAvroPayload")])
def test_a_v9_merge_we_cannot_reproduce_is_refused_naming_the_setting(fixture_table, key, value):
    """Before anything is read or written: one line naming the setting and its value."""
    path = fixture_table("v9_txns_simple_meta")
    props = path / ".hoodie" / "hoodie.properties"
    lines = [ln for ln in props.read_text().splitlines() if not ln.startswith(key + "=")]
    props.write_text("\n".join([*lines, f"{key}={value}"]) + "\n")
    before = sorted(p.name for p in path.rglob("*"))
    for attempt in (lambda: read_arrow(str(path)), lambda: schedule_compaction(str(path), strategy="unbounded")):
        with pytest.raises(UnsupportedTableError, match=f"{key}={value} is not supported") as err:
            attempt()
        assert "\n" not in str(err.value)
    assert sorted(p.name for p in path.rglob("*")) == before


def test_a_v6_payload_we_cannot_reproduce_is_refused_naming_the_setting(fixture_table):
    path = fixture_table("v6_trips_8i1u")
    props = path / ".hoodie" / "hoodie.properties"
    custom = "com.example.MyPayload"
    props.write_text(props.read_text().replace("org.apache.hudi.common.model.OverwriteWithLatestAvroPayload", custom))
    with pytest.raises(UnsupportedTableError, match=f"hoodie.compaction.payload.class={custom} is not supported"):
        read_arrow(str(path))


def test_logs_of_a_table_without_meta_fields_are_refused_not_merged_by_null_keys(fixture_table, tmp_path):
    """v6_simplekeygen_hivestyle_no_metafields has base files only, read as hudi 0.5.0 reads them. Given a log
    (its records carry no _hoodie_record_key either), a snapshot read or a compaction would merge records by a
    null key: both are refused in one line; the read-optimized view still reads."""
    import shutil

    path = fixture_table("v6_simplekeygen_hivestyle_no_metafields")
    ro = read_arrow(str(path), "read_optimized")
    base = sorted(p for p in path.rglob("*.parquet") if "gold_data" not in p.parts)[0]
    java_log = next(fixture_table("v6_simplekeygen_nonhivestyle").rglob(".*.log.*"))
    file_id, instant = base.name.split("_")[0], base.name.rsplit("_", 1)[1].split(".")[0]
    shutil.copy(java_log, base.parent / f".{file_id}_{instant}.log.1_0-1-1")
    for attempt in (lambda: read_arrow(str(path)), lambda: schedule_compaction(str(path), strategy="unbounded")):
        with pytest.raises(UnsupportedTableError, match="hoodie.populate.meta.fields=false with log files"):
            attempt()
    assert read_arrow(str(path), "read_optimized").equals(ro)
