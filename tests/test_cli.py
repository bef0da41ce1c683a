"""The `tidemark` CLI end to end (in-process, sharing the test session's Spark)."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from engine.cli import main
from tests.oracle import hudi_read, rows_by_key


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_create_write_show_read(spark, tmp_path, capsys):
    table = str(tmp_path / "t")
    csv = tmp_path / "in.csv"
    csv.write_text("id,region,seq,ts,amount\na,eu,1,2024-01-01T00:00:00Z,1.5\nb,us,1,2024-01-01T01:00:00Z,2.5\n")
    jsonl = tmp_path / "up.jsonl"
    jsonl.write_text('{"id":"a","region":"eu","seq":2,"ts":"2024-01-02T00:00:00Z","amount":9.5}\n')
    code, _, err = run(capsys, "create", table, "--name", "t", "--record-key", "id", "--partition-field", "region",
                       "--ordering-field", "seq", "--event-time-field", "ts", "--hive-style",
                       "--config", "hoodie.logfile.data.block.format=parquet")
    assert code == 0, err
    code, out, err = run(capsys, "write", table, "--input", str(csv), "--json")
    assert code == 0, err
    first = json.loads(out)
    assert len(first["instant"]) == 17 and first["records"] == 2
    code, out, _ = run(capsys, "write", table, "--input", str(jsonl))
    assert code == 0 and out.strip() > first["instant"]
    code, out, _ = run(capsys, "show", table, "--json")
    shown = json.loads(out)
    assert [i["state"] for i in shown["timeline"]] == ["completed", "completed"]
    logs = [lf for g in shown["file_groups"] for s in g["slices"] for lf in s["log_files"]]
    assert len(logs) == 3 and min(lf["min_event_time"] for lf in logs) == "2024-01-01T00:00:00.000Z"
    for flag in ([], ["--local"]):
        out_file = tmp_path / f"out{len(flag)}.parquet"
        code, _, err = run(capsys, "read", table, "--output", str(out_file), *flag)
        assert code == 0, err
        assert rows_by_key(pq.read_table(out_file)) == rows_by_key(hudi_read(table))
        amounts = {r["id"]: r["amount"] for r in pq.read_table(out_file).to_pylist()}
        assert amounts == {"a": 9.5, "b": 2.5}


def test_errors_go_to_stderr_with_nonzero_exit(tmp_path, capsys):
    code, out, err = run(capsys, "show", str(tmp_path / "missing"))
    assert code == 1 and out == "" and "no Hudi table" in err
    code, _, err = run(capsys, "create", str(tmp_path / "t"), "--name", "t", "--record-key", "id",
                       "--ordering-field", "s", "--event-time-field", "e", "--config", "hoodie.bogus=1")
    assert code == 1 and "unknown config key 'hoodie.bogus'" in err
    pq.write_table(pa.table({"id": ["x"]}), tmp_path / "x.parquet")
    code, _, err = run(capsys, "write", str(tmp_path / "missing"), "--input", str(tmp_path / "x.parquet"))
    assert code == 1 and "no Hudi table" in err
