"""engine.services.orphans: files a rolled-back write left behind — a zombie writer whose tasks wrote on after
another host rolled its instant back — are found and deleted by `recover` and by the next automatic clean, locally
and on S3 (moto); committed files are untouched and hudi 0.5.0 reads the same rows."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.io import faults, storage
from engine.io.naming import BaseFileName, LogFileName, parse_base_file_name, parse_log_file_name
from engine.services.orphans import find_orphans
from engine.timeline.instants import Timeline
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)

ZOMBIE_TOKEN = "9-9-9"


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path) -> tuple[str, dict[str, str] | None]:
    if request.param == "local":
        return str(tmp_path / "t"), None
    env = request.getfixturevalue("s3_env")
    return f"{env['bucket_uri']}/t", env["storage_options"]


def _batch(tmp_path: Path, n: int, keys: range) -> str:
    path = tmp_path / f"batch{n}.parquet"
    pq.write_table(pa.table({"id": [f"k{k:03d}" for k in keys], "ts": pa.array([n * 1000 + k for k in keys],
                                                                                  pa.int64())}), path)
    return str(path)


def _data_files(base: str) -> dict[str, int]:
    return {e.path: e.size for e in storage.list_tree(base, skip=".hoodie")}


def _resumed_name(path: str) -> str:
    """A file the zombie's next task writes: same instant, a new write token (and log version)."""
    folder, name = path.rsplit("/", 1)
    base = parse_base_file_name(name)
    if base is not None:
        return f"{folder}/{BaseFileName(base.file_id, ZOMBIE_TOKEN, base.instant, base.ext).name}"
    log = parse_log_file_name(name)
    assert log is not None, name
    return f"{folder}/{LogFileName(log.file_id, log.base_instant, log.version + 10, ZOMBIE_TOKEN).name}"


def _zombie_after_rollback(base: str, tmp_path: Path, monkeypatch) -> tuple[Table, dict[str, int], list[str]]:
    """A committed write; a second write that dies after its tasks; another host rolls it back; the zombie's
    tasks then write on. Returns the table, the committed files and the zombie's late files."""
    table = Table.create(base, name="t", record_keys=["id"], ordering_field="ts", event_time_field="ts",
                         partition_fields=[], settings={"hoodie.bucket.index.num.buckets": "2",
                                                        "hoodie.clean.automatic": "false"})
    table.write(_batch(tmp_path, 0, range(10)))
    committed = _data_files(base)
    monkeypatch.setenv(faults.ENV, "write:reconciled:raise")
    with pytest.raises(faults.InjectedFault):
        table.write(_batch(tmp_path, 1, range(5, 15)))
    monkeypatch.delenv(faults.ENV)
    (dead,) = [i.timestamp for i in Timeline.load(base).pending()]
    written = {p: storage.read_bytes(p) for p in set(_data_files(base)) - set(committed)}
    assert written, "the failed write left no file to copy"
    Table.open(base).rollback(dead)
    late = []
    for path, data in written.items():
        late.append(_resumed_name(path))
        storage.write_bytes(late[-1], data)
    return table, committed, sorted(late)


def test_recover_removes_what_a_rolled_back_zombie_wrote(where, tmp_path, monkeypatch):
    base, options = where
    table, committed, late = _zombie_after_rollback(base, tmp_path, monkeypatch)
    before = rows_by_key(hudi_read(base, storage_options=options))
    kept = _data_files(base)
    assert sorted(find_orphans(base, Timeline.load(base))) == late
    result = Table.open(base).recover()
    assert sorted(result.removed_orphans) == late and result.changed
    assert "left behind" in result.message
    after = _data_files(base)
    assert not set(late) & set(after)
    assert {p: s for p, s in after.items() if p in committed} == committed, "a committed file changed"
    assert set(after) == set(kept) - set(late), "recover removed more than the orphans"
    assert rows_by_key(hudi_read(base, storage_options=options)) == before == rows_by_key(table.read().table)
    assert not Table.open(base).recover().removed_orphans          # idempotent


def test_the_next_automatic_clean_removes_them_once(where, tmp_path, monkeypatch):
    base, options = where
    table, _, late = _zombie_after_rollback(base, tmp_path, monkeypatch)
    table.update_settings({"hoodie.clean.automatic": "true"})
    result = table.write(_batch(tmp_path, 2, range(20, 22)))
    assert result.services is not None and result.services.clean is not None
    assert sorted(result.services.clean.removed_orphans) == late
    again = table.write(_batch(tmp_path, 3, range(30, 32)))
    assert again.services.clean is None or not again.services.clean.removed_orphans   # swept once per rollback
    assert not set(late) & set(_data_files(base))
    assert rows_by_key(hudi_read(base, storage_options=options)) == rows_by_key(table.read().table)


def test_logs_the_rollback_masked_stay_as_java_leaves_them(tmp_path, monkeypatch):
    """Only files the rollback did not know: the logs it masked with a command block, and its command logs, stay."""
    base = str(tmp_path / "t")
    _zombie_after_rollback(base, tmp_path, monkeypatch)
    timeline = Timeline.load(base)
    (rb,) = [i for i in timeline.completed() if i.action == "rollback"]
    kept = timeline.rollback_record(rb.timestamp).kept_files
    orphans = {p.rsplit("/", 1)[-1] for p in find_orphans(base, timeline)}
    assert not orphans & kept
