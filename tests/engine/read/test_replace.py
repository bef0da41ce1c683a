"""Replaced file groups are honoured: insert_overwrite / insert_overwrite_table written as Java writes them
(a replacecommit), and every query, compaction planning, clean, rollback and describe leave out the file
groups a completed replacecommit replaced — on our tables and on a Java-written one, checked against
hudi 0.5.0, which honours replacecommits too."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.cli import main
from engine.errors import CompactionRefused, RollbackRefused, WriteRefused
from engine.io.naming import new_instant_time, parse_base_file_name, parse_log_file_name
from engine.slices.fsview import FileSystemView
from engine.timeline import avro_models as am
from engine.timeline import instants as tl
from engine.timeline.instants import REPLACECOMMIT, Timeline
from engine.timeline.metadata import RequestedReplaceMetadata
from tests.support.fixtures import unzip_fixture
from tests.support.oracle import hudi_read, rows_by_key

COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path", "id", "region", "seq", "note"]
FIRST = [(f"k{i}", "eu" if i % 2 else "us", 1) for i in range(8)]
UPDATE = [("k1", "eu", 2), ("k2", "us", 2)]


def rows_file(tmp: Path, name: str, rows: list[tuple[str, str, int]]) -> str:
    path = tmp / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": k, "region": r, "seq": s, "ts": f"2024-01-0{s}T00:00:00Z",
                                        "note": f"{name}:{k}"}) + "\n" for k, r, s in rows))
    return str(path)


def result(path: str, query: str = "snapshot") -> dict:
    """{(partition, key): row} of our in-process read, which must equal hudi 0.5.0's."""
    ours = rows_by_key(Table.open(path).read(query).table, COLUMNS)
    assert ours == rows_by_key(hudi_read(path, query), COLUMNS), f"{query}: ours and hudi 0.5.0 differ"
    return ours


def notes(rows: dict) -> dict[str, str]:
    return {key: row["note"] for (_, key), row in rows.items()}


@pytest.fixture(scope="module")
def template(spark, tmp_path_factory) -> str:
    """Two partitions x two buckets, a first insert and an update (log-only file groups)."""
    tmp = tmp_path_factory.mktemp("replace")
    table = Table.create(str(tmp / "t"), name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         partition_fields=["region"], settings={"hoodie.bucket.index.num.buckets": "2"})
    table.write(rows_file(tmp, "first", FIRST))
    table.write(rows_file(tmp, "update", UPDATE))
    return table.path


@pytest.fixture
def table(template, tmp_path) -> Table:
    shutil.copytree(template, tmp_path / "t", symlinks=True)
    return Table.open(str(tmp_path / "t"))


def live_groups(path: str) -> set[tuple[str, str]]:
    return {(g.partition_path, g.file_id) for g in FileSystemView(path).file_groups()}


# ------------------------------------------------------------------------------------------ overwrites

def test_insert_overwrite_replaces_the_written_partitions_only(table, tmp_path):
    before = result(table.path)
    eu_groups = {g for g in live_groups(table.path) if g[0] == "eu"}
    out = table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3), ("k9", "eu", 3)]), "insert_overwrite")
    assert out.action == "replacecommit" and out.records_written == 2 and out.log_files == []
    assert {p: set(ids) for p, ids in out.replaced_file_groups.items()} == \
        {p: {f for q, f in eu_groups if q == p} for p, _ in eu_groups}
    after = result(table.path)
    # eu holds exactly the overwrite's rows; us is untouched.
    assert notes(after) == {**{k: v for k, v in notes(before).items() if k in {"k0", "k2", "k4", "k6"}},
                            "k1": "ow:k1", "k9": "ow:k9"}
    # RO: the overwrite's base files (us has log-only groups, so nothing there yet), the same in hudi 0.5.0.
    assert notes(result(table.path, "read_optimized")) == {"k1": "ow:k1", "k9": "ow:k9"}
    assert not live_groups(table.path) & eu_groups
    described = table.describe()
    assert {(g.partition, g.file_id) for g in described.replaced_file_groups} == eu_groups
    assert all(g.replaced_by == out.instant for g in described.replaced_file_groups)


def test_replacecommit_files_are_javas(table, tmp_path):
    out = table.write(rows_file(tmp_path, "ow", [("k3", "eu", 3)]), "insert_overwrite")
    hoodie = Path(table.path) / ".hoodie"
    requested = (hoodie / f"{out.instant}.replacecommit.requested").read_bytes()
    # Java 0.14/0.15: `new HoodieRequestedReplaceMetadata()`, every field null, with Java's writer schema.
    assert am.read_requested_replace(requested) == {"operationType": None, "clusteringPlan": None,
                                                    "extraMetadata": None, "version": None}
    assert [f["name"] for f in am.avro_writer_schema(requested)["fields"]] == \
        ["operationType", "clusteringPlan", "extraMetadata", "version"]
    assert not RequestedReplaceMetadata.from_bytes(requested).is_clustering
    inflight = json.loads((hoodie / f"{out.instant}.replacecommit.inflight").read_text())
    assert inflight["operationType"] == "INSERT_OVERWRITE"
    done = json.loads((hoodie / f"{out.instant}.replacecommit").read_text())
    assert list(done) == ["partitionToWriteStats", "compacted", "extraMetadata", "operationType",
                          "partitionToReplaceFileIds"]
    assert done["operationType"] == "INSERT_OVERWRITE" and done["extraMetadata"]["schema"]
    (stat,) = [s for stats in done["partitionToWriteStats"].values() for s in stats]
    base = parse_base_file_name(os.path.basename(stat["path"]))
    assert base is not None and base.instant == out.instant and stat["prevCommit"] == "null"
    assert "logFiles" not in stat and stat["numInserts"] == 1
    # New groups never reuse a replaced id: the bucket prefix stays, the rest comes from the new instant.
    replaced = {f for ids in done["partitionToReplaceFileIds"].values() for f in ids}
    assert stat["fileId"] not in replaced and stat["fileId"][:8].isdigit()
    base_rows = pq.read_table(Path(table.path) / stat["path"])
    assert set(base_rows.column("_hoodie_file_name").to_pylist()) == {os.path.basename(stat["path"])}


def test_insert_overwrite_table_replaces_every_group(table, tmp_path):
    groups = live_groups(table.path)
    out = table.write(rows_file(tmp_path, "all", [("k2", "us", 3), ("k8", "us", 3)]), "insert_overwrite_table")
    assert {(p, f) for p, ids in out.replaced_file_groups.items() for f in ids} == groups
    assert notes(result(table.path)) == {"k2": "all:k2", "k8": "all:k8"}
    assert notes(result(table.path, "read_optimized")) == {"k2": "all:k2", "k8": "all:k8"}


def test_writes_after_an_overwrite_go_to_the_new_groups(table, tmp_path):
    table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3), ("k9", "eu", 3)]), "insert_overwrite")
    table.write(rows_file(tmp_path, "late", [("k1", "eu", 4), ("k3", "eu", 4), ("k0", "us", 4)]))
    after = result(table.path)
    assert notes(after)["k1"] == "late:k1" and notes(after)["k3"] == "late:k3" and notes(after)["k9"] == "ow:k9"
    assert "k5" not in notes(after) and "k7" not in notes(after)   # replaced, not resurrected
    # No bucket has two live groups; every log of the late write is in a live group.
    view = FileSystemView(table.path)
    buckets = [(g.partition_path, g.file_id[:8]) for g in view.file_groups()]
    assert len(buckets) == len(set(buckets))


def test_overwrite_through_parquet_and_cli(table, tmp_path, capsys):
    src = tmp_path / "ow.parquet"
    pq.write_table(pa.table({"id": ["k0", "k6"], "region": ["us", "us"], "seq": [5, 5],
                             "ts": ["2024-01-05T00:00:00Z"] * 2, "note": ["pq:k0", "pq:k6"]}), src)
    code = main(["write", table.path, "--input", str(src), "--operation", "insert_overwrite", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["action"] == "replacecommit" and len(out["base_files"]) >= 1
    assert {k for k, v in notes(result(table.path)).items() if v.startswith("pq:")} == {"k0", "k6"}
    assert {k for (p, k) in result(table.path) if "us" in p} == {"k0", "k6"}


# ------------------------------------------------------------------------------------------ services

def test_compaction_after_an_overwrite_plans_only_live_groups(table, tmp_path):
    ow = table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3)]), "insert_overwrite")
    table.write(rows_file(tmp_path, "late", [("k1", "eu", 4), ("k0", "us", 4)]))
    replaced = {(p, f) for p, ids in ow.replaced_file_groups.items() for f in ids}
    before = result(table.path)
    plan = table.schedule_compaction(strategy="unbounded")
    planned = {(op.partition, op.file_id) for op in plan.operations}
    assert planned and not planned & replaced and planned <= live_groups(table.path)
    table.run_compaction(plan.instant)
    assert result(table.path) == before


def test_clean_deletes_replaced_groups_once_retention_passes(table, tmp_path):
    ow = table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3)]), "insert_overwrite")
    replaced = {(p, f) for p, ids in ow.replaced_file_groups.items() for f in ids}
    # The replacecommit is the latest commit: a reader as of an older commit may still need the old groups.
    assert table.clean(retain_commits=1, dry_run=True).files_to_delete == {}
    table.write(rows_file(tmp_path, "late", [("k0", "us", 4)]))
    expected = result(table.path), result(table.path, "read_optimized")
    cleaned = table.clean(retain_commits=1)
    deleted = {(p, _group_of(n)) for p, names in cleaned.deleted.items() for n in names}
    assert replaced <= deleted
    assert not FileSystemView(table.path).replaced_file_groups()
    assert (result(table.path), result(table.path, "read_optimized")) == expected


def _group_of(name: str) -> str:
    parsed = parse_base_file_name(name) or parse_log_file_name(name)
    assert parsed is not None
    return parsed.file_id


def test_pending_clustering_blocks_trigger_and_overwrite_and_hides_its_output(table, tmp_path):
    group = sorted(FileSystemView(table.path).file_groups(), key=lambda g: g.file_id)[0]
    ts = new_instant_time()   # a real clock time: a far-future one would leak into later instants of this process
    plan = {"operationType": "cluster", "extraMetadata": None, "version": 1, "clusteringPlan": {
        "inputGroups": [{"slices": [{"dataFilePath": None, "deltaFilePaths": [lf.name for lf in group.latest.log_files],
                                     "fileId": group.file_id, "partitionPath": group.partition_path,
                                     "bootstrapFilePath": None, "version": 1}],
                         "metrics": {}, "numOutputFileGroups": 1, "extraMetadata": None, "version": 1}],
        "strategy": {"strategyClassName": "org.apache.hudi.client.clustering.run.strategy."
                                          "SparkSortAndSizeExecutionStrategy", "strategyParams": {}, "version": 1},
        "extraMetadata": {}, "version": 1, "preserveHoodieMetadata": True}}
    before = result(table.path)
    tl.create_requested(table.path, ts, REPLACECOMMIT, am.write_requested_replace(plan))
    tl.transition_to_inflight(table.path, ts, REPLACECOMMIT)
    # Its output, written while pending, must stay invisible until the replacecommit completes.
    output = Path(table.path) / group.partition_path / f"ffffffff-0000-4000-8000-000000000000-0_0-1-1_{ts}.parquet"
    pq.write_table(table.read().table, output)
    assert Timeline.load(table.path).requested_replace(ts).slices[0].file_id == group.file_id
    with pytest.raises(CompactionRefused) as refused:
        table.schedule_compaction(strategy="unbounded")
    assert refused.value.reason == "pending_clustering" and refused.value.blocking_instant == ts
    with pytest.raises(WriteRefused):
        table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3)]), "insert_overwrite")
    with pytest.raises(RollbackRefused):
        table.rollback(ts)
    assert result(table.path) == before   # the clustering's output is not committed: invisible
    assert {g["fileId"] for g in table.clean(retain_versions=1, dry_run=True).skipped_file_groups} == {group.file_id}
    table.recover()   # not a write of ours: recover leaves Java's clustering alone
    assert Timeline.load(table.path).pending_clustering()


# ------------------------------------------------------------------------------------------ rollback

def test_rollback_of_an_overwrite_brings_the_replaced_groups_back(table, tmp_path):
    before = result(table.path), result(table.path, "read_optimized")
    ow = table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3)]), "insert_overwrite_table")
    rolled = table.rollback(ow.instant)
    assert rolled.was_completed and rolled.action == REPLACECOMMIT
    assert (result(table.path), result(table.path, "read_optimized")) == before
    assert not [n for n in os.listdir(Path(table.path) / ".hoodie") if n.startswith(ow.instant)]


def test_rollback_of_an_overwrite_is_refused_after_a_later_write(table, tmp_path):
    ow = table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3)]), "insert_overwrite")
    table.write(rows_file(tmp_path, "late", [("k3", "eu", 4)]))
    with pytest.raises(RollbackRefused) as refused:
        table.rollback(ow.instant)
    assert refused.value.reason == "rollback_dependency"


def test_rollback_of_an_overwrite_is_refused_once_its_replaced_groups_are_cleaned(table, tmp_path):
    """KEEP_LATEST_FILE_VERSIONS deletes replaced groups at once; bringing them back is then impossible, and
    rolling the overwrite back anyway would leave its partitions empty."""
    ow = table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3)]), "insert_overwrite")
    table.clean(retain_versions=1)
    after = result(table.path)
    with pytest.raises(RollbackRefused, match="already deleted") as refused:
        table.rollback(ow.instant)
    assert refused.value.reason == "rollback_dependency" and refused.value.blocking_instant == ow.instant
    assert result(table.path) == after


def test_a_failed_overwrite_is_rolled_back(table, tmp_path, monkeypatch):
    before = result(table.path)
    monkeypatch.setenv("TIDEMARK_FAULT", "write:tasks:raise")
    with pytest.raises(Exception, match="rolled back"):
        table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3)]), "insert_overwrite_table")
    monkeypatch.delenv("TIDEMARK_FAULT")
    timeline = Timeline.load(table.path)
    assert not timeline.pending() and not [i for i in timeline.instants if i.action == REPLACECOMMIT]
    assert result(table.path) == before
    assert not table.recover().changed


# ------------------------------------------------------------------------------------------ Java-written table

SF = "city=san_francisco"


def java_overwrite(base: Path, ts: str) -> tuple[str, str]:
    """Add to a Java-written table an insert_overwrite replacecommit exactly as Java 0.14/0.15 writes it
    (fixture v6_simplekeygen_nonhivestyle_overwritetable): the san_francisco group is replaced by a new
    file group whose base holds two of its riders with a new fare. Returns (replaced id, new id)."""
    pdir = base / SF
    (old_base,) = [n for n in os.listdir(pdir) if parse_base_file_name(n)]
    old_id = parse_base_file_name(old_base).file_id
    new_id = "5f0b2c1e-7d3a-4c55-9a1e-2f6d8b0c4e71-0"
    name = f"{new_id}_0-88-119_{ts}.parquet"
    rows = pq.read_table(pdir / old_base).slice(0, 2)
    n = rows.num_rows
    rows = rows.set_column(rows.schema.get_field_index("_hoodie_commit_time"), "_hoodie_commit_time",
                           pa.array([ts] * n))
    rows = rows.set_column(rows.schema.get_field_index("_hoodie_commit_seqno"), "_hoodie_commit_seqno",
                           pa.array([f"{ts}_0_{i}" for i in range(n)]))
    rows = rows.set_column(rows.schema.get_field_index("_hoodie_file_name"), "_hoodie_file_name",
                           pa.array([name] * n))
    rows = rows.set_column(rows.schema.get_field_index("fare"), "fare", pc.add(rows.column("fare"), 1000.0))
    pq.write_table(rows, pdir / name)
    hoodie = base / ".hoodie"
    schema = json.loads((hoodie / "20250331030645735.deltacommit").read_text())["extraMetadata"]["schema"]
    jackson = {"indent": 2, "separators": (",", " : ")}
    stat = {"fileId": new_id, "path": f"{SF}/{name}", "cdcStats": None, "prevCommit": "null", "numWrites": n,
            "numDeletes": 0, "numUpdateWrites": 0, "numInserts": n, "totalWriteBytes": (pdir / name).stat().st_size,
            "totalWriteErrors": 0, "tempPath": None, "partitionPath": SF, "totalLogRecords": 0,
            "totalLogFilesCompacted": 0, "totalLogSizeCompacted": 0, "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0, "totalCorruptLogBlock": 0, "totalRollbackBlocks": 0,
            "fileSizeInBytes": (pdir / name).stat().st_size, "minEventTime": None, "maxEventTime": None,
            "runtimeStats": {"totalScanTime": 0, "totalUpsertTime": 0, "totalCreateTime": 85}}
    workload = {**stat, "fileId": "", "path": None, "numWrites": 0, "partitionPath": None, "runtimeStats": None}
    (hoodie / f"{ts}.replacecommit.requested").write_bytes(am.write_requested_replace(
        {"operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None}))
    (hoodie / f"{ts}.replacecommit.inflight").write_text(json.dumps(
        {"partitionToWriteStats": {SF: [workload]}, "compacted": False, "extraMetadata": {},
         "operationType": "INSERT_OVERWRITE"}, **jackson))
    (hoodie / f"{ts}.replacecommit").write_text(json.dumps(
        {"partitionToWriteStats": {SF: [stat]}, "compacted": False, "extraMetadata": {"schema": schema},
         "operationType": "INSERT_OVERWRITE", "partitionToReplaceFileIds": {SF: [old_id]}}, **jackson))
    return old_id, new_id


@pytest.fixture
def java_table(tmp_path) -> Path:
    return unzip_fixture("v6_trips_8i1u", tmp_path / "java")


def java_rows(path: Path, query: str = "snapshot") -> dict:
    cols = ["_hoodie_record_key", "_hoodie_partition_path", "rider", "fare", "ts"]
    ours = rows_by_key(Table.open(str(path)).read(query).table, cols)
    assert ours == rows_by_key(hudi_read(path, query), cols), f"{query}: ours and hudi 0.5.0 differ"
    return ours


def test_java_table_with_a_replacecommit(java_table):
    before = java_rows(java_table)
    old_id, new_id = java_overwrite(java_table, "20250401000000000")
    for query in ("snapshot", "read_optimized"):
        after = java_rows(java_table, query)
        sf = {k: row for k, row in after.items() if k[0] == SF}
        assert len(sf) == 2 and all(row["fare"] > 1000 for row in sf.values())
        assert {k: v for k, v in after.items() if k[0] != SF} == {k: v for k, v in before.items() if k[0] != SF}
    view = FileSystemView(str(java_table))
    assert [(g.file_id, by) for g, by in view.replaced_file_groups()] == [(old_id, "20250401000000000")]
    assert new_id in {g.file_id for g in view.file_groups()} and old_id not in {g.file_id for g in view.file_groups()}
    # The replaced group still has its log on disk; compaction must not plan it (nothing live has logs).
    table = Table.open(str(java_table))
    assert table.schedule_compaction(strategy="unbounded").state == "nothing_to_do"
    assert table.metrics().remaining_log_files == 0 and table.tide() == []
    expected = java_rows(java_table), java_rows(java_table, "read_optimized")
    cleaned = table.clean(retain_versions=1)
    assert {_group_of(n) for names in cleaned.deleted.values() for n in names} == {old_id}
    assert not any(old_id in n for n in os.listdir(java_table / SF))
    assert (java_rows(java_table), java_rows(java_table, "read_optimized")) == expected


# ------------------------------------------------------------------------------------------ history queries

def test_time_travel_and_incremental_across_an_overwrite(table, tmp_path):
    """Before the replacecommit the replaced groups were live (and its new groups did not exist); an
    incremental range holding the overwrite returns its rows. Ours equals hudi 0.5.0 for every instant."""
    before = [i.instant for i in table.timeline()]
    ow = table.write(rows_file(tmp_path, "ow", [("k1", "eu", 3), ("k9", "eu", 3)]), "insert_overwrite").instant
    for as_of in before + [ow]:
        ours = rows_by_key(table.read("time_travel", as_of=as_of).table, COLUMNS)
        assert ours == rows_by_key(hudi_read(table.path, "time_travel", as_of=as_of), COLUMNS), as_of
    assert notes(rows_by_key(table.read("time_travel", as_of=before[-1]).table, COLUMNS)) == \
        notes(rows_by_key(hudi_read(table.path, "time_travel", as_of=before[-1]), COLUMNS))
    assert "k9" not in notes(rows_by_key(table.read("time_travel", as_of=before[-1]).table, COLUMNS))
    changed = rows_by_key(table.read("incremental", begin=before[-1], end=ow).table, COLUMNS)
    assert changed == rows_by_key(hudi_read(table.path, "incremental", begin=before[-1], end=ow), COLUMNS)
    assert notes(changed) == {"k1": "ow:k1", "k9": "ow:k9"}
