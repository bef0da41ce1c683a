"""The v6 active timeline: loading the Java fixtures, state transitions, commit JSON, hudi 0.5.0 compatibility."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from engine.errors import TableNotFoundError, UnsupportedTableError
from engine.timeline import avro_models as am
from engine.timeline import instants as tl
from engine.timeline.instants import Instant, State, Timeline
from engine.timeline.metadata import WriteStat
from tests.support.fixtures import fixture_zip

TRIPS_SCHEMA_FIELDS = ["ts", "uuid", "rider", "driver", "fare", "city"]


def unzip(name: str, dest: Path) -> Path:
    with zipfile.ZipFile(fixture_zip(name)) as zf:
        for info in zf.infolist():
            if not info.filename.startswith("__MACOSX"):
                zf.extract(info, dest)
    return dest / name


def _dc(ts: str) -> Instant:
    return Instant(ts, "deltacommit", State.COMPLETED)


EXPECTED = {
    "v6_trips_8i1u": [_dc("20250331030642808"), _dc("20250331030645735")],
    "v6_nonpartitioned": [_dc("20250117083125837"), _dc("20250117083136333")],
    "v6_complexkeygen_hivestyle": [_dc("20250118044623136"), _dc("20250118044632401")],
    "v6_simplekeygen_nonhivestyle": [_dc("20250121000547796"), _dc("20250121000557095")],
    "v6_empty": [],
}


@pytest.fixture
def trips(tmp_path: Path) -> Path:
    return unzip("v6_trips_8i1u", tmp_path)


@pytest.fixture
def empty_table(tmp_path: Path) -> Path:
    return unzip("v6_empty", tmp_path)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_load_v6_fixtures(name: str, tmp_path: Path) -> None:
    t = Timeline.load(str(unzip(name, tmp_path)))
    assert t.instants == EXPECTED[name]
    assert t.completed() == EXPECTED[name]
    assert t.pending() == [] and t.pending_compactions() == [] and t.pending_clustering() == []
    assert t.completed_timestamps() == {i.timestamp for i in EXPECTED[name]}
    assert t.last_completed() == (EXPECTED[name][-1] if EXPECTED[name] else None)
    if EXPECTED[name]:
        assert t.is_completed(EXPECTED[name][0].timestamp)
        assert json.loads(t.latest_schema())["type"] == "record"
    else:
        assert t.latest_schema() is None


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="hoodie.properties"):
        Timeline.load(str(tmp_path))
    path = unzip("v8_trips_8i3u1d", tmp_path)
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.timeline.layout.version=2", "hoodie.timeline.layout.version=3"))
    with pytest.raises(UnsupportedTableError, match="layout.version=3"):
        Timeline.load(str(path))


def test_read_commit_metadata_and_schema(trips: Path) -> None:
    t = Timeline.load(str(trips))
    meta = t.read_commit_metadata(t.instants[-1])
    assert meta["operationType"] == "UPSERT_PREPPED"
    stat = meta["partitionToWriteStats"]["city=san_francisco"][0]
    assert stat["logFiles"] == [".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85"]
    inflight = t.read_commit_metadata(Instant("20250331030645735", "deltacommit", State.INFLIGHT))
    assert "partitionToWriteStats" in inflight
    schema = json.loads(t.latest_schema())
    assert [f["name"] for f in schema["fields"]] == TRIPS_SCHEMA_FIELDS
    with pytest.raises(tl.TimelineError):
        t.read_commit_metadata(Instant("20250331030645735", "deltacommit", State.REQUESTED))


def test_parse_instant_file_names() -> None:
    p = tl.parse_instant_file_name
    assert p("20250101000000000.deltacommit") == Instant("20250101000000000", "deltacommit", State.COMPLETED)
    assert p("20250101000000000.compaction.requested") == Instant("20250101000000000", "compaction", State.REQUESTED)
    assert p("20250101000000000.inflight") == Instant("20250101000000000", "commit", State.INFLIGHT)
    assert p("20250101000000.clean") == Instant("20250101000000", "clean", State.COMPLETED)
    for junk in ("hoodie.properties", "20250101000000000.compaction", "20250101000000000.foo",
                 ".temp-abc", "archived", "2025.deltacommit", "20250101000000000_20250101000000001.deltacommit"):
        assert p(junk) is None, junk
    for inst in (Instant("1" * 17, a, s) for a in ("deltacommit", "compaction", "commit", "clean") for s in State):
        parsed = p(inst.file_name)
        # a completed compaction is named and parsed as a commit
        assert parsed is not None and parsed.state == inst.state and parsed.timestamp == inst.timestamp


def test_instant_ordering() -> None:
    a = Instant("20250101000000000", "deltacommit", State.COMPLETED)
    b = Instant("20250101000000001", "clean", State.REQUESTED)
    c = Instant("20250101000000001", "commit", State.INFLIGHT)
    assert sorted([c, b, a]) == [a, b, c]
    assert State.REQUESTED < State.INFLIGHT < State.COMPLETED


def test_deltacommit_lifecycle(empty_table: Path) -> None:
    base, ts = str(empty_table), "20250101000000000"
    tl.create_requested(base, ts, "deltacommit")
    assert Timeline.load(base).instants == [Instant(ts, "deltacommit", State.REQUESTED)]
    with pytest.raises(tl.InstantExistsError):
        tl.create_requested(base, ts, "deltacommit")
    with pytest.raises(tl.TimelineError, match="missing"):
        tl.complete(base, ts, "deltacommit", b"{}")
    tl.transition_to_inflight(base, ts, "deltacommit")
    t = Timeline.load(base)
    assert t.pending() == [Instant(ts, "deltacommit", State.INFLIGHT)] and not t.is_completed(ts)
    body = tl.commit_metadata_json({}, schema='{"type":"record","name":"r","fields":[]}', operation_type="UPSERT")
    tl.complete(base, ts, "deltacommit", body)
    t = Timeline.load(base)
    assert t.instants == [_dc(ts)] and t.is_completed(ts)
    assert t.read_commit_metadata(t.instants[0])["operationType"] == "UPSERT"
    hoodie = empty_table / ".hoodie"
    assert {f.name for f in hoodie.iterdir() if f.name.startswith(ts)} == {
        f"{ts}.deltacommit.requested", f"{ts}.deltacommit.inflight", f"{ts}.deltacommit"}
    assert not [f for f in os.listdir(hoodie) if f.startswith(".temp-")]  # no temp leftovers
    with pytest.raises(tl.InstantExistsError):
        tl.complete(base, ts, "deltacommit", body)
    with pytest.raises(tl.TimelineError, match="already completed"):
        tl.delete_instant_files(base, ts, "deltacommit")


def test_compaction_lifecycle_and_revert(empty_table: Path) -> None:
    base, ts = str(empty_table), "20250102000000000"
    plan = {"operations": [am.compaction_operation(
        base_instant="20250101000000000", file_id="f-0", partition_path="p",
        delta_file_names=[".f-0_20250101000000000.log.1_0-1-1"], data_file_name=None,
        symlink_operations=[])]}
    tl.create_requested(base, ts, "compaction", am.write_compaction_plan(plan))
    t = Timeline.load(base)
    assert t.pending_compactions() == [Instant(ts, "compaction", State.REQUESTED)]
    assert t.read_compaction_plan(ts)["operations"][0]["fileId"] == "f-0"
    with pytest.raises(tl.TimelineError, match="not found"):
        t.read_compaction_plan("20250103000000000")

    tl.transition_to_inflight(base, ts, "compaction")
    assert Timeline.load(base).pending_compactions() == [Instant(ts, "compaction", State.INFLIGHT)]
    assert (empty_table / ".hoodie" / f"{ts}.compaction.inflight").read_bytes() == b""

    tl.revert_compaction_inflight(base, ts)  # failed execution: back to requested, plan kept
    t = Timeline.load(base)
    assert t.pending_compactions() == [Instant(ts, "compaction", State.REQUESTED)]
    assert t.read_compaction_plan(ts)["operations"][0]["deltaFilePaths"] == plan["operations"][0]["deltaFilePaths"]
    with pytest.raises(tl.TimelineError, match="not inflight"):
        tl.revert_compaction_inflight(base, ts)

    tl.transition_to_inflight(base, ts, "compaction")
    body = tl.commit_metadata_json({}, schema="{}", operation_type="COMPACT", compacted=True)
    path = tl.complete(base, ts, "compaction", body)
    assert path.endswith(f"{ts}.commit")
    t = Timeline.load(base)
    assert t.instants == [Instant(ts, "commit", State.COMPLETED)] and t.pending_compactions() == []
    assert t.read_commit_metadata(t.instants[0])["compacted"] is True
    assert t.read_compaction_plan(ts)["operations"]  # the plan stays readable after completion
    with pytest.raises(tl.TimelineError, match="already completed"):
        tl.revert_compaction_inflight(base, ts)


def test_delete_requested_plan(empty_table: Path) -> None:
    base, ts = str(empty_table), "20250102000000000"
    tl.create_requested(base, ts, "compaction", am.write_compaction_plan({"operations": []}))
    tl.transition_to_inflight(base, ts, "compaction")
    removed = tl.delete_instant_files(base, ts, "compaction")
    assert [os.path.basename(p) for p in removed] == [f"{ts}.compaction.inflight", f"{ts}.compaction.requested"]
    assert Timeline.load(base).instants == []
    with pytest.raises(tl.TimelineError, match="unknown timeline action"):
        tl.create_requested(base, ts, "bogus")
    with pytest.raises(TableNotFoundError):
        tl.create_requested(str(empty_table / "nope"), ts, "deltacommit")


_REQUESTED_REPLACE = {
    "type": "record", "name": "HoodieRequestedReplaceMetadata", "namespace": am.NAMESPACE,
    "fields": [{"name": "operationType", "type": ["null", "string"], "default": None},
               {"name": "version", "type": ["int", "null"], "default": 1}],
}


def test_pending_clustering(empty_table: Path) -> None:
    base = str(empty_table)
    tl.create_requested(base, "20250101000000001", "replacecommit",
                        am.write_avro_instant(_REQUESTED_REPLACE, {"operationType": "cluster"}))
    tl.create_requested(base, "20250101000000002", "replacecommit", b"")  # insert_overwrite style
    tl.create_requested(base, "20250101000000003", "replacecommit",
                        am.write_avro_instant(_REQUESTED_REPLACE, {"operationType": "insert_overwrite"}))
    t = Timeline.load(base)
    assert [i.timestamp for i in t.pending_clustering()] == ["20250101000000001"]
    assert len(t.pending()) == 3


def test_commit_metadata_json_matches_java_keys(trips: Path) -> None:
    t = Timeline.load(str(trips))
    java_delta = t.read_commit_metadata(t.instants[-1])
    java_insert = t.read_commit_metadata(t.instants[0])
    delta = WriteStat(file_id="f-0", path="p/.f-0_1.log.1_0-1-1", partition_path="p", prev_commit="1",
                          log_version=1, base_file="f-0_0-1-1_1.parquet", log_files=(".f-0_1.log.1_0-1-1",),
                          min_event_time=100, max_event_time=200).to_json()
    insert = WriteStat(file_id="g-0", path="p/g-0_0-1-1_1.parquet", partition_path="p", num_inserts=3,
                           num_writes=3, total_write_bytes=10).to_json()
    java_delta_stat = java_delta["partitionToWriteStats"]["city=san_francisco"][0]
    java_insert_stat = java_insert["partitionToWriteStats"]["city=chennai"][0]
    assert list(delta) == list(java_delta_stat)
    assert list(insert) == list(java_insert_stat)
    assert list(delta["runtimeStats"]) == list(java_delta_stat["runtimeStats"])
    assert insert["prevCommit"] == "null" and insert["fileSizeInBytes"] == 10
    assert delta["minEventTime"] == 100 and delta["recordsStats"] == {"val": None}

    doc = json.loads(tl.commit_metadata_json({"p": [delta, insert]}, schema="S", operation_type="UPSERT",
                                             extra={"k": "v", "schema": ""}))
    assert list(doc) == list(java_delta)
    assert doc["extraMetadata"] == {"schema": "S", "k": "v"} and doc["compacted"] is False
    with pytest.raises(tl.TimelineError):
        tl.commit_metadata_json({}, schema="", operation_type="UPSERT")
    replace = json.loads(tl.commit_metadata_json({}, schema="S", operation_type="INSERT_OVERWRITE",
                                                 partition_to_replace_file_ids={"p": ["f-0"]}))
    assert replace["partitionToReplaceFileIds"] == {"p": ["f-0"]}


def _snapshot(base: Path) -> list[dict]:
    from hudi import HudiReadOptions, HudiTable

    batches = HudiTable(str(base)).read(HudiReadOptions())
    return pa.Table.from_batches(batches).select(TRIPS_SCHEMA_FIELDS).sort_by("uuid").to_pylist()


def test_hudi_reader_tolerates_our_timeline_files(trips: Path) -> None:
    before = _snapshot(trips)
    assert len(before) == 8
    base = str(trips)
    # Our re-encoding of the last deltacommit must be accepted exactly like Java's.
    t = Timeline.load(base)
    last = t.instants[-1]
    java = t.read_commit_metadata(last)
    stats = {p: [WriteStat(
        file_id=s["fileId"], path=s["path"], partition_path=s["partitionPath"], prev_commit=s["prevCommit"],
        num_writes=s["numWrites"], num_update_writes=s["numUpdateWrites"], total_write_bytes=s["totalWriteBytes"],
        log_version=s["logVersion"], base_file=s["baseFile"], log_files=s["logFiles"],
        min_event_time=1, max_event_time=2).to_json() for s in ss] for p, ss in java["partitionToWriteStats"].items()}
    (trips / ".hoodie" / last.file_name).write_bytes(tl.commit_metadata_json(
        stats, schema=java["extraMetadata"]["schema"], operation_type=java["operationType"]))

    ts_c, ts_clean = "20250331030650000", "20250331030651000"
    plan = {"operations": [am.compaction_operation(
        base_instant="20250331030642808", file_id="d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0",
        partition_path="city=san_francisco", delta_file_names=java["partitionToWriteStats"]["city=san_francisco"][0]["logFiles"],
        data_file_name="d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet",
        symlink_operations=[])]}
    tl.create_requested(base, ts_c, "compaction", am.write_compaction_plan(plan))
    tl.transition_to_inflight(base, ts_c, "compaction")
    tl.create_requested(base, ts_clean, "clean", am.write_clean_plan({"policy": "KEEP_LATEST_COMMITS"}))
    tl.transition_to_inflight(base, ts_clean, "clean")
    tl.complete(base, ts_clean, "clean", am.write_clean_metadata({
        "startCleanTime": ts_clean, "timeTakenInMillis": 1, "totalFilesDeleted": 0,
        "earliestCommitToRetain": "20250331030642808", "partitionMetadata": {}}))
    ts_rb = "20250331030652000"
    tl.create_requested(base, ts_rb, "rollback", am.write_rollback_plan({
        "instantToRollback": {"commitTime": "20250331030649000", "action": "deltacommit"}, "RollbackRequests": []}))
    tl.transition_to_inflight(base, ts_rb, "rollback")
    tl.complete(base, ts_rb, "rollback", am.write_rollback_metadata({
        "startRollbackTime": ts_rb, "timeTakenInMillis": 1, "totalFilesDeleted": 0,
        "commitsRollback": ["20250331030649000"], "partitionMetadata": {},
        "instantsRollback": [{"commitTime": "20250331030649000", "action": "deltacommit"}]}))
    t = Timeline.load(base)
    assert [i.action for i in t.pending()] == ["compaction"]
    assert t.is_completed(ts_clean) and t.is_completed(ts_rb)
    assert _snapshot(trips) == before


def _properties_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each time the timeline reads the layout keys out of hoodie.properties (a GET on an object store)."""
    reads: list[str] = []
    real = tl._timeline_properties

    def spy(text: str) -> dict[str, str]:
        reads.append(text)
        return real(text)

    monkeypatch.setattr(tl, "_timeline_properties", spy)
    return reads


def test_one_operation_reads_the_layout_keys_once(empty_table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base, ts = str(empty_table), "20250101000000000"
    reads = _properties_reads(monkeypatch)
    with tl.layout_memo(), tl.layout_memo():   # nested scopes share the outer one
        Timeline.load(base)
        tl.create_requested(base, ts, "deltacommit")
        tl.transition_to_inflight(base, ts, "deltacommit")
        assert Timeline.load(base).pending() == [Instant(ts, "deltacommit", State.INFLIGHT)]
    assert len(reads) == 1
    # outside a scope every call reads the file: nothing outlives the operation that read it
    Timeline.load(base)
    tl.delete_instant_files(base, ts, "deltacommit")
    assert len(reads) == 3


def test_table_operations_each_read_the_layout_keys_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import Table

    table = Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts")
    src = tmp_path / "b.jsonl"
    src.write_text('{"id": "a", "seq": 1, "ts": "2025-01-01T00:00:00Z"}\n')
    reads = _properties_reads(monkeypatch)
    table.write(str(src))
    assert len(reads) == 1   # was 7: each timeline load and each instant transition read the file again
    reads.clear()
    table.write(str(src))
    assert len(reads) == 1 and table.read().rows == 1
