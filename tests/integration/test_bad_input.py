"""Bad input through the `tidemark` command: one clear stderr line, exit 1, and the table byte-identical.

Each case runs the real CLI in a subprocess (its own JVM, its own stderr) against a copy of one table that
has a base file, logs and a completed event-time compaction.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.config.layout import create_table
from engine.write.pipeline import write_parquet

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def batch(ids: range, seq: int) -> pa.Table:
    return pa.table({"id": [f"k{i}" for i in ids], "region": ["eu" if i % 2 else "us" for i in ids],
                     "seq": pa.array([seq] * len(ids), pa.int64()),
                     "ts": pa.array([T0 + dt.timedelta(hours=i) for i in ids], pa.timestamp("us", tz="UTC")),
                     "v": [float(i) for i in ids]})


@pytest.fixture(scope="module")
def template(spark, tmp_path_factory) -> Path:
    """A table with base files (one compaction) and later logs."""
    root = tmp_path_factory.mktemp("bad_input")
    path = root / "t"
    create_table(str(path), name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "2"})
    for n, (ids, seq) in enumerate([(range(0, 20), 1), (range(10, 30), 2)]):
        src = root / f"b{n}.parquet"
        pq.write_table(batch(ids, seq), src)
        write_parquet(str(path), [str(src)])
    schedule_compaction(str(path), threshold_ms=int((T0 + dt.timedelta(hours=40)).timestamp() * 1000))
    run_compaction(str(path))
    src = root / "b2.parquet"
    pq.write_table(batch(range(25, 35), 3), src)
    write_parquet(str(path), [str(src)])
    return path


@pytest.fixture
def table(template, tmp_path) -> Path:
    path = tmp_path / "t"
    shutil.copytree(template, path, symlinks=True)
    return path


def snapshot(path: Path) -> dict[str, str]:
    """relative path -> 'dir' | 'link:<target>' | sha256 of the bytes, for the whole table tree."""
    out: dict[str, str] = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            if os.path.islink(full):
                out[rel] = "link:" + os.readlink(full)
            elif os.path.isdir(full):
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return out


def tidemark(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "engine", *map(str, argv)], capture_output=True, text=True,
                          env=env, cwd=str(REPO), timeout=300)


def write_text(tmp: Path, name: str, text: str) -> Path:
    (tmp / name).write_text(text)
    return tmp / name


def write_bytes(tmp: Path, name: str, data: bytes) -> Path:
    (tmp / name).write_bytes(data)
    return tmp / name


def parquet(tmp: Path, name: str, data: pa.Table) -> Path:
    pq.write_table(data, tmp / name)
    return tmp / name


def row(**overrides) -> dict:
    return {"id": "k1", "region": "eu", "seq": 9, "ts": "2024-01-01T05:00:00Z", "v": 1.0, **overrides}


def with_map(values: pa.Array) -> pa.Table:
    """One good row, plus a map column `m` holding `values`."""
    return pa.table({"id": ["k1"], "region": ["eu"], "seq": [9], "ts": pa.array([T0], pa.timestamp("us", tz="UTC")),
                     "v": [1.0], "m": values})


def jsonl(tmp: Path, *rows: dict) -> Path:
    return write_text(tmp, "in.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def truncate_a_base_file(table: Path) -> None:
    base = next(p for p in sorted(table.rglob("*.parquet")) if ".hoodie" not in p.parts)
    data = base.read_bytes()
    base.write_bytes(data[: len(data) // 2])


def set_property(table: Path, key: str, value: str) -> None:
    props = table / ".hoodie" / "hoodie.properties"
    lines = [ln for ln in props.read_text().splitlines() if not ln.startswith(key + "=")]
    props.write_text("\n".join(lines + [f"{key}={value}"]) + "\n")


# Each case: (prepare(tmp, table) -> argv after the table path, the command, words the error must name).
Case = tuple[str, Callable[[Path, Path], list], tuple[str, ...]]
WRITE_CASES: dict[str, tuple[Callable[[Path], Path], tuple[str, ...], str]] = {
    # name: (input maker, words in the message, operation)
    "garbage_parquet": (lambda t: write_bytes(t, "in.parquet", b"this is not parquet at all" * 10),
                        ("in.parquet",), "upsert"),
    "empty_parquet_file": (lambda t: write_bytes(t, "in.parquet", b""), ("in.parquet",), "upsert"),
    "zero_row_parquet": (lambda t: parquet(t, "in.parquet", batch(range(0), 1)), ("in.parquet", "no rows"), "upsert"),
    "empty_csv": (lambda t: write_bytes(t, "in.csv", b""), ("in.csv",), "upsert"),
    "header_only_csv": (lambda t: write_text(t, "in.csv", "id,region,seq,ts,v\n"), ("in.csv", "no rows"), "upsert"),
    "ragged_csv": (lambda t: write_text(t, "in.csv", "id,region,seq,ts,v\nk1,eu,1\nk2,eu,1,x,y,z\n"),
                   ("in.csv",), "upsert"),
    "binary_csv": (lambda t: write_bytes(t, "in.csv", bytes(range(256)) * 4), ("in.csv",), "upsert"),
    "empty_jsonl": (lambda t: write_bytes(t, "in.jsonl", b""), ("in.jsonl",), "upsert"),
    "garbage_jsonl": (lambda t: write_text(t, "in.jsonl", '{"id": "k1", "seq": \nnot json\n'), ("in.jsonl",), "upsert"),
    "unsupported_extension": (lambda t: write_text(t, "in.txt", "id\nk1\n"), ("in.txt",), "upsert"),
    "missing_record_key": (lambda t: jsonl(t, {k: v for k, v in row().items() if k != "id"}), ("id",), "upsert"),
    "missing_ordering": (lambda t: jsonl(t, {k: v for k, v in row().items() if k != "seq"}), ("seq",), "upsert"),
    "missing_event_time": (lambda t: jsonl(t, {k: v for k, v in row().items() if k != "ts"}), ("ts",), "upsert"),
    "unparseable_event_time": (lambda t: jsonl(t, row(ts="yesterday at noon")), ("ts", "yesterday at noon"), "upsert"),
    "unparseable_event_time_parquet": (
        lambda t: parquet(t, "in.parquet", pa.table({"id": ["k1"], "region": ["eu"], "seq": [9], "ts": ["soon"],
                                                     "v": [1.0]})), ("ts", "soon"), "upsert"),
    "event_time_beyond_9999": (lambda t: parquet(t, "in.parquet", pa.table({
        "id": ["k1"], "region": ["eu"], "seq": [9], "ts": pa.array([253402300800000 * 10], pa.timestamp("ms", tz="UTC")),
        "v": [1.0]})), ("ts", "9999"), "upsert"),
    "ordering_type_conflict": (lambda t: jsonl(t, row(seq="not a number")), ("seq", "not a number"), "upsert"),
    "empty_record_key": (lambda t: jsonl(t, row(id="")), ("id", "empty"), "upsert"),
    "null_record_key": (lambda t: jsonl(t, row(id=None)), ("id", "null"), "upsert"),
    "empty_record_key_parquet": (lambda t: parquet(t, "in.parquet", pa.table({
        "id": ["k1", ""], "region": ["eu", "eu"], "seq": [9, 9], "ts": pa.array([T0, T0], pa.timestamp("us", tz="UTC")),
        "v": [1.0, 2.0]})), ("id", "empty"), "upsert"),
    "delete_unknown_column": (lambda t: jsonl(t, {"id": "k1", "region": "eu", "colour": "red"}), ("colour",), "delete"),
    "delete_empty_key": (lambda t: jsonl(t, {"id": "", "region": "eu"}), ("id", "empty"), "delete"),
    "missing_input": (lambda t: t / "nowhere.parquet", ("nowhere.parquet",), "upsert"),
    "null_only_new_column": (lambda t: jsonl(t, row(colour=None)), ("in.jsonl", "colour", "only nulls"), "upsert"),
    "repeated_column": (lambda t: write_text(t, "in.csv", "id,region,seq,ts,v,id\nk1,eu,9,2024-01-01T00:00:00Z,1,k2\n"),
                        ("in.csv", "id", "more than once"), "upsert"),
    "map_with_int_keys": (lambda t: parquet(t, "in.parquet", with_map(pa.array([[(1, "a")]], pa.map_(pa.int32(), pa.string())))),
                          ("in.parquet", "'m'", "int32", "string keys"), "upsert"),
    "map_with_a_key_twice": (lambda t: parquet(t, "in.parquet", with_map(pa.array([[("a", "x"), ("a", "y")]],
                                                                                    pa.map_(pa.string(), pa.string())))),
                             ("'m'", "'a' twice"), "upsert"),
    "not_utf8_csv": (lambda t: write_bytes(t, "in.csv", b"id,region,seq,ts,v\n\xff\xfe,eu,9,2024-01-01T00:00:00Z,1\n"),
                     ("in.csv", "UTF-8"), "upsert"),
}


@pytest.mark.parametrize("case", sorted(WRITE_CASES))
def test_bad_write_input(table, tmp_path, case):
    make, words, operation = WRITE_CASES[case]
    source = make(tmp_path)
    assert_refused(table, ["write", table, "--input", source, "--operation", operation], words)


SCHEDULE_CASES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "threshold_1e20": (["--threshold", "1e20"], ("1e20",)),
    "threshold_huge_millis": (["--threshold", "100000000000000000000"], ("100000000000000000000",)),
    "threshold_negative": (["--threshold=-5"], ("-5",)),
    "threshold_beyond_9999": (["--threshold", "253402300800000"], ("253402300800000",)),
    "threshold_garbage": (["--threshold", "next tuesday"], ("next tuesday",)),
    "latency_huge": (["--data-latency", "100000000000000000000s"], ("100000000000000000000s",)),
    "latency_negative": (["--data-latency=-2h"], ("-2h",)),
    "latency_1e20": (["--data-latency", "1e20"], ("1e20",)),
    "latency_before_1970": (["--data-latency", "200000d"], ("data latency", "out of range")),
}


@pytest.mark.parametrize("case", sorted(SCHEDULE_CASES))
def test_out_of_range_schedule_arguments_write_nothing(table, case):
    args, words = SCHEDULE_CASES[case]
    assert_refused(table, ["compaction", "schedule", table, *args], words)


def test_out_of_range_latency_setting_is_refused_at_create(tmp_path):
    result = tidemark("create", tmp_path / "n", "--name", "n", "--record-key", "id", "--ordering-field", "seq",
                      "--event-time-field", "ts", "--config",
                      "hoodie.compaction.event.time.data.latency=100000000000000000000s")
    assert_one_error_line(result, ("100000000000000000000s",))
    assert not (tmp_path / "n").exists()


@pytest.mark.parametrize("key", ["tidemark.threshold", "tidemark.roCompletionTime", "tidemark.roFreshnessTime"])
def test_freshness_names_a_bad_value_in_the_compaction_commit(table, key):
    (commit,) = (table / ".hoodie").glob("*.commit")  # the event-time compaction's commit
    metadata = json.loads(commit.read_text())
    metadata["extraMetadata"][key] = "100000000000000000000"
    commit.write_text(json.dumps(metadata))
    assert_refused(table, ["freshness", table, "--json"], (key, "100000000000000000000"))


@pytest.mark.parametrize("key", ["tidemark.ro.threshold", "tidemark.ro.completion.time", "tidemark.ro.freshness.time"])
def test_freshness_names_a_bad_value_in_hoodie_properties(table, key):
    # Once the compaction left the active timeline, hoodie.properties is the promise's only record.
    for name in {p.name.split(".")[0] for p in (table / ".hoodie").glob("*.commit")}:
        for instant_file in (table / ".hoodie").glob(f"{name}.*"):
            instant_file.unlink()
    set_property(table, "tidemark.ro.threshold", "1705190400000")
    set_property(table, key, "100000000000000000000")
    assert_refused(table, ["freshness", table, "--json"], (key, "100000000000000000000"))


@pytest.mark.parametrize("local", [False, True])
def test_read_of_a_truncated_base_file_leaves_no_output(table, tmp_path, local):
    truncate_a_base_file(table)
    output = tmp_path / "out.parquet"
    assert_refused(table, ["read", table, "--output", output, "--local" if local else "--spark"], (".parquet",))
    assert not output.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("out")]


def assert_one_error_line(result: subprocess.CompletedProcess, words: tuple[str, ...]) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tidemark: error: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def assert_refused(table: Path, argv: list, words: tuple[str, ...]) -> None:
    before = snapshot(table)
    result = tidemark(*argv)
    assert_one_error_line(result, words)
    assert snapshot(table) == before


def test_a_good_command_prints_nothing_on_stderr(table, tmp_path):
    """The JVM's start-up banner is not ours to print: a successful Spark command keeps stderr empty."""
    result = tidemark("read", table, "--output", tmp_path / "ok.parquet")
    assert result.returncode == 0 and result.stderr.splitlines() == [f"wrote 35 rows to {tmp_path / 'ok.parquet'}"]
    result = tidemark("write", table, "--input", jsonl(tmp_path, row()))
    assert result.returncode == 0 and result.stderr == ""


@pytest.mark.parametrize("where", [[], ["--spark"]], ids=["in_process", "spark"])
def test_a_failure_inside_spark_is_one_line(table, tmp_path, where):
    """A base file whose footer is intact but whose pages are not fails on an executor (or an in-process
    compaction thread): still one line."""
    result = tidemark("compaction", "schedule", table, "--threshold", "2024-01-03T00:00:00Z")
    assert result.returncode == 0, result.stderr
    base = next(p for p in sorted(table.rglob("*.parquet")) if ".hoodie" not in p.parts)
    data = bytearray(base.read_bytes())
    data[4:64] = b"\xff" * 60      # the first column chunk's page header; the footer stays readable
    base.write_bytes(bytes(data))
    pq.read_metadata(base)
    line = assert_one_error_line(tidemark("compaction", "run", table, *where), (base.name, "unreadable"))
    assert "Traceback" not in line and line.isprintable()
