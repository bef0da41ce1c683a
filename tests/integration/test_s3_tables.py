"""Tables on S3 (moto in server mode on 127.0.0.1): every step of a table's life on `s3://` agrees row for row
with the same steps on a local table, and hudi 0.5.0 reading the same `s3://` URI over that endpoint agrees
with Tidemark after every step. Carry-over on S3 is a server-side copy (CopyObject, counted at the server).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.compaction import log_event_times
from engine.errors import ConfigError, CorruptLogBlockError
from engine.io import storage
from engine.logformat import scan
from engine.logformat.integrity import CorruptLogBlockWarning
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from engine.timeline.metadata import LOG_MD5
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)

DATA = ("_hoodie_record_key", "_hoodie_partition_path", "id", "seq", "ts", "p", "v")


def _data_rows(table: pa.Table) -> dict:
    """Rows by (partition, key), data columns and key/partition only: instants (hence commit times and file
    ids) differ between the two twins."""
    cols = [c for c in DATA if c in table.column_names]
    return rows_by_key(table, cols)


def _jsonl(tmp: Path, name: str, rows: list[dict]) -> str:
    path = tmp / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _csv(tmp: Path, name: str, rows: list[dict]) -> str:
    path = tmp / f"{name}.csv"
    head = list(rows[0])
    path.write_text(",".join(head) + "\n" + "".join(",".join(str(r[k]) for k in head) + "\n" for r in rows))
    return str(path)


def _parquet(tmp: Path, name: str, rows: list[dict]) -> str:
    path = tmp / f"{name}.parquet"
    table = pa.table({"id": [r["id"] for r in rows], "seq": pa.array([r["seq"] for r in rows], pa.int64()),
                      "ts": pa.array([_us(r["ts"]) for r in rows], pa.timestamp("us", "UTC")),
                      "p": [r["p"] for r in rows], "v": [r["v"] for r in rows]})
    pq.write_table(table, path)
    return str(path)


def _us(iso: str) -> int:
    import datetime as dt

    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1_000_000)


def _rows(day: str, seq: int, keys: range, p: str = "a") -> list[dict]:
    return [{"id": f"k{k}", "seq": seq, "ts": f"2024-01-{day}T{k % 24:02d}:00:00Z", "p": p, "v": f"v{seq}-{k}"}
            for k in keys]


def _md5s_recorded(table: Table) -> int:
    """Every log a completed deltacommit wrote is in its `tidemark.logMd5` with the MD5 of the object's bytes
    (while that log is not rolled back or cleaned); how many were checked."""
    timeline = Timeline.load(table.path)
    checked = 0
    for inst in timeline.completed():
        if inst.action != "deltacommit":
            continue
        meta = timeline.commit_metadata(inst)
        recorded = json.loads(meta.extra[LOG_MD5])
        logs = [st.path for st in meta.write_stats if ".log." in st.path]
        assert sorted(recorded) == sorted(logs), inst
        for rel, md5 in recorded.items():
            assert hashlib.md5(storage.read_bytes(storage.join(table.path, rel))).hexdigest() == md5, rel
            checked += 1
    return checked


class Twins:
    """The same table on local disk and on S3; every step runs on both and is checked."""

    def __init__(self, tmp: Path, bucket_uri: str, options: dict[str, str], table_version: int = 6) -> None:
        self.tmp, self.options = tmp, options
        make = dict(name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                    partition_fields=["p"], settings={"hoodie.bucket.index.num.buckets": "1"},
                    table_version=table_version)
        self.local = Table.create(str(tmp / "local" / "t"), **make)
        self.s3 = Table.create(f"{bucket_uri}/t", **make)
        self.instants: list[tuple[str, str]] = []   # (local, s3) instant of each write / compaction

    def both(self, step) -> tuple:
        a, b = step(self.local), step(self.s3)
        self.check()
        return a, b

    def write(self, source, operation: str = "upsert") -> None:
        a, b = self.both(lambda t: t.write(source, operation))
        self.instants.append((a.instant, b.instant))

    def check(self, query: str = "snapshot", **kw) -> dict:
        """Tidemark on S3 == Tidemark locally (data columns); hudi 0.5.0 on the s3:// URI == Tidemark on S3."""
        local_kw = {k: self._local_instant(v) for k, v in kw.items()}
        ours_local = self.local.read(query, **local_kw).table
        ours_s3 = self.s3.read(query, **kw).table
        assert _data_rows(ours_s3) == _data_rows(ours_local)
        hudi_kw = {"as_of": kw.get("as_of"), "begin": kw.get("begin"), "end": kw.get("end")}
        theirs = hudi_read(self.s3.path, query, storage_options=self.options, **hudi_kw)
        assert rows_by_key(theirs, list(DATA) + ["_hoodie_commit_time"]) == \
            rows_by_key(ours_s3, list(DATA) + ["_hoodie_commit_time"])
        return _data_rows(ours_s3)

    def _local_instant(self, s3_instant: str | None) -> str | None:
        return next((a for a, b in self.instants if b == s3_instant), s3_instant)


@pytest.fixture
def twins(tmp_path, s3_env):  # noqa: F811
    return Twins(tmp_path, s3_env["bucket_uri"], s3_env["storage_options"])


def test_a_table_lives_on_s3_as_it_does_locally(twins, s3_server, spark, tmp_path):  # noqa: F811
    tmp = tmp_path
    # writes: every input format and operation
    twins.write(_jsonl(tmp, "d1", _rows("01", 1, range(0, 6))))
    twins.write(_csv(tmp, "d2", _rows("02", 2, range(3, 9))), "insert")
    twins.write(_parquet(tmp, "d3", _rows("03", 3, range(0, 4), "b")))
    parts = [_parquet(tmp, "d4a", _rows("04", 4, range(8, 10))), _parquet(tmp, "d4b", _rows("04", 4, range(10, 12)))]
    twins.write(parts)
    twins.write(spark.createDataFrame(pa.table({"id": ["k1"], "seq": pa.array([5], pa.int64()),
                                                "ts": pa.array([_us("2024-01-05T01:00:00Z")], pa.timestamp("us", "UTC")),
                                                "p": ["a"], "v": ["df"]})))
    twins.write(_jsonl(tmp, "del", [{"id": "k4", "seq": 6, "ts": "2024-01-05T04:00:00Z", "p": "a"}]), "delete")
    assert ("a", "k4") not in twins.check()
    assert _md5s_recorded(twins.s3) >= 6   # every write path: files, several files, a DataFrame, a delete

    # compaction by event time: on S3 the carry-over is a copy (the store has no links), made server-side
    plan_local = twins.local.schedule_compaction(threshold="2024-01-03T12:00:00Z")
    plan_s3 = twins.s3.schedule_compaction(threshold="2024-01-03T12:00:00Z")
    assert plan_s3.carry_over == "copy" and plan_s3.settings_used["hoodie.compaction.carry.over.mode"].source == "store"
    assert plan_local.carry_over == "symlink"
    s3_server.reset_counts()
    twins.local.run_compaction(plan_local.instant)
    result = twins.s3.run_compaction(plan_s3.instant)
    twins.instants.append((plan_local.instant, plan_s3.instant))
    assert result.logs_carried_over > 0
    requests = s3_server.counts()
    copies = [r for r in requests if r["method"] == "PUT" and r["copy_source"] and ".log." in r["path"]]
    assert len(copies) == result.logs_carried_over
    copied = {r["path"] for r in copies}
    # no carried log was uploaded by this process: every PUT to a carried name is the server-side copy
    assert not [r for r in requests if r["method"] == "PUT" and r["path"] in copied and not r["copy_source"]]
    for query in ("snapshot", "read_optimized"):
        twins.check(query)
    # the backlog counts carried logs alike: links locally, copies on S3
    carried = [t.metrics().carried_over_log_files for t in (twins.local, twins.s3)]
    assert carried == [result.logs_carried_over] * 2, carried

    # a write after the compaction, a second compaction, and its rollback (the copies it made go with it)
    twins.write(_jsonl(tmp, "d6", _rows("06", 7, range(0, 3))))
    p2 = twins.both(lambda t: t.schedule_compaction(threshold="2024-01-05T12:00:00Z"))
    twins.both(lambda t: t.run_compaction())
    twins.check("read_optimized")
    twins.both(lambda t: t.rollback(t.compactions()[-1].instant))
    assert not storage.exists(f"{twins.s3.path}/.hoodie/{p2[1].instant}.commit")
    twins.check("read_optimized")

    # time travel and incremental on S3, against the local twin and hudi 0.5.0
    second, fifth = twins.instants[1][1], twins.instants[4][1]
    twins.check("time_travel", as_of=fifth)
    twins.check("incremental", begin=second, end=fifth)
    twins.check("incremental", begin=fifth)

    # overwrites, then clean what they replaced and what the compaction superseded
    twins.write(_jsonl(tmp, "ow", _rows("07", 8, range(0, 2), "b")), "insert_overwrite")
    cleaned = twins.both(lambda t: t.clean(retain_commits=1))
    assert cleaned[1].deleted and len(cleaned[1].deleted) == len(cleaned[0].deleted)
    twins.check("read_optimized")

    # Table.open by URI sees the same table; recover finds nothing to do
    assert Table.open(twins.s3.path + "/").path == twins.s3.path
    assert not twins.s3.recover().changed


@pytest.mark.parametrize("version", [8, 9])
def test_a_version_8_table_lives_on_s3_as_it_does_locally(s3_env, s3_server, tmp_path, version):  # noqa: F811
    """Hudi 1.x layout on S3: the timeline under .hoodie/timeline/ with `<requested>_<completion>` names, logs named
    by their writes, an event-time compaction whose carried logs are server-side copies re-published under its own
    instant; rollback and clean; hudi 0.5.0 reading the s3:// URI agrees after every step."""
    tmp = tmp_path
    twins = Twins(tmp, s3_env["bucket_uri"], s3_env["storage_options"], table_version=version)
    twins.write(_jsonl(tmp, "d1", _rows("01", 1, range(0, 6))))
    twins.write(_parquet(tmp, "d2", _rows("02", 2, range(3, 9))))
    twins.write(_jsonl(tmp, "d3", _rows("03", 3, range(0, 4), "b")))
    twins.write(_jsonl(tmp, "d4", _rows("04", 4, range(1, 3))))
    twins.write(_jsonl(tmp, "del", [{"id": "k4", "seq": 6, "ts": "2024-01-04T04:00:00Z", "p": "a"}]), "delete")
    assert ("a", "k4") not in twins.check()
    timeline = [n.rsplit("/", 1)[-1] for n in storage.list_names(f"{twins.s3.path}/.hoodie/timeline")]
    done = [n for n in timeline if n.endswith(".deltacommit")]
    assert len(done) == 5 and all("_" in n for n in done)                      # <requested>_<completion>
    assert not [n for n in storage.list_names(f"{twins.s3.path}/.hoodie") if n.endswith(".deltacommit")]
    assert _md5s_recorded(twins.s3) >= 5   # kept in the Avro commit metadata of layout 2

    # compaction by event time with copy carry-over (server-side copies, named by the compaction)
    plans = twins.both(lambda t: t.schedule_compaction(threshold="2024-01-02T12:00:00Z", carry_over="copy"))
    assert plans[1].carry_over == "copy" and plans[1].instant
    s3_server.reset_counts()
    results = twins.both(lambda t: t.run_compaction(t.compactions()[-1].instant))
    twins.instants.append((plans[0].instant, plans[1].instant))
    assert results[1].logs_carried_over == results[0].logs_carried_over > 0
    copies = [r for r in s3_server.counts() if r["method"] == "PUT" and r["copy_source"] and ".log." in r["path"]]
    assert len(copies) == results[1].logs_carried_over
    assert all(f"_{plans[1].instant}.log." in r["path"] for r in copies)         # re-published under C
    twins.check("read_optimized")

    # a write after the compaction lands in the new slice; rolling it back deletes its logs (1.x form)
    twins.write(_jsonl(tmp, "d6", _rows("05", 7, range(0, 3))))
    local_last, last = twins.instants.pop()
    twins.local.rollback(local_last)
    twins.s3.rollback(last)
    twins.check()
    assert not [n for n in storage.list_names(f"{twins.s3.path}/a") if f"_{last}.log." in n]
    twins.check("read_optimized")
    # the compaction itself rolled back (its copies go with it), then compacted again
    twins.both(lambda t: t.rollback(t.compactions()[-1].instant))
    assert not [n for n in storage.list_names(f"{twins.s3.path}/a") if f"_{plans[1].instant}." in n]
    twins.check("read_optimized")
    twins.both(lambda t: t.schedule_compaction(threshold="2024-01-03T12:00:00Z", carry_over="copy"))
    twins.both(lambda t: t.run_compaction(t.compactions()[-1].instant))
    twins.check("read_optimized")

    # time travel and incremental, then clean what the compaction superseded
    second, fourth = twins.instants[1][1], twins.instants[3][1]
    twins.check("time_travel", as_of=fourth)
    twins.check("incremental", begin=second, end=fourth)
    twins.write(_jsonl(tmp, "d7", _rows("06", 8, range(0, 2))))
    cleaned = twins.both(lambda t: t.clean(retain_commits=1))
    assert cleaned[1].deleted and len(cleaned[1].deleted) == len(cleaned[0].deleted)
    twins.check("read_optimized")
    assert not twins.s3.recover().changed


def test_symlink_carry_over_on_s3_is_refused(s3_env, tmp_path, monkeypatch):  # noqa: F811
    table = Table.create(f"{s3_env['bucket_uri']}/sym", name="sym", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})
    for i, day in enumerate(("01", "02")):
        table.write(_jsonl(tmp_path, f"s{i}", _rows(day, i, range(2))))
    with pytest.raises(ConfigError, match="impossible on object storage.*--carry-over copy"):
        table.schedule_compaction(threshold="2024-01-01T12:00:00Z", carry_over="symlink")
    assert not table.compactions()
    # nor can the table store it as its setting (it would refuse every compaction after)
    symlink = {"hoodie.compaction.carry.over.mode": "symlink"}
    with pytest.raises(ConfigError, match="carry.over.mode=symlink is impossible on object storage"):
        table.update_settings(symlink)
    with pytest.raises(ConfigError, match="carry.over.mode=symlink is impossible on object storage"):
        Table.create(f"{s3_env['bucket_uri']}/sym2", name="sym2", record_keys=["id"], ordering_field="seq",
                     event_time_field="ts", settings=symlink)
    assert not storage.exists(f"{s3_env['bucket_uri']}/sym2/.hoodie/hoodie.properties")
    server = s3_env["server"]
    # Both logs are accounted for byte for byte by their deltacommits' write stats: planning reads neither (the
    # folded one is checked for damage by the task that folds it: next test).
    server.reset_counts()
    assert table.plan_compaction(threshold="2024-01-01T12:00:00Z").operations
    assert not [r for r in server.counts() if ".log." in r["path"]]
    # Logs the stats do not account for (Java's, logs holding deletes) are scanned: log headers only, sized from
    # the one listing (no HEAD), a small log in one GET of all of it, a larger one in at most 2 ranged GETs (its
    # header window, its last block's trailer)
    monkeypatch.setattr(log_event_times, "_from_summary", lambda *args: {})   # nor the latest deltacommit's summary
    monkeypatch.setattr(log_event_times, "_from_covering_stats", lambda *args: {})
    for whole_scan_bytes, most in ((scan.REMOTE_WHOLE_SCAN_BYTES, 1), (0, 2)):
        monkeypatch.setattr(scan, "REMOTE_WHOLE_SCAN_BYTES", whole_scan_bytes)
        scan.clear_validated_scans()   # what a first planning reads (a repeat reuses the scans: checked below)
        server.reset_counts()
        assert table.plan_compaction(threshold="2024-01-01T12:00:00Z").operations
        per_log: dict[str, list[dict]] = {}
        for r in server.counts():
            if ".log." in r["path"]:
                per_log.setdefault(r["path"], []).append(r)
        assert len(per_log) == 2
        for requests in per_log.values():
            assert 1 <= len(requests) <= most and all(r["method"] == "GET" and r["range"] for r in requests), \
                requests
    # planning again: its listing shows both logs unchanged (same ETags), so their scans are not read again
    server.reset_counts()
    assert table.plan_compaction(threshold="2024-01-01T12:00:00Z").operations
    assert not [r for r in server.counts() if ".log." in r["path"]]


def _flip_trailer(path: str) -> None:
    """Break the trailing length check of the log's last block, leaving its size as it was."""
    data = bytearray(storage.read_bytes(path))
    data[-3] ^= 0xFF
    storage.write_bytes(path, bytes(data))


def test_a_log_on_s3_is_checked_by_its_etag_and_read_once(s3_env, tmp_path):  # noqa: F811
    """A write records the MD5 of each log object it creates (a single-part object's ETag). A log whose listed
    ETag is still that MD5 is byte for byte as committed: neither planning nor the run's pre-check reads it, the
    task that folds it reads it once. Any other bytes, even of the same size, change the ETag: read, refused."""
    table = Table.create(f"{s3_env['bucket_uri']}/dmg", name="dmg", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})
    for i, day in enumerate(("01", "02")):
        table.write(_jsonl(tmp_path, f"d{i}", _rows(day, i, range(2))))
    (latest,) = FileSystemView(table.path).latest_slices()
    first = latest.log_files[0].path
    timeline = Timeline.load(table.path)
    recorded = json.loads(timeline.commit_metadata(timeline.completed()[0]).extra[LOG_MD5])
    assert recorded == {first.rsplit("/", 1)[1]: hashlib.md5(storage.read_bytes(first)).hexdigest()}
    server = s3_env["server"]

    def log_gets() -> list[str]:
        return [r["path"] for r in server.counts() if ".log." in r["path"] and r["method"] == "GET"]

    server.reset_counts()
    planned = table.schedule_compaction(threshold="2024-01-01T12:00:00Z", carry_over="copy")
    assert planned.instant and not log_gets()
    # (this process published the deltacommits; one that has read nothing of the table reads whichever is fewer
    # requests, the deltacommits' MD5s or the logs' headers)
    table.run_compaction(planned.instant, local=True)
    assert log_gets() == ["/" + first.split("://", 1)[1]]   # the folded log, once, by its task
    # the carried copy of the other log has its ETag (a server-side copy): folding it, planning reads no log
    (latest,) = FileSystemView(table.path).latest_slices()
    assert [lf.name for lf in latest.log_files if planned.instant in lf.name]
    server.reset_counts()
    second = table.schedule_compaction(threshold="2024-01-02T12:00:00Z", carry_over="copy")
    assert not log_gets()
    (op,) = table.compaction(second.instant).operations
    copies = [n for n in op.logs_compacted if planned.instant in n]
    assert copies, op   # the carried copy is among the logs it folds

    # damage after planning (the object replaced by other bytes of the same size): the run's pre-check reads it,
    # since its ETag is no longer the MD5, and refuses before the plan goes inflight; the plan is rolled back
    _flip_trailer(storage.join(table.path, copies[0]))
    with pytest.raises(CorruptLogBlockError, match="not run.*rolled back"):
        table.run_compaction(second.instant, local=True)
    assert [c.instant for c in table.compactions()] == [planned.instant]
    with pytest.warns(CorruptLogBlockWarning):
        assert _data_rows(table.read().table)

    # the same bytes but one (the first block's trailing length): another ETag, so planning reads and refuses it
    damaged = Table.create(f"{s3_env['bucket_uri']}/dmg2", name="dmg2", record_keys=["id"], ordering_field="seq",
                           event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})
    for i, day in enumerate(("01", "02")):
        damaged.write(_jsonl(tmp_path, f"e{i}", _rows(day, i, range(2))))
    (latest,) = FileSystemView(damaged.path).latest_slices()
    _flip_trailer(latest.log_files[0].path)
    with pytest.raises(CorruptLogBlockError, match="refusing to compact"):
        damaged.schedule_compaction(threshold="2024-01-01T12:00:00Z", carry_over="copy")
    assert not damaged.compactions()
    with pytest.warns(CorruptLogBlockWarning):
        ours = _data_rows(damaged.read().table)
    assert rows_by_key(hudi_read(damaged.path, "snapshot", storage_options=s3_env["storage_options"]),
                       list(DATA)) == ours


def test_a_properties_update_is_one_put_and_mends_a_crashed_one(s3_env, s3_server):  # noqa: F811
    """One PUT replaces an object whole, so readers see the old file or the new one: no backup copy around it
    (Hudi's HoodieTableConfig.modify needs one where a write is not atomic). A crashed Java update that left only
    the backup is read from it, and the next update puts the file back and drops the backup."""
    table = Table.create(f"{s3_env['bucket_uri']}/props", name="props", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts")
    from engine.config.properties import load_table_config, save_table_config

    for inside_an_operation in (False, True):
        with storage.operation_reads() if inside_an_operation else contextlib.nullcontext():
            cfg = load_table_config(table.path)
            cfg.props["tidemark.ro.instant"] = f"2024010100000000{int(inside_an_operation)}"
            s3_server.reset_counts()
            save_table_config(cfg)
        steps = [(r["method"], r["path"].rsplit("/", 1)[-1], bool(r["copy_source"])) for r in s3_server.counts()]
        # Alone: the file read again, then the new file put over it. In an operation, one PUT If-Match the ETag of
        # the operation's own read (a change by another process since then is refused, re-read and merged:
        # `test_a_properties_update_keeps_what_another_process_changed_since_the_load`).
        assert steps == [("GET", "hoodie.properties", False)] * (not inside_an_operation) + \
            [("PUT", "hoodie.properties", False)]
        assert load_table_config(table.path).props["tidemark.ro.instant"] == f"2024010100000000{int(inside_an_operation)}"
    # a reader between the delete and the put of a crashed update reads the backup
    props = f"{table.path}/.hoodie/hoodie.properties"
    storage.copy(props, props + ".backup")
    storage.remove(props)
    assert Table.open(table.path).name == "props"
    cfg = load_table_config(table.path)
    cfg.props["tidemark.ro.instant"] = "20240101000000009"
    save_table_config(cfg)
    assert storage.exists(props) and not storage.exists(props + ".backup")
    assert load_table_config(table.path).props["tidemark.ro.instant"] == "20240101000000009"


def test_a_properties_update_keeps_what_another_process_changed_since_the_load(s3_env, tmp_path):  # noqa: F811
    """A long operation loads hoodie.properties at its start and updates it at its end (a compaction publishing
    its RO times): a key another process set or removed in between stays as that process left it; only the
    update's own keys change."""
    from engine.config.properties import load_table_config, save_table_config

    for where in (f"{s3_env['bucket_uri']}/merge", str(tmp_path / "merge")):
        table = Table.create(where, name="merge", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                             settings={"hoodie.datasource.hive_sync.database": "old"})
        with storage.operation_reads():   # the operation's copy is what a stale update would write back
            cfg = load_table_config(table.path)
            Table.open(table.path).update_settings({"hoodie.datasource.hive_sync.enable": "true",
                                                    "hoodie.datasource.hive_sync.database": "new"})
            cfg.props["tidemark.ro.instant"] = "20240101000000000"
            cfg.props.pop("hoodie.datasource.hive_sync.table", None)   # absent either way: nothing to remove
            save_table_config(cfg)
        props = load_table_config(table.path).props
        assert props["tidemark.ro.instant"] == "20240101000000000", where
        assert props["hoodie.datasource.hive_sync.enable"] == "true", where
        assert props["hoodie.datasource.hive_sync.database"] == "new", where
        assert cfg.props == props   # the saved config is the file's


def test_a_uri_is_never_a_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.resolve("s3://lake/t/") == "s3://lake/t"
    assert storage.resolve("rel/t") == str(tmp_path / "rel" / "t")
    assert storage.resolve("file:///x/y") == "/x/y"
    with pytest.raises(ConfigError, match="missing slash"):
        storage.resolve("s3:/lake/t")
    with pytest.raises(ConfigError, match="needs a bucket"):
        storage.resolve("s3:///t")
    assert not (tmp_path / "s3:").exists()
