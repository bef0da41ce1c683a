"""Every `tidemark` command on an `s3://` table (moto server): the URI is the table, never a local folder."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from engine.cli import main
from engine.io import storage
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def ok(capsys, *argv) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 0, (argv, err)
    return out


def test_every_command_on_an_s3_table(s3_env, spark, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    table = f"{s3_env['bucket_uri']}/lake/c"
    ok(capsys, "create", table, "--name", "c", "--record-key", "id", "--ordering-field", "seq", "--event-time-field",
       "ts", "--partition-field", "region", "--config", "hoodie.bucket.index.num.buckets=1")
    assert not (tmp_path / "s3:").exists() and storage.exists(f"{table}/.hoodie/hoodie.properties")
    # inputs on S3 too (Parquet read through pyarrow.fs), and local relative inputs
    for i, day in enumerate(["01", "02", "03"]):
        rows = pa.table({"id": [f"k{k}" for k in range(3)], "region": ["eu"] * 3, "seq": pa.array([i] * 3, pa.int64()),
                         "ts": [f"2024-01-{day}T0{k}:00:00Z" for k in range(3)]})
        if i == 0:
            pq.write_table(rows, tmp_path / "b0.parquet")
            storage.upload(str(tmp_path / "b0.parquet"), f"{s3_env['bucket_uri']}/in/b0.parquet")
            ok(capsys, "write", table, "--input", f"{s3_env['bucket_uri']}/in/b0.parquet")
        else:
            (tmp_path / f"b{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows.to_pylist()))
            ok(capsys, "write", table, "--input", f"b{i}.jsonl")
    plan = json.loads(ok(capsys, "compaction", "schedule", table, "--threshold", "2024-01-02T12:00:00Z", "--json"))
    assert plan["carry_over"] == "copy"
    code, out, err = run(capsys, "compaction", "schedule", f"{s3_env['bucket_uri']}/lake/other", "--carry-over",
                         "symlink", "--threshold", "2024-01-02T12:00:00Z")
    assert code != 0 and "no Hudi table at s3://" in err
    ok(capsys, "compaction", "run", table, "--json")
    shown = json.loads(ok(capsys, "compaction", "show", table, "--instant", plan["instant"], "--json"))
    assert shown["operations"][0]["logs_carried"][0]["mode"] == "copy"
    assert json.loads(ok(capsys, "compactions", "show", table, "--json"))[0]["state"] == "completed"
    fresh = json.loads(ok(capsys, "freshness", table, "--json"))
    assert fresh["ro_completion_time"] == "2024-01-02T23:59:59.999Z"
    assert json.loads(ok(capsys, "metrics", table, "--json"))["remaining_log_files"] == 1
    assert json.loads(ok(capsys, "timeline", table, "--json"))
    ok(capsys, "tide", table, "--json")
    ok(capsys, "show", table, "--json")
    out_uri = f"{s3_env['bucket_uri']}/exports/snap.parquet"
    assert json.loads(ok(capsys, "read", table, "--output", out_uri, "--json"))["rows"] == 3
    exported = pq.read_table(storage.parquet_source(out_uri))
    cols = ["_hoodie_record_key", "_hoodie_partition_path", "id", "seq"]
    assert rows_by_key(exported, cols) == rows_by_key(hudi_read(table, storage_options=s3_env["storage_options"]), cols)
    ok(capsys, "read", table, "--query", "read_optimized", "--output", "ro.parquet", "--local")
    assert pq.read_table(tmp_path / "ro.parquet").num_rows == 3
    ok(capsys, "rollback", table, "--instant", plan["instant"], "--json")
    ok(capsys, "clean", table, "--retain-commits", "1", "--json")
    ok(capsys, "recover", table, "--json")
    code, _, err = run(capsys, "create", "s3:/lake/t", "--name", "t", "--record-key", "id", "--ordering-field", "seq",
                       "--event-time-field", "ts")
    assert code != 0 and "missing a slash" in err.replace("a URI with a missing slash", "missing a slash")
    assert not (tmp_path / "s3:").exists()
