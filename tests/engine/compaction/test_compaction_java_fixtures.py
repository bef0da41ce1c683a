"""Compacting Java-written v6 tables in place: hudi 0.5.0 reads the same snapshot, and RO gains the update."""
from __future__ import annotations

import os

import pytest

from engine.compaction import resolve_log_event_times, run_compaction, schedule_compaction
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from tests.support.fixtures import unzip_fixture
from tests.support.oracle import hudi_read, rows_by_key

FIXTURES_WITH_LOGS = ["v6_trips_8i1u", "v6_nonpartitioned", "v6_complexkeygen_hivestyle",
                      "v6_simplekeygen_nonhivestyle"]


@pytest.mark.parametrize("strategy", ["event_time", "unbounded"])
@pytest.mark.parametrize("name", FIXTURES_WITH_LOGS)
def test_java_table_compacts_in_place(spark, tmp_path, name, strategy):
    path = str(unzip_fixture(name, tmp_path / name))
    snap = rows_by_key(hudi_read(path, "snapshot"))
    ro_before = rows_by_key(hudi_read(path, "read_optimized"))
    assert ro_before != snap, "the fixture's update lives in a log, so RO lacks it"
    assert rows_by_key(read_arrow(path, "snapshot")) == snap

    view = FileSystemView(path)
    times = resolve_log_event_times(view, view.timeline, view.latest_slices())
    assert times and all(t.source == "decoded" for t in times.values())  # Java: no header, null stats
    threshold = min(t.min_ms for t in times.values()) if strategy == "event_time" else None
    sp = schedule_compaction(path, strategy=strategy, threshold_ms=threshold)
    assert sp.written and sum(len(op["deltaFilePaths"]) for op in sp.operations) >= 1
    result = run_compaction(path, spark=spark)

    assert rows_by_key(hudi_read(path, "snapshot")) == snap          # hudi 0.5.0: unchanged
    assert rows_by_key(read_arrow(path, "snapshot")) == snap         # ours: unchanged
    ro_after = hudi_read(path, "read_optimized")
    assert rows_by_key(ro_after) == snap                             # the update is now in RO
    assert rows_by_key(read_arrow(path, "read_optimized")) == snap
    new_bases = {p.rsplit("/", 1)[-1] for p in result.base_files}
    assert all(n.endswith(f"_{sp.instant}.parquet") for n in new_bases)
    assert new_bases <= set(ro_after.column("_hoodie_file_name").to_pylist())
    meta = Timeline.load(path).read_commit_metadata(Timeline.load(path).last_completed())
    assert meta["compacted"] is True and meta["operationType"] == "COMPACT"
    assert meta["extraMetadata"]["schema"]                           # hudi-rs needs it


# ---------------------------------------------------------------------------------------------- table version 8


def test_java_v8_table_compacts_in_place_by_event_time(spark, tmp_path):
    """Hudi 1.x fixture: the plan, the completed `<requested>_<completion>.commit` (Avro) and the new base file are
    what hudi 0.5.0 reads; its snapshot is unchanged and RO gains the post-compaction update. The metadata table
    is switched off first (hudi 0.5.0 would otherwise list files from it and miss ours)."""
    path = str(unzip_fixture("v8_trips_8i3u1d", tmp_path / "v8"))
    snap = rows_by_key(hudi_read(path, "snapshot"))
    assert rows_by_key(hudi_read(path, "read_optimized")) != snap
    view = FileSystemView(path)
    times = resolve_log_event_times(view, view.timeline, view.latest_slices())
    assert len(times) == 1 and all(t.source == "decoded" for t in times.values())
    threshold = min(t.min_ms for t in times.values())
    sp = schedule_compaction(path, strategy="event_time", threshold_ms=threshold)
    assert sp.written and [op["deltaFilePaths"] for op in sp.operations] == [
        [".8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_20251220210130911.log.1_0-1139-3316"]]
    assert not os.path.exists(os.path.join(path, ".hoodie", "metadata"))
    run_compaction(path, spark=spark)

    timeline = Timeline.load(path)
    done = timeline.get(sp.instant)[0]
    assert done.action == "commit" and done.completion_time and done.completion_time > sp.instant
    assert os.path.exists(os.path.join(path, ".hoodie", "timeline", f"{sp.instant}_{done.completion_time}.commit"))
    assert not os.path.exists(os.path.join(path, ".hoodie", f"{sp.instant}.commit"))   # nothing in layout 1's place
    assert timeline.commit_metadata(done).is_compaction
    assert rows_by_key(hudi_read(path, "snapshot")) == snap
    assert rows_by_key(hudi_read(path, "read_optimized")) == snap
    assert rows_by_key(read_arrow(path, "snapshot")) == snap
    assert rows_by_key(read_arrow(path, "read_optimized")) == snap
