"""The symlink-aware cleaner on real event-time compacted tables: old slices go, live link targets stay,
snapshot and RO (ours and hudi 0.5.0) are unchanged, and the clean instants are real Hudi Avro records."""
from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.config.layout import create_table
from engine.io.naming import new_instant_time, parse_base_file_name, parse_log_file_name
from engine.read.query import QuerySpec, read_arrow
from engine.services.clean import KEEP_LATEST_FILE_VERSIONS, CleanRefused, _earliest_to_retain, _plan_record, plan_clean, run_clean
from engine.services.recovery import recover as recover_table
from engine.slices.fsview import FileSystemView
from engine.timeline import avro_models
from engine.timeline.instants import CLEAN, COMPACTION, DELTACOMMIT, Instant, State, Timeline, create_requested, transition_to_inflight
from engine.write.pipeline import write_dataframe
from tests.support.oracle import hudi_read, rows_by_key

E = 1_700_000_000_000
# D1..D5, then C1 (symlink, threshold E+2600), W6, C2 (symlink, threshold E+3500), W7.
HISTORY = [
    ("upsert", [(i, E + 1000 + i) for i in range(20)]),
    ("upsert", [(i, E + 2000) for i in range(5)] + [(i, E + 2700) for i in range(7, 13)]),
    ("delete", [(5, E + 2500), (6, E + 2500)]),
    ("upsert", [(0, E + 3000), (1, E + 3000), (20, E + 3000)]),
    ("upsert", [(5, E + 4000), (2, E + 4000), (9, E + 4000)]),
]
W6 = [(3, E + 5000), (4, E + 5000), (13, E + 5000)]
W7 = [(7, E + 6000), (8, E + 6000)]


def write(spark, path, op: str, rows: list[tuple[int, int]]) -> str:
    data = pa.table({"id": [f"k{i:02d}" for i, _ in rows], "region": ["eu" if i % 3 else "us" for i, _ in rows],
                     "ts": pa.array([ts for _, ts in rows], pa.int64()),
                     "note": [f"n{i}@{ts - E}" for i, ts in rows]})
    if op == "delete":
        data = data.select(["id", "region", "ts"])
    return write_dataframe(str(path), spark.createDataFrame(data), op).instant


def compact(spark, path, threshold: int, carry: str) -> str:
    plan = schedule_compaction(str(path), threshold_ms=threshold, carry_over=carry)
    assert plan.written
    run_compaction(str(path), spark=spark)
    return plan.instant


@pytest.fixture(scope="module")
def template(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("clean") / "t"
    create_table(str(path), name="t", record_keys=["id"], partition_fields=["region"], ordering_field="ts",
                 event_time_field="ts", merge_mode="event_time")
    d1 = [write(spark, path, op, rows) for op, rows in HISTORY][0]
    c1 = compact(spark, path, E + 2600, "symlink")
    write(spark, path, "upsert", W6)
    c2 = compact(spark, path, E + 3500, "symlink")
    w7 = write(spark, path, "upsert", W7)
    return path, {"D1": d1, "C1": c1, "C2": c2, "W7": w7}


@pytest.fixture
def table(template, tmp_path):
    src, instants = template
    dest = tmp_path / "t"
    shutil.copytree(src, dest, symlinks=True)
    return dest, instants


def reads(path) -> dict[str, dict]:
    return {"ours": rows_by_key(read_arrow(str(path), "snapshot")), "hudi": rows_by_key(hudi_read(path)),
            "ours_ro": rows_by_key(read_arrow(str(path), "read_optimized")),
            "hudi_ro": rows_by_key(hudi_read(path, "read_optimized"))}


def data_files(path) -> set[str]:
    """Every entry (links included, dangling or not) outside .hoodie, relative to the table."""
    out = set()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out.update(os.path.relpath(os.path.join(root, f), path) for f in files)
    return out


def links_in_latest_slices(path) -> list[str]:
    return [lf.path for sl in FileSystemView(str(path)).latest_slices() for lf in sl.log_files
            if os.path.islink(lf.path)]


def all_links(path) -> list[str]:
    return [os.path.join(path, f) for f in data_files(path) if os.path.islink(os.path.join(path, f))]


def instant_of(name: str) -> str | None:
    parsed = parse_base_file_name(name) or parse_log_file_name(name)
    return getattr(parsed, "instant", None) or getattr(parsed, "base_instant", None)


def flat(per_partition: dict[str, list[str]]) -> set[str]:
    return {os.path.join(p, n) for p, names in per_partition.items() for n in names}


def read_instant(path, name: str) -> bytes:
    with open(os.path.join(path, ".hoodie", name), "rb") as fh:
        return fh.read()


def test_clean_keeps_live_link_targets_and_reads(spark, table):
    path, inst = table
    before, files_before = reads(path), data_files(path)
    links_before = {f for f in files_before if os.path.islink(os.path.join(path, f))}
    assert before["ours"] == before["hudi"] and before["ours_ro"] == before["hudi_ro"]
    live_targets = {os.path.realpath(link) for link in links_in_latest_slices(path)}
    assert any(inst["D1"] in os.path.basename(t) for t in live_targets), "C2 must link into the D1 slice"
    assert any(inst["C1"] in os.path.basename(t) for t in live_targets), "C2 must link to W6's log in slice C1"

    dry = run_clean(str(path), retain_commits=1, dry_run=True)
    assert dry.instant is None and dry.total_planned > 0 and not dry.errors
    assert data_files(path) == files_before
    assert not [f for f in os.listdir(os.path.join(path, ".hoodie")) if ".clean" in f]

    result = run_clean(str(path), retain_commits=1)
    assert result.instant and result.total_deleted == dry.total_planned and not result.failed
    assert flat(result.deleted) == flat(dry.files_to_delete)
    deleted = flat(result.deleted)
    assert data_files(path) == files_before - deleted
    assert {instant_of(os.path.basename(f)) for f in deleted} == {inst["D1"], inst["C1"]}
    assert any(f.endswith(".parquet") for f in deleted), "C1's base files are cleaned"
    assert deleted & links_before, "C1's own links go"
    kept = {os.path.realpath(os.path.join(path, f)) for f in flat(result.kept_link_targets)}
    assert kept and kept <= live_targets and all(os.path.isfile(t) for t in live_targets)
    for link in all_links(path):
        assert os.path.isfile(link), f"{link} dangles after the clean"
    targets = {os.path.realpath(link) for link in all_links(path)}
    for group in FileSystemView(str(path)).file_groups():   # the D1 slices keep only live link targets
        for sl in group.slices[:-1]:
            if sl.base_instant == inst["D1"]:
                assert all(os.path.realpath(lf.path) in targets for lf in sl.log_files)
    assert reads(path) == before

    _check_clean_instant(path, result, inst["W7"])
    again = run_clean(str(path), retain_commits=1)   # only protected targets are left in old slices
    assert again.instant is None and again.total_deleted == 0
    # A cleaned slice that keeps a log for a newer link lost its own links rightly: no error when retained.
    assert not plan_clean(str(path), retain_commits=5).errors

    # A copy-mode compaction re-homes what the C2 links carried; once C2 is cleaned, their targets go too.
    compact(spark, path, E + 4500, "copy")
    write(spark, path, "upsert", [(14, E + 7000)])
    before = reads(path)
    second = run_clean(str(path), retain_commits=1)
    assert {os.path.realpath(os.path.join(path, f)) for f in flat(second.deleted)} & kept
    for link in all_links(path):
        assert os.path.isfile(link), f"{link} dangles after the second clean"
    assert reads(path) == before
    assert before["ours"] == before["hudi"]


def _check_clean_instant(path, result, earliest: str) -> None:
    names = {f"{result.instant}.clean.requested", f"{result.instant}.clean.inflight", f"{result.instant}.clean"}
    assert names <= set(os.listdir(os.path.join(path, ".hoodie")))
    timeline = Timeline.load(str(path))
    assert [i.timestamp for i in timeline.completed() if i.action == CLEAN] == [result.instant]
    plan = avro_models.read_clean_plan(read_instant(path, f"{result.instant}.clean.requested"))
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["version"] == 2
    assert plan["earliestInstantToRetain"]["timestamp"] == earliest
    planned = {os.path.relpath(i["filePath"], path) for infos in plan["filePathsToBeDeletedPerPartition"].values()
               for i in infos}
    assert planned == flat(result.deleted)
    meta = avro_models.read_clean_metadata(read_instant(path, f"{result.instant}.clean"))
    assert meta["startCleanTime"] == result.instant and meta["totalFilesDeleted"] == result.total_deleted
    assert meta["earliestCommitToRetain"] == earliest
    assert meta["lastCompletedCommitTimestamp"] == earliest
    for partition, pm in meta["partitionMetadata"].items():
        assert pm["partitionPath"] == partition and pm["policy"] == "KEEP_LATEST_COMMITS"
        assert sorted(pm["successDeleteFiles"]) == sorted(result.deleted[partition]) == pm["deletePathPatterns"]
        assert pm["failedDeleteFiles"] == [] and pm["isPartitionDeleted"] is False


def test_pending_compaction_files_are_kept(spark, table):
    path, _ = table
    before = reads(path)
    plan = schedule_compaction(str(path), threshold_ms=E + 4500, carry_over="symlink")
    assert plan.written
    pending = {(op["partitionPath"], op["fileId"]) for op in plan.operations}
    named = {os.path.join(op["partitionPath"], n) for op in plan.operations
             for n in [op["dataFilePath"], *op["deltaFilePaths"], *(s["target"] for s in op["symlinkOperations"])]
             if n}
    result = run_clean(str(path), retain_commits=1)
    assert {(g["partitionPath"], g["fileId"]) for g in result.skipped_file_groups} == pending
    assert all(os.path.lexists(os.path.join(path, n)) for n in named)
    assert not named & flat(result.deleted)
    for rel in flat(result.deleted):
        fid = (parse_base_file_name(os.path.basename(rel)) or parse_log_file_name(os.path.basename(rel))).file_id
        assert (os.path.dirname(rel), fid) not in pending
    run_compaction(str(path), spark=spark)
    assert reads(path)["ours"] == before["ours"] == rows_by_key(hudi_read(path))


def test_refuses_while_a_compaction_is_inflight(table):
    path, _ = table
    plan = schedule_compaction(str(path), threshold_ms=E + 4500, carry_over="symlink")
    transition_to_inflight(str(path), plan.instant, COMPACTION)
    files = data_files(path)
    for call in (lambda: plan_clean(str(path), retain_commits=1), lambda: run_clean(str(path), retain_commits=1)):
        with pytest.raises(CleanRefused, match=plan.instant) as refused:
            call()
        assert refused.value.blocking_instant == plan.instant
    assert data_files(path) == files


def test_broken_links_in_kept_slices_are_errors(table):
    path, _ = table
    link, gone = links_in_latest_slices(path)[:2]
    os.unlink(os.path.realpath(link))   # dangling
    os.unlink(gone)                     # a carried-over link recorded in the commit, missing on disk
    plan = plan_clean(str(path), retain_commits=1)
    assert any(link in e and "dangling" in e for e in plan.errors)
    assert any(gone in e and "missing" in e for e in plan.errors)
    assert run_clean(str(path), retain_commits=1, dry_run=True).errors == plan.errors
    files = data_files(path)
    with pytest.raises(CleanRefused, match="dangling"):
        run_clean(str(path), retain_commits=1)
    assert data_files(path) == files


def test_keep_latest_file_versions(table):
    path, _ = table
    before = reads(path)
    result = run_clean(str(path), policy=KEEP_LATEST_FILE_VERSIONS, retain_versions=1)
    assert result.total_deleted > 0
    view = FileSystemView(str(path))
    targets = {os.path.realpath(link) for link in all_links(path)}
    for group in view.file_groups():   # older slices keep nothing but files a live link points at
        for sl in group.slices[:-1]:
            assert sl.base_file is None and sl.log_files
            assert all(not os.path.islink(lf.path) and os.path.realpath(lf.path) in targets for lf in sl.log_files)
    for link in all_links(path):
        assert os.path.isfile(link)
    assert reads(path) == before
    meta = avro_models.read_clean_metadata(read_instant(path, f"{result.instant}.clean"))
    assert meta["policy"] == KEEP_LATEST_FILE_VERSIONS and meta["earliestCommitToRetain"] == ""


def test_interrupted_clean_is_finished_with_a_recheck(table):
    path, inst = table
    plan = plan_clean(str(path), retain_commits=1)
    ts = new_instant_time(after=Timeline.load(str(path)).instants[-1].timestamp)   # crashed: plan only
    record = _plan_record(plan).to_avro()
    for infos in record["filePathsToBeDeletedPerPartition"].values():   # Java writes qualified paths
        for info in infos:
            info["filePath"] = "file:" + info["filePath"]
    create_requested(str(path), ts, CLEAN, avro_models.write_clean_plan(record))
    before = reads(path)
    result = run_clean(str(path), retain_commits=1)
    assert result.resumed == [ts] and result.instant is None   # the resumed clean did all the work
    assert not set(plan.paths()) & {os.path.join(path, f) for f in data_files(path)}
    meta = avro_models.read_clean_metadata(read_instant(path, f"{ts}.clean"))
    assert meta["totalFilesDeleted"] == plan.total_files
    assert reads(path) == before


def test_earliest_commit_to_retain_never_passes_a_pending_write():
    done = [Instant(f"202401010000{i:02d}000", DELTACOMMIT, State.COMPLETED) for i in range(5)]
    assert _earliest_to_retain(Timeline("/nowhere", done), 2).timestamp == "20240101000003000"
    assert _earliest_to_retain(Timeline("/nowhere", done), 5) is None   # no more commits than retained
    pending = Instant("20240101000002500", COMPACTION, State.REQUESTED)
    timeline = Timeline("/nowhere", sorted([*done, pending]))
    assert _earliest_to_retain(timeline, 1).timestamp == "20240101000002000"   # the last commit before it


def test_clean_after_rolling_back_a_linked_compaction_keeps_what_readers_need(tmp_path):
    """A rolled-back symlink compaction hands its file groups back to the older slices: cleaning then
    must neither touch them nor leave a live link dangling."""
    from engine.compaction import run_compaction, schedule_compaction
    from engine.services.rollback import rollback
    from tests.support.inline_spark import InlineSpark
    from tests.support.table_model import HISTORY, E, model_of, new_table, read_optimized, snapshot

    path = str(tmp_path / "t")
    new_table(path)
    schedule_compaction(path, threshold_ms=E + 1003, carry_over="symlink")
    run_compaction(path, spark=InlineSpark())
    ro = read_optimized(path)
    second = schedule_compaction(path, threshold_ms=E + 3200, carry_over="symlink").instant
    run_compaction(path, spark=InlineSpark())
    rollback(path, second)
    for policy, kwargs in (("KEEP_LATEST_COMMITS", {"retain_commits": 1}), (KEEP_LATEST_FILE_VERSIONS,
                                                                            {"retain_versions": 1})):
        run_clean(path, policy=policy, **kwargs)
        assert snapshot(path) == model_of(HISTORY) and read_optimized(path) == ro
        links = [os.path.join(path, n) for n in os.listdir(path) if os.path.islink(os.path.join(path, n))]
        assert links and all(os.path.exists(link) for link in links)


# ------------------------------------------------------------------ damaged copies, interrupted cleans (issue 12)

def _one_bucket_history(path: str, carry: str) -> dict[str, str]:
    """W1 (k0, early), W2 (k1, k2, late), C1 (threshold between: W2's log carried as a link or a copy), W3 (k3)."""
    from tests.support.inline_spark import InlineSpark
    from tests.support.table_model import E, new_table
    from tests.support.table_model import write as model_write

    new_table(path, history=[], buckets=1)
    out = {"W1": model_write(path, "upsert", [(0, E + 1000)]),
           "W2": model_write(path, "upsert", [(1, E + 5000), (2, E + 5000)])}
    out["C1"] = schedule_compaction(path, threshold_ms=E + 2000, carry_over=carry).instant
    run_compaction(path, spark=InlineSpark())
    out["W3"] = model_write(path, "upsert", [(3, E + 6000)])
    return out


def _ids(path: str) -> list[str]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sorted(read_arrow(path).column("id").to_pylist())


def test_clean_keeps_the_original_of_a_damaged_carried_copy_until_it_is_repaired(tmp_path):
    """Issue 12 case 2: in copy mode the older slice holds the only intact bytes of a damaged copy."""
    path = str(tmp_path / "t")
    inst = _one_bucket_history(path, "copy")
    shutil.copytree(path, tmp_path / "control", symlinks=True)
    timeline = Timeline.load(path)
    (entry,) = timeline.commit_metadata(timeline.get(inst["C1"])[-1]).carried
    copy, original_name = os.path.join(path, entry.symlink), entry.target
    original = os.path.join(path, original_name)
    assert entry.mode == "copy" and open(copy, "rb").read() == open(original, "rb").read()
    control = run_clean(str(tmp_path / "control"), retain_commits=1)   # undamaged: the original goes
    assert original_name in flat(control.deleted)

    good = open(copy, "rb").read()
    with open(copy, "r+b") as fh:
        fh.write(b"#XUDI#")
    assert _ids(path) == ["k0", "k3"]   # the copy's records are missing (and every read warns)
    result = run_clean(path, retain_commits=1)
    assert os.path.isfile(original) and original_name not in flat(result.deleted)
    assert original_name in flat(result.kept_link_targets)
    assert f"kept {original}: carried copy {copy} holds a corrupt block" in result.message
    assert run_clean(path, retain_commits=1).instant is None   # and again: nothing else to do, still kept
    assert os.path.isfile(original)

    shutil.copyfile(original, copy)   # repaired from the original the clean kept
    assert open(copy, "rb").read() == good and _ids(path) == ["k0", "k1", "k2", "k3"]
    assert original_name in flat(run_clean(path, retain_commits=1).deleted)
    assert rows_by_key(read_arrow(path)) == rows_by_key(hudi_read(path))


def _linked_clean_table(path: str) -> tuple[dict[str, str], list[str]]:
    """Slices 0 and C1 superseded by C2, with C1's carried links pointing into slice 0: a KEEP_LATEST_COMMITS(1)
    clean deletes every link and its target. Returns the instants and the clean's files in deletion order."""
    from tests.support.inline_spark import InlineSpark
    from tests.support.table_model import E
    from tests.support.table_model import write as model_write

    inst = _one_bucket_history(path, "symlink")
    inst["C2"] = schedule_compaction(path, strategy="unbounded").instant
    run_compaction(path, spark=InlineSpark())
    inst["W4"] = model_write(path, "upsert", [(4, E + 7000)])
    return inst, plan_clean(path, retain_commits=1).paths()


def test_a_clean_killed_after_any_file_leaves_every_link_with_its_target(tmp_path):
    """Issue 12 case 5: links go before their targets, so a clean killed (no cleanup at all) after any number
    of deletions never leaves a dangling link; we and hudi 0.5.0 read every row before and after `recover`."""
    from engine.io import faults
    from tests.support.table_model import snapshot

    template = str(tmp_path / "template")
    _, files = _linked_clean_table(template)
    links = [p for p in files if os.path.islink(p)]
    assert links and all(os.path.realpath(link) in files for link in links)   # targets go in the same clean
    expected = snapshot(template)
    assert sorted(expected) == ["k0", "k1", "k2", "k3", "k4"]
    for n in range(1, len(files) + 1):
        path = str(tmp_path / f"t{n}")
        shutil.copytree(template, path, symlinks=True)
        os.environ[faults.ENV] = f"clean:deleting@{n}:abort"
        try:
            with pytest.raises(faults.InjectedAbort):
                run_clean(path, retain_commits=1)
        finally:
            del os.environ[faults.ENV]
            faults.reset_crossings()
        assert [i.state for i in Timeline.load(path).instants if i.action == CLEAN] == [State.INFLIGHT]
        assert not [p for p in all_links(path) if not os.path.exists(p)], f"a link dangles after {n} deletion(s)"
        assert snapshot(path) == expected   # ours == hudi 0.5.0's == the model
        assert recover_table(path).finished_cleans
        assert snapshot(path) == expected and not recover_table(path).changed
        assert not set(files) & {os.path.join(path, f) for f in data_files(path)}


def test_a_dangling_link_that_a_started_clean_deletes_is_cleaned_not_lost(tmp_path):
    """A clean killed between a target and its link (as path-ordered cleans could be): reads of the current
    table go on (ours and hudi 0.5.0, every row), time travel into the half-deleted slice is refused as cleaned,
    and `recover` finishes the clean."""
    from engine.errors import ConfigError
    from tests.support.table_model import snapshot

    path = str(tmp_path / "t")
    inst, files = _linked_clean_table(path)
    expected = snapshot(path)
    plan = plan_clean(path, retain_commits=1)
    ts = new_instant_time(after=Timeline.load(path).instants[-1].timestamp)
    requested = _plan_record(plan).to_bytes()
    create_requested(path, ts, CLEAN, requested)
    transition_to_inflight(path, ts, CLEAN, requested)
    (link,) = [p for p in files if os.path.islink(p)]
    os.unlink(os.path.realpath(link))   # the target went first; the process died before the link
    assert not os.path.exists(link) and os.path.islink(link)
    assert snapshot(path) == expected
    with pytest.raises(ConfigError, match=f"which clean {ts} deleted"):
        read_arrow(path, QuerySpec("time_travel", as_of=inst["C1"]))
    done = recover_table(path)
    assert done.finished_cleans == [ts] and not os.path.islink(link)
    assert snapshot(path) == expected and not recover_table(path).changed
