"""Where the CLI's writes, reads and compaction runs go (engine.placement): small work in-process, big work or
a cluster on Spark, and the same files on disk either way."""
from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import engine.spark
from engine import Table, placement
from engine.cli import main
from engine.errors import ConfigError
from engine.write import in_process, pipeline
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.placement_tables import INSTANTS, new_table, rows


@pytest.fixture
def spark_calls(monkeypatch, spark):
    """Counts Spark session requests (and hands out the test session, whatever SPARK_MASTER says)."""
    calls: list[int] = []

    def counting(*_args, **_kwargs):
        calls.append(1)
        return spark

    monkeypatch.setattr(engine.spark, "get_spark", counting)
    return calls


# ------------------------------------------------------------------------------------------ the rule

def test_placement_rule(monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    monkeypatch.delenv(placement.MAX_ROWS_ENV, raising=False)
    monkeypatch.delenv(placement.MAX_MB_ENV, raising=False)
    assert placement.write_in_process(placement.DEFAULT_MAX_ROWS)
    assert not placement.write_in_process(placement.DEFAULT_MAX_ROWS + 1)
    assert placement.read_in_process(placement.DEFAULT_MAX_MB * 2**20)
    assert not placement.read_in_process(placement.DEFAULT_MAX_MB * 2**20 + 1)
    monkeypatch.setenv(placement.MAX_ROWS_ENV, "10")
    assert placement.write_in_process(10) and not placement.write_in_process(11)
    assert placement.write_in_process(11, local=True)      # --local always wins
    assert not placement.write_in_process(1, local=False)  # so does --spark
    monkeypatch.setenv("SPARK_MASTER", "local[2]")
    assert placement.write_in_process(1)
    monkeypatch.setenv("SPARK_MASTER", "spark://master:7077")
    assert not placement.write_in_process(1) and not placement.read_in_process(1)
    assert placement.read_in_process(1, local=True)
    monkeypatch.setenv(placement.MAX_MB_ENV, "lots")
    with pytest.raises(ConfigError, match=placement.MAX_MB_ENV):
        placement.read_in_process(1)


def test_dataframe_placement_rule(monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    monkeypatch.delenv(placement.MAX_DATAFRAME_MB_ENV, raising=False)
    limit = placement.DEFAULT_MAX_DATAFRAME_MB * 2**20
    assert placement.write_dataframe_in_process(limit) and not placement.write_dataframe_in_process(limit + 1)
    assert not placement.write_dataframe_in_process(None)         # no size estimate: Spark writes it
    assert placement.write_dataframe_in_process(None, local=True)
    assert not placement.write_dataframe_in_process(1, local=False)
    monkeypatch.setenv(placement.MAX_DATAFRAME_MB_ENV, "1")
    assert placement.write_dataframe_in_process(2**20) and not placement.write_dataframe_in_process(2**20 + 1)
    monkeypatch.setenv("SPARK_MASTER", "spark://master:7077")
    assert not placement.write_dataframe_in_process(1)


def test_compaction_placement_rule(monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    monkeypatch.delenv(placement.MAX_COMPACTION_MB_ENV, raising=False)
    limit = placement.DEFAULT_MAX_COMPACTION_MB * 2**20
    assert placement.compaction_in_process(limit) and not placement.compaction_in_process(limit + 1)
    # a session already up in this process (a control-plane worker's warm one) is used ...
    assert not placement.compaction_in_process(1, spark_running=True)
    # ... unless the caller says otherwise
    assert placement.compaction_in_process(1, local=True, spark_running=True)
    assert placement.compaction_in_process(limit + 1, local=True)
    assert not placement.compaction_in_process(1, local=False)
    monkeypatch.setenv(placement.MAX_COMPACTION_MB_ENV, "1")
    assert placement.compaction_in_process(2**20) and not placement.compaction_in_process(2**20 + 1)
    monkeypatch.setenv("SPARK_MASTER", "spark://master:7077")
    assert not placement.compaction_in_process(1)
    monkeypatch.setenv(placement.MAX_COMPACTION_MB_ENV, "-3")
    with pytest.raises(ConfigError, match=placement.MAX_COMPACTION_MB_ENV):
        placement.compaction_in_process(1)


def test_spark_running_is_this_process_context(spark, monkeypatch):
    assert placement.spark_running()
    import pyspark

    monkeypatch.setattr(pyspark.SparkContext, "_active_spark_context", None)
    assert not placement.spark_running()
    # pyspark half-imported by another thread, or a Spark Connect client: no SparkContext attribute yet
    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))
    assert not placement.spark_running()
    monkeypatch.delitem(sys.modules, "pyspark")
    assert not placement.spark_running()


def test_spark_slices_match_parallelize(spark):
    for n_items in (1, 3, 7, 8, 10, 33, 2500):
        for n in (1, 2, 3, 4, 8):
            items = list(range(n_items))
            assert in_process.spark_slices(items, n) == spark.sparkContext.parallelize(items, n).glom().collect()


# ------------------------------------------------------------------------------------------ the CLI's choice

def _cli(*argv: str) -> None:
    assert main(list(argv)) == 0


def test_cli_small_work_runs_in_process(tmp_path, spark_calls, monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    path = tmp_path / "t"
    new_table(path)
    pq.write_table(rows(range(500), 1), tmp_path / "in.parquet")
    (tmp_path / "in.csv").write_text("id,region,seq,ts,amount\nk00001,eu,2,2024-01-01T00:00:00Z,1.5\n")
    _cli("write", str(path), "--input", str(tmp_path / "in.parquet"))
    _cli("write", str(path), "--input", str(tmp_path / "in.csv"))
    _cli("read", str(path), "--output", str(tmp_path / "out.parquet"))
    for command in ("show", "metrics", "freshness", "timeline"):
        _cli(command, str(path))
    _cli("compaction", "schedule", str(path), "--strategy", "unbounded")
    monkeypatch.setattr(placement, "spark_running", lambda: False)   # as in a fresh `tidemark` process
    _cli("compaction", "run", str(path))
    assert spark_calls == []
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 500
    assert rows_by_key(hudi_read(path, "read_optimized")) == rows_by_key(hudi_read(path, "snapshot"))


@pytest.mark.parametrize("why", ["rows", "cluster", "flag"])
def test_cli_big_or_cluster_work_runs_on_spark(tmp_path, spark_calls, monkeypatch, why):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    flag: list[str] = []
    if why == "rows":
        monkeypatch.setenv(placement.MAX_ROWS_ENV, "100")
        monkeypatch.setenv(placement.MAX_MB_ENV, "0")
        monkeypatch.setenv(placement.MAX_COMPACTION_MB_ENV, "0")
    elif why == "cluster":
        monkeypatch.setenv("SPARK_MASTER", "spark://cluster.example:7077")   # get_spark is the test's session
    else:
        flag = ["--spark"]
    path = tmp_path / "t"
    new_table(path)
    pq.write_table(rows(range(500), 1), tmp_path / "in.parquet")
    _cli("write", str(path), "--input", str(tmp_path / "in.parquet"), *flag)
    assert len(spark_calls) == 1
    _cli("read", str(path), "--output", str(tmp_path / "out.parquet"), *flag)
    assert len(spark_calls) == 2
    assert rows_by_key(pq.read_table(tmp_path / "out.parquet")) == rows_by_key(hudi_read(path))
    _cli("compaction", "schedule", str(path), "--strategy", "unbounded")
    monkeypatch.setattr(placement, "spark_running", lambda: False)   # the size, cluster or flag decides
    _cli("compaction", "run", str(path), *flag)
    assert len(spark_calls) == 3
    assert rows_by_key(hudi_read(path, "read_optimized")) == rows_by_key(hudi_read(path, "snapshot"))


def test_local_refused_where_only_spark_routes(tmp_path, monkeypatch):
    path = tmp_path / "t"
    Table.create(str(path), name="t", record_keys=["ts"], ordering_field="seq", event_time_field="ts")
    pq.write_table(rows(range(5), 1), tmp_path / "in.parquet")
    assert main(["write", str(path), "--input", str(tmp_path / "in.parquet"), "--local"]) == 1


# ------------------------------------------------------------------------------------------ same files

_TOKEN = re.compile(r"(\.log\.\d+_\d+)-\d+-(\d+)")   # a log name's write token: <task>-<stage>-<attempt>


def _normalised(text: str) -> str:
    """Names with the token's stage id (the one part a Spark session numbers on its own) blanked."""
    return _TOKEN.sub(r"\1-S-\2", text)


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or rel.startswith((".hoodie/.heartbeat", ".hoodie/.temp", ".hoodie/.aux")):
            continue
        data = path.read_bytes()
        if path.name in (".hoodie_partition_metadata", "hoodie.properties"):   # comments: the wall-clock time
            data = b"\n".join(ln for ln in data.split(b"\n") if not ln.startswith(b"#"))
        if rel.startswith(".hoodie/"):
            data = _normalised(data.decode()).encode()
        out[_normalised(rel)] = data
    return out


def _three_writes(path: Path, tmp: Path, local: bool, block_format: str, monkeypatch) -> Table:
    table = new_table(path, block_format)
    instants = iter(INSTANTS)
    monkeypatch.setattr(pipeline, "new_instant_time", lambda after=None: next(instants))
    first = rows(range(3000), 1)
    # An upsert with a key twice in the batch (pre-combined) and updates spread over every file group.
    again = pa.concat_tables([rows(range(0, 3000, 7), 2), rows([14, 21], 3)])
    gone = rows(range(1, 3000, 11), 4).select(["id", "region", "seq", "ts"])
    for i, (batch, op) in enumerate(((first, "upsert"), (again, "upsert"), (gone, "delete"))):
        source = tmp / f"in{i}.parquet"
        pq.write_table(batch, source, row_group_size=1000)
        table.write(str(source), op, local=local)
    return table


@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_in_process_and_spark_write_the_same_files(tmp_path, spark, monkeypatch, block_format):
    monkeypatch.setattr(in_process, "workers", lambda: spark.sparkContext.defaultParallelism)
    here = _three_writes(tmp_path / "here", tmp_path, True, block_format, monkeypatch)
    there = _three_writes(tmp_path / "there", tmp_path, False, block_format, monkeypatch)
    ours, theirs = _files(Path(here.path)), _files(Path(there.path))
    assert sorted(ours) == sorted(theirs)
    assert len([n for n in ours if ".log." in n]) >= 16
    assert [n for n in ours if ours[n] != theirs[n]] == []
    assert rows_by_key(hudi_read(here.path)) == rows_by_key(hudi_read(there.path))


def test_text_input_same_table_either_way(tmp_path, spark, monkeypatch):
    """CSV rows reach the tasks of the DataFrame path through a shuffle (order inside a group is Spark's), so
    here the comparison is the table's schema and its rows as hudi 0.5.0 reads them."""
    csv = tmp_path / "in.csv"
    lines = [f"k{i:04d},{'eu' if i % 3 else 'us'},{i % 5},2024-01-0{1 + i % 9}T00:00:{i % 60:02d}Z,{i * 0.25}"
             for i in range(400)]
    csv.write_text("id,region,seq,ts,amount\n" + "\n".join(lines) + "\n")
    tables = []
    for name, local in (("here", True), ("there", False)):
        table = new_table(tmp_path / name)
        table.write(str(csv), "upsert", local=local)
        tables.append(table)
    here, there = tables
    from engine.timeline.instants import Timeline

    assert Timeline.load(here.path).latest_schema() == Timeline.load(there.path).latest_schema()
    ours, theirs = hudi_read(here.path), hudi_read(there.path)
    assert ours.schema == theirs.schema
    meta = ("_hoodie_record_key", "_hoodie_partition_path")
    assert rows_by_key(ours, with_meta=meta) == rows_by_key(theirs, with_meta=meta) and ours.num_rows == 400
    assert os.listdir(os.path.join(here.path, "region=eu")) and sorted(os.listdir(os.path.join(here.path))) == \
        sorted(os.listdir(os.path.join(there.path)))
