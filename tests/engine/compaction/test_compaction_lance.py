"""Compacting Java-written Lance tables (Hudi 1.1, `hoodie.table.base.file.format=LANCE`) in place: the new base
file is a Lance file named as Hudi names one, hudi 0.5.0 reads the same snapshot, and RO gains the update."""
from __future__ import annotations

import os

import pytest
from lance.file import LanceFileReader

from engine.compaction import resolve_log_event_times, run_compaction, schedule_compaction
from engine.io import storage
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from tests.support.fixtures import unzip_fixture
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)

LANCE_TABLES = ["v9_trips_lance", "v9_lance_nonhivestyle"]


def _schedule_past_all_data(path: str) -> tuple[str, list[str]]:
    """An event-time plan whose threshold is past every log's event times: every log is folded."""
    view = FileSystemView(path)
    times = resolve_log_event_times(view, view.timeline, view.latest_slices())
    assert times and all(t.source == "decoded" for t in times.values())
    sp = schedule_compaction(path, strategy="event_time", threshold_ms=max(t.max_ms for t in times.values()) + 1)
    assert sp.written
    return sp.instant, [f for op in sp.operations for f in op["deltaFilePaths"]]


@pytest.mark.parametrize("where", ["in_process", "spark"])
@pytest.mark.parametrize("name", LANCE_TABLES)
def test_a_lance_table_compacts_into_lance_base_files(request, tmp_path, name, where):
    path = str(unzip_fixture(name, tmp_path / name))
    snap = rows_by_key(hudi_read(path, "snapshot"))
    assert rows_by_key(hudi_read(path, "read_optimized")) != snap, "the fixture's update lives in a log"
    c, folded = _schedule_past_all_data(path)
    assert folded
    result = run_compaction(path, spark=request.getfixturevalue("spark") if where == "spark" else None)

    assert rows_by_key(hudi_read(path, "snapshot")) == snap          # hudi 0.5.0: unchanged
    assert rows_by_key(read_arrow(path, "snapshot")) == snap         # ours: unchanged
    ro_after = hudi_read(path, "read_optimized")
    assert rows_by_key(ro_after) == snap                             # the update is now in RO
    assert rows_by_key(read_arrow(path, "read_optimized")) == snap
    assert result.base_files
    for rel in result.base_files:
        base = rel if os.path.isabs(rel) else os.path.join(path, rel)
        file_name = os.path.basename(base)
        assert file_name.endswith(f"_{c}.lance")
        reader = LanceFileReader(base)
        meta = reader.metadata()
        assert (meta.major_version, meta.minor_version) == (0, 3)   # Lance 2.0, as the base it replaces
        rows = reader.read_all().to_table()
        assert set(rows.column("_hoodie_file_name").to_pylist()) == {file_name}
        keys = rows.column("_hoodie_record_key").to_pylist()
        assert meta.schema.metadata[b"hoodie_min_record_key"].decode() == min(keys)
        assert meta.schema.metadata[b"hoodie_max_record_key"].decode() == max(keys)
    assert {os.path.basename(p) for p in result.base_files} <= set(ro_after.column("_hoodie_file_name").to_pylist())
    timeline = Timeline.load(path)
    meta = timeline.read_commit_metadata(timeline.last_completed())
    assert meta["compacted"] is True and meta["operationType"] == "COMPACT"


def test_a_lance_table_on_s3_compacts_into_a_lance_base_file(s3_env, tmp_path):  # noqa: F811
    local = str(unzip_fixture("v9_trips_lance", tmp_path / "t"))
    snap = rows_by_key(read_arrow(local, "snapshot"))
    remote = f"{s3_env['bucket_uri']}/v9_trips_lance"
    for folder, _, files in os.walk(local):
        for name in files:
            storage.upload(os.path.join(folder, name), f"{remote}/{os.path.relpath(os.path.join(folder, name), local)}")
    c, _ = _schedule_past_all_data(remote)
    result = run_compaction(remote)
    assert result.base_files and all(p.endswith(f"_{c}.lance") for p in result.base_files)
    assert rows_by_key(read_arrow(remote, "snapshot")) == snap
    assert rows_by_key(read_arrow(remote, "read_optimized")) == snap
    assert rows_by_key(hudi_read(remote, "snapshot", storage_options=s3_env["storage_options"])) == snap
