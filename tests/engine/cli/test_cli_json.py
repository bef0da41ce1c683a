"""Every CLI command's --json output parses and prints times as ISO-8601 UTC; flags left out mean the table's
settings; refusals exit 3 with their reason code and blocking instant."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main
from tests.support.tables import THRESHOLD, day_file, table_copy, three_day_table

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")
TIME_KEYS = {"threshold", "start", "end", "time"}
COUNTS = {"logs_with_unknown_event_time"}   # a count of logs, not a time


def _is_time_key(key: str) -> bool:
    return key not in COUNTS and (key in TIME_KEYS or key.endswith("_time") or key.endswith("_at"))


def assert_iso_times(data: Any, path: str = "$") -> int:
    """Every time-named value is null or an ISO-8601 UTC string; returns how many times were seen."""
    seen = 0
    if isinstance(data, dict):
        for key, value in data.items():
            if _is_time_key(key) and not isinstance(value, dict):
                assert value is None or (isinstance(value, str) and ISO_UTC.match(value)), f"{path}.{key}={value!r}"
                seen += value is not None
            elif key.endswith("_ms"):
                assert value is None or isinstance(value, int), f"{path}.{key}={value!r}"
            else:
                seen += assert_iso_times(value, f"{path}.{key}")
    elif isinstance(data, list):
        seen += sum(assert_iso_times(v, f"{path}[{i}]") for i, v in enumerate(data))
    return seen


def cli(capsys, *argv: str, code: int = 0) -> Any:
    """Run a command with --json; check its exit code; return its parsed stdout."""
    got = main([*argv, "--json"])
    out = capsys.readouterr()
    assert got == code, out.err
    data = json.loads(out.out)
    assert_iso_times(data)
    return data


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory) -> str:
    return three_day_table(tmp_path_factory.mktemp("cli")).path


@pytest.fixture
def table(base, tmp_path) -> str:
    return str(table_copy(Path(base), tmp_path / "copy"))


def test_every_command_prints_json_with_iso_times(table, tmp_path, capsys) -> None:
    created = cli(capsys, "create", str(tmp_path / "new"), "--name", "new", "--record-key", "id",
                  "--ordering-field", "seq", "--event-time-field", "ts")
    assert created["table"] == "new" and created["timeline"] == []
    written = cli(capsys, "write", table, "--input", day_file(tmp_path, 7, "04"))
    assert ISO_UTC.match(written["committed_at"]) and written["records_written"] == 3
    assert cli(capsys, "read", table, "--output", str(tmp_path / "o.parquet"), "--local")["rows"] == 3
    shown = cli(capsys, "show", table)
    assert assert_iso_times(shown) >= 4 and all(ISO_UTC.match(i["time"]) for i in shown["timeline"])
    assert assert_iso_times(cli(capsys, "timeline", table)) == 4
    preview = cli(capsys, "compaction", "schedule", table, "--threshold", THRESHOLD, "--dry-run")
    assert preview["instant"] is None and preview["threshold"] == "2024-01-02T12:00:00.000Z"
    plan = cli(capsys, "compaction", "schedule", table, "--threshold", THRESHOLD)
    assert plan["state"] == "requested" and plan["threshold_ms"] == 1704196800000
    refused = cli(capsys, "compaction", "schedule", table, "--threshold", THRESHOLD, code=3)
    assert refused["refused"] == "pending_compaction" and refused["blocking_instant"] == plan["instant"]
    assert cli(capsys, "compaction", "show", table, "--instant", plan["instant"])["state"] == "requested"
    rolled = cli(capsys, "compaction", "rollback", table, "--instant", plan["instant"])
    assert rolled["instant"] == plan["instant"]
    plan = cli(capsys, "compaction", "schedule", table, "--threshold", THRESHOLD)
    ran = cli(capsys, "compaction", "run", table)
    assert ran["ro_completion_time"] == "2024-01-02T23:59:59.999Z" and ran["threshold"].endswith("Z")
    shown = cli(capsys, "compaction", "show", table, "--instant", plan["instant"])
    assert shown["state"] == "completed" and assert_iso_times(shown) >= 5
    (row,) = cli(capsys, "compactions", "show", table)
    assert row["state"] == "completed" and ISO_UTC.match(row["scheduled_at"])
    fresh = cli(capsys, "freshness", table)
    assert fresh["guarantee"] == "holds" and fresh["ro_completion_time"] == ran["ro_completion_time"]
    assert ISO_UTC.match(cli(capsys, "metrics", table)["min_event_time"])
    tide = cli(capsys, "tide", table, "--bucket", "1d")
    assert [b["start"] for b in tide] == ["2024-01-03T00:00:00.000Z", "2024-01-04T00:00:00.000Z"]
    assert cli(capsys, "clean", table, "--retain-commits", "1", "--dry-run")["dry_run"] is True
    assert cli(capsys, "clean", table, "--retain-commits", "1")["dry_run"] is False
    assert cli(capsys, "recover", table)["rolled_back"] == []


def test_demo_json(spark, tmp_path, capsys) -> None:
    summary = cli(capsys, "demo", str(tmp_path / "flights"), "--batches", "2", "--limit", "300")
    assert summary["instants"] and summary["rows_written"] > 0 and summary["path"].endswith("flights")


def test_refusal_without_json_goes_to_stderr(table, capsys) -> None:
    main(["compaction", "schedule", table, "--threshold", THRESHOLD])
    capsys.readouterr()
    assert main(["compaction", "schedule", table, "--threshold", THRESHOLD]) == 3
    out = capsys.readouterr()
    assert out.out == "" and "refused [pending_compaction]" in out.err


def _scheduled_settings(capsys, table: str, *flags: str) -> dict[str, Any]:
    plan = cli(capsys, "compaction", "schedule", table, "--threshold", THRESHOLD, *flags)
    shown = cli(capsys, "compaction", "show", table, "--instant", plan["instant"])
    assert shown["settings_used"] == plan["settings_used"]
    return {"carry_over": plan["carry_over"], "exact": plan["exact"],
            **{k: (v["value"], v["source"]) for k, v in shown["settings_used"].items()}}


def test_cli_honours_table_settings_unless_a_flag_is_given(spark, tmp_path: Path, capsys) -> None:
    table = three_day_table(tmp_path, {"hoodie.compaction.carry.over.mode": "copy",
                                       "hoodie.compaction.exact.event.time": "true"}).path
    other = str(tmp_path / "other")
    shutil.copytree(table, other, symlinks=True)

    used = _scheduled_settings(capsys, table)
    assert used["carry_over"] == "copy" and used["exact"] is True
    assert used["hoodie.compaction.carry.over.mode"] == ("copy", "table")
    assert used["hoodie.compaction.exact.event.time"] == (True, "table")
    assert used["hoodie.compaction.strategy"] == ("event_time", "default")
    assert used["threshold"] == ("2024-01-02T12:00:00.000Z", "argument")
    ran = cli(capsys, "compaction", "run", table)
    assert ran["logs_carried_over"] == 1

    used = _scheduled_settings(capsys, other, "--carry-over", "symlink", "--no-exact", "--strategy", "event_time")
    assert used["carry_over"] == "symlink" and used["exact"] is False
    assert used["hoodie.compaction.carry.over.mode"] == ("symlink", "argument")
    assert used["hoodie.compaction.exact.event.time"] == (False, "argument")
    assert used["hoodie.compaction.strategy"] == ("event_time", "argument")
