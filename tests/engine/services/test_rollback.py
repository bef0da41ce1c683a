"""Rollback (case 10): exactly what an instant created goes away, readers see the state before it, and a
rollback a later instant depends on is refused with the reason."""
from __future__ import annotations

import os

import pytest

from engine import logformat
from engine.cli.console import EXIT_REFUSED, main
from engine.compaction import run_compaction, schedule_compaction
from engine.config.properties import load_table_config
from engine.services.clean import KEEP_LATEST_FILE_VERSIONS, run_clean
from engine.services.rollback import RO_KEYS, RollbackRefused, rollback
from engine.timeline import avro_models
from engine.timeline.instants import Timeline
from tests.support.inline_spark import InlineSpark
from tests.support.table_model import HISTORY, LAST_WRITE, E, T, model_of, new_table, read_optimized, snapshot, write


def data_files(path: str) -> set[str]:
    return {os.path.relpath(os.path.join(root, f), path) for root, dirs, files in os.walk(path)
            for f in files if ".hoodie" not in root.split(os.sep)}


def ro_props(path: str) -> dict[str, str]:
    props = load_table_config(path).props
    return {k: props[k] for k in RO_KEYS if k in props}


def rollback_metadata(path: str, r: str) -> dict:
    with open(os.path.join(path, ".hoodie", f"{r}.rollback"), "rb") as fh:
        return avro_models.read_rollback_metadata(fh.read())


def compact(path: str, threshold: int, carry_over: str = "symlink") -> str:
    instant = schedule_compaction(path, threshold_ms=threshold, carry_over=carry_over).instant
    run_compaction(path, spark=InlineSpark())
    return instant


@pytest.mark.parametrize("carry_over", ["symlink", "copy"])
def test_rollback_removes_exactly_what_a_completed_compaction_created(tmp_path, carry_over):
    path = str(tmp_path / "t")
    new_table(path)
    c1 = compact(path, T, carry_over)
    files, snap, ro, props = data_files(path), snapshot(path), read_optimized(path), ro_props(path)
    assert props["tidemark.ro.compaction.instant"] == c1
    c2 = compact(path, E + 3200, carry_over)
    assert ro_props(path)["tidemark.ro.compaction.instant"] == c2 and read_optimized(path) != ro

    result = rollback(path, c2)
    assert result.was_completed and result.action == "compaction"
    assert data_files(path) == files                     # base files and carried links/copies gone, logs kept
    assert snapshot(path) == snap and read_optimized(path) == ro and ro_props(path) == props
    timeline = Timeline.load(path)
    assert not timeline.get(c2) and timeline.is_completed(result.rollback_instant)
    meta = rollback_metadata(path, result.rollback_instant)
    assert meta["commitsRollback"] == [c2] and meta["instantsRollback"] == [{"commitTime": c2, "action": "commit"}]
    assert meta["totalFilesDeleted"] == len(result.deleted_files) > 0

    assert rollback(path, c1).restored_ro == {}           # now the latest: no guarantee is left
    assert ro_props(path) == {} and snapshot(path) == snap == model_of(HISTORY)
    compact(path, E + 3200, carry_over)                   # the slot is free again; same answers
    assert snapshot(path) == snap


def test_rollback_of_the_latest_deltacommit_masks_it_with_a_command_block(tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    files = data_files(path)
    last = write(path, *LAST_WRITE)
    written = data_files(path) - files
    result = rollback(path, last)
    assert result.was_completed and result.deleted_files == []
    assert snapshot(path) == model_of(HISTORY)            # ours and hudi 0.5.0
    added = data_files(path) - files - written
    assert {os.path.basename(p) for p in result.rollback_log_files} == {os.path.basename(a) for a in added}
    for log in result.rollback_log_files:                 # one rollback command block per touched slice
        (block,) = logformat.scan_log_file(log).blocks
        assert block.block_type == logformat.BlockType.COMMAND and block.target_instant_time == last
    meta = rollback_metadata(path, result.rollback_instant)
    failed = {os.path.basename(p) for m in meta["partitionMetadata"].values() for p in m["logFilesFromFailedCommit"]}
    assert failed == {os.path.basename(p) for p in written}   # kept on disk, masked, as Java does
    assert not Timeline.load(path).get(last)

    after = write(path, "upsert", [(3, E + 5000)])        # masked data never comes back, not even compacted
    schedule_compaction(path, strategy="unbounded")
    run_compaction(path, spark=InlineSpark())
    assert snapshot(path) == model_of(HISTORY + [("upsert", [(3, E + 5000)])])
    assert Timeline.load(path).is_completed(after)


def test_rollback_refuses_what_a_later_instant_depends_on(tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    first_write = Timeline.load(path).completed()[0].timestamp
    c = compact(path, T)
    landed = write(path, *LAST_WRITE)                     # writes into slice C
    with pytest.raises(RollbackRefused, match="written into its slice") as refused:
        rollback(path, c)
    assert refused.value.reason == "rollback_dependency" and refused.value.blocking_instant == landed
    with pytest.raises(RollbackRefused, match=f"compaction {c}") as refused:
        rollback(path, first_write)                        # compacted into C's base files
    assert refused.value.blocking_instant == c
    rollback(path, landed)                                # the dependant goes first, then C may go
    run_clean(path, policy=KEEP_LATEST_FILE_VERSIONS, retain_versions=1)   # ... unless its old slices are cleaned
    with pytest.raises(RollbackRefused, match="cleaned"):
        rollback(path, c)
    assert snapshot(path) == model_of(HISTORY)
    clean = [i.timestamp for i in Timeline.load(path).completed() if i.action == "clean"][0]
    with pytest.raises(RollbackRefused, match="only deltacommits and compactions") as refused:
        rollback(path, clean)
    assert refused.value.reason == "not_rollbackable"


def test_rollback_of_a_pending_compaction_is_a_rollback_instant(tmp_path):
    path = str(tmp_path / "t")
    new_table(path)
    files = data_files(path)
    c = schedule_compaction(path, threshold_ms=T, carry_over="copy").instant
    result = rollback(path, c)
    assert not result.was_completed and data_files(path) == files and not Timeline.load(path).get(c)
    assert rollback_metadata(path, result.rollback_instant)["instantsRollback"] == [
        {"commitTime": c, "action": "compaction"}]


def test_cli_rollback_and_its_refusal(tmp_path, capsys):
    path = str(tmp_path / "t")
    new_table(path)
    c = compact(path, T)
    landed = write(path, *LAST_WRITE)
    assert main(["rollback", path, "--instant", c]) == EXIT_REFUSED
    assert "written into its slice" in capsys.readouterr().err
    assert main(["compaction", "rollback", path, "--instant", landed, "--json"]) == 0
    assert main(["rollback", path, "--instant", c]) == 0
    assert f"rolled back compaction {c} as rollback" in capsys.readouterr().out
    assert snapshot(path) == model_of(HISTORY)


def test_rolling_back_every_write_of_a_log_only_group_removes_it_so_the_next_write_is_visible(tmp_path):
    """A group's first write rolled back after a later one was: masking it would leave a slice whose base
    instant is gone, invisible to every reader together with the writes appended to it afterwards."""
    path = str(tmp_path / "t")
    new_table(path, history=[("upsert", [(2, E + 1000)])])   # k2: the other bucket, so the table keeps a write
    first = write(path, "upsert", [(0, E + 1000)])
    second = write(path, "upsert", [(0, E + 2000)])
    rollback(path, second)
    rollback(path, first)
    assert snapshot(path) == {"k2": E + 1000}
    write(path, "upsert", [(0, E + 3000)])
    assert snapshot(path) == {"k2": E + 1000, "k0": E + 3000}   # ours and hudi 0.5.0


def test_rollback_of_a_write_compacted_then_cleaned_is_refused(tmp_path):
    """Its logs are gone from the file groups, but its commit still names them: the compaction that folded
    it into base files depends on it."""
    path = str(tmp_path / "t")
    new_table(path, history=[("upsert", [(1, E + 1000)])])
    last = write(path, "delete", [(1, E + 1000)])
    c = compact(path, E + 5000)
    run_clean(path, policy=KEEP_LATEST_FILE_VERSIONS, retain_versions=1)
    with pytest.raises(RollbackRefused, match=f"compaction {c}"):
        rollback(path, last)
    assert snapshot(path) == {} and Timeline.load(path).is_completed(last)
