"""The `tidemark` CLI end to end (in-process, sharing the test session's Spark)."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from engine.cli import main
from tests.support.oracle import hudi_read, rows_by_key


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
    assert len(first["instant"]) == 17 and first["records_written"] == 2
    code, out, _ = run(capsys, "write", table, "--input", str(jsonl))
    assert code == 0 and out.strip() > first["instant"]
    code, out, _ = run(capsys, "show", table, "--json")
    shown = json.loads(out)
    assert [i["state"] for i in shown["timeline"]] == ["completed", "completed"]
    logs = [lf for g in shown["file_groups"] for s in g["slices"] for lf in s["log_files"]]
    assert len(logs) == 3 and min(lf["min_event_time"] for lf in logs) == "2024-01-01T00:00:00.000Z"
    for flag in ([], ["--spark"], ["--local"]):
        out_file = tmp_path / f"out{''.join(flag)}.parquet"
        code, _, err = run(capsys, "read", table, "--output", str(out_file), *flag)
        assert code == 0, err
        assert rows_by_key(pq.read_table(out_file)) == rows_by_key(hudi_read(table))
        amounts = {r["id"]: r["amount"] for r in pq.read_table(out_file).to_pylist()}
        assert amounts == {"a": 9.5, "b": 2.5}


def test_read_without_output_shows_the_first_rows(tmp_path, capsys):
    table = str(tmp_path / "t")
    code, _, err = run(capsys, "create", table, "--record-key", "id", "--ordering-field", "seq",
                       "--event-time-field", "ts", "--partition-field", "region")
    assert code == 0, err
    rows = [{"id": f"k{i:02d}", "region": "eu" if i % 2 else "us", "seq": 1, "ts": f"2024-01-01T00:{i:02d}:00Z",
             "note": "x" * (60 if i == 3 else 3)} for i in range(25)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run(capsys, "write", table, "--input", str(source))[0] == 0

    code, out, err = run(capsys, "read", table, "--limit", "4")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["id", "region", "seq", "ts", "note"]   # the table's columns; no _hoodie_* ones
    assert len(lines) == 5 and "more follow" in err and "first 4 rows of the snapshot" in err
    everything = {r["id"]: r for r in hudi_read(table).to_pylist()}
    assert {line.split()[0] for line in lines[1:]} <= set(everything)
    code, out, err = run(capsys, "read", table, "--limit", "30", "--json")
    shown = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(shown) == 25 and "25 rows of the snapshot" in err and "more" not in err
    assert {r["id"]: r["note"] for r in shown} == {k: r["note"] for k, r in everything.items()}
    assert shown[0]["_hoodie_commit_time"] and shown[0]["ts"].endswith("Z")
    code, out, err = run(capsys, "read", table)
    assert code == 0 and len(out.splitlines()) == 21 and "…" in out   # 20 by default; a long value is cut
    code, out, err = run(capsys, "read", table, "--query", "read_optimized")
    assert code == 0 and out.split() == ["id", "region", "seq", "ts", "note"] and "0 rows of the read-optimized" in err
    code, _, err = run(capsys, "read", table, "--spark")
    assert code == 1 and "--spark reads into --output" in err
    code, _, err = run(capsys, "read", table, "--limit", "3", "--output", str(tmp_path / "o.parquet"))
    assert code == 1 and "--limit shows the first rows" in err and not (tmp_path / "o.parquet").exists()


def test_create_names_the_table_after_its_path_unless_told(tmp_path, capsys):
    for folder, expected in (("flights", "flights"), ("ny-flights.2013", "ny_flights_2013"), ("2013", "t_2013")):
        code, out, err = run(capsys, "create", str(tmp_path / folder) + "/", "--record-key", "id",
                             "--ordering-field", "seq", "--event-time-field", "ts", "--json")
        assert code == 0, err
        assert json.loads(out)["table"] == expected
    code, out, err = run(capsys, "create", str(tmp_path / "named"), "--name", "trips", "--record-key", "id",
                         "--ordering-field", "seq", "--event-time-field", "ts", "--json")
    assert code == 0 and json.loads(out)["table"] == "trips", err


def test_errors_go_to_stderr_with_nonzero_exit(tmp_path, capsys):
    code, out, err = run(capsys, "show", str(tmp_path / "missing"))
    assert code == 1 and out == "" and "no Hudi table" in err
    code, _, err = run(capsys, "create", str(tmp_path / "t"), "--name", "t", "--record-key", "id",
                       "--ordering-field", "s", "--event-time-field", "e", "--config", "hoodie.bogus=1")
    assert code == 1 and "unknown config key 'hoodie.bogus'" in err
    pq.write_table(pa.table({"id": ["x"]}), tmp_path / "x.parquet")
    code, _, err = run(capsys, "write", str(tmp_path / "missing"), "--input", str(tmp_path / "x.parquet"))
    assert code == 1 and "no Hudi table" in err


def test_an_object_store_that_cannot_be_reached_is_one_line_not_a_traceback(capsys, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")   # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    code, out, err = run(capsys, "show", "s3://lake/t")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "object store: Could not connect to the endpoint URL" in err, err


def test_compaction_cli_flow(spark, tmp_path, capsys):
    table = str(tmp_path / "c")
    assert run(capsys, "create", table, "--name", "c", "--record-key", "id", "--ordering-field", "seq",
               "--event-time-field", "ts", "--config", "hoodie.bucket.index.num.buckets=1")[0] == 0
    for i, day in enumerate(["01", "02", "03"]):
        src = tmp_path / f"b{i}.jsonl"
        src.write_text("".join(f'{{"id":"k{k}","seq":{i},"ts":"2024-01-{day}T0{k}:00:00Z"}}\n' for k in range(3)))
        assert run(capsys, "write", table, "--input", str(src))[0] == 0
    code, out, err = run(capsys, "compaction", "schedule", table, "--threshold", "2024-01-02T12:00:00Z", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["threshold"] == "2024-01-02T12:00:00.000Z" and len(plan["operations"]) == 1
    assert len(plan["operations"][0]["logs_compacted"]) == 2
    code, out, _ = run(capsys, "compaction", "schedule", table, "--threshold", "2024-01-03T00:00:00Z", "--json")
    refused = json.loads(out)
    assert code == 3 and refused["blocking_instant"] == plan["instant"] and refused["refused"] == "pending_compaction"
    assert plan["instant"] in refused["message"]
    code, out, err = run(capsys, "compaction", "run", table, "--json")
    assert code == 0, err
    code, out, _ = run(capsys, "compactions", "show", table, "--json")
    (row,) = json.loads(out)
    assert row["state"] == "completed" and row["logs_compacted"] == 2 and row["logs_carried"] == 1
    code, out, _ = run(capsys, "compaction", "show", table, "--instant", plan["instant"], "--json")
    assert json.loads(out)["operations"][0]["logs_carried"][0]["mode"] == "symlink"
    code, out, _ = run(capsys, "freshness", table, "--json")
    fresh = json.loads(out)
    assert fresh["threshold"] == "2024-01-02T12:00:00.000Z" and fresh["late_records"] == 0
    assert fresh["ro_completion_time"] == "2024-01-02T23:59:59.999Z"
    assert fresh["ro_freshness_time"] == "2024-01-02T02:00:00.000Z"
    code, out, _ = run(capsys, "metrics", table, "--json")
    metrics = json.loads(out)
    assert metrics["min_event_time"] == "2024-01-03T00:00:00.000Z" and metrics["remaining_log_files"] == 1
    assert metrics["file_slices_with_logs"] == 1 and metrics["pending_compactions"] == 0
    code, out, _ = run(capsys, "clean", table, "--retain-commits", "1", "--dry-run", "--json")
    dry = json.loads(out)
    assert code == 0 and dry["dry_run"] and dry["errors"] == []
    ro = {r["id"]: r["seq"] for r in hudi_read(table, "read_optimized").to_pylist()}
    assert ro == {"k0": 1, "k1": 1, "k2": 1}
    code, _, err = run(capsys, "compaction", "schedule", table, "--threshold", "yesterday")
    assert code == 1 and "malformed --threshold 'yesterday'" in err
    code, _, err = run(capsys, "compaction", "schedule", table, "--threshold", "20240101")
    assert code == 1 and "ambiguous" in err
    # a threshold past tomorrow would publish completeness for data not yet arrived: only with --future
    code, _, err = run(capsys, "compaction", "schedule", table, "--threshold", "2199-01-01T00:00:00Z")
    assert code == 1 and "is in the future" in err and "--future" in err
    code, out, _ = run(capsys, "compaction", "schedule", table, "--threshold", "2199-01-01T00:00:00Z", "--future",
                       "--dry-run", "--json")
    assert code == 0 and json.loads(out)["threshold"].startswith("2199-01-01")
