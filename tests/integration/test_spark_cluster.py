"""Tidemark's Spark jobs on a real standalone cluster (1 master + 2 workers from pyspark's own jars).

The executors run a Python that has the runtime dependencies but not Tidemark, so every task imports the
engine from the zip the driver shipped at session start. The driver process (a script that starts with the CLI's `create` and
`write --input day1.parquet`) names
the table and every input by a path *relative* to their working directory, as a user in a shell would:
before paths were resolved at the API boundary, executors looked for `day1.parquet` in their own folders.
Writes in every input format (Parquet on the routing path, CSV, JSON lines, a Parquet delete), an
event-time compaction and Spark reads must agree row for row with the same steps on local Spark, and hudi
0.5.0 must read the cluster's table as Tidemark does.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support import cluster_steps as steps
from tests.support.oracle import hudi_read, rows_by_key
from tests.support.spark_cluster import bare_executor_python, imports_engine, standalone_cluster

KEYS = ("_hoodie_record_key", "_hoodie_partition_path")   # commit times differ between the two runs
STEPS_SCRIPT = Path(steps.__file__)


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory) -> Path:
    return bare_executor_python(tmp_path_factory.mktemp("executor-python"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1) as running:
        yield running


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stderr[-4000:]}"
    return done.stdout


def test_executor_python_has_the_runtime_dependencies_but_not_tidemark(executor_python, tmp_path):
    assert not imports_engine(executor_python, tmp_path)
    deps = subprocess.run([str(executor_python), "-c", "import pyarrow, fastavro, numpy, pandas, pyspark"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert deps.returncode == 0, deps.stderr


def test_cluster_writes_compacts_and_reads_like_local_spark(cluster, executor_python, tmp_path, spark):
    on_cluster = tmp_path / "cluster"
    steps.make_inputs(on_cluster)
    started = time.perf_counter()
    out = _run([sys.executable, str(STEPS_SCRIPT), str(on_cluster)], on_cluster, cluster.env(executor_python))
    summary = json.loads(out.splitlines()[-1])
    print(f"cluster driver {time.perf_counter() - started:.1f} s, steps {summary['seconds']}")

    # Every task ran in the bare interpreter on the shipped zip, never on an installed Tidemark.
    assert summary["executors"], "no executor answered"
    for line in summary["executors"]:
        module, python = line.split(" ")
        assert ".zip/engine/__init__.py" in module and Path(python) == executor_python, line

    local = tmp_path / "local"
    steps.make_inputs(local)
    expected = steps.run_all(str(local))

    assert summary["table"] == str(on_cluster / steps.TABLE)   # the relative name, resolved by the driver
    assert summary["compaction"] == expected["compaction"]
    assert summary["compaction"]["logs_carried_over"] > 0 and summary["compaction"]["base_files"] > 0
    assert summary["reads"] == expected["reads"]
    # a DataFrame written by the cluster's tasks, by its driver in-process, by local Spark's tasks and in-process
    # here: the same log bytes
    for logs in (summary["dataframe_logs"], expected["dataframe_logs"]):
        assert len(logs["tasks"]) == 4 and logs["tasks"] == logs["in_process"]
    assert summary["dataframe_logs"] == expected["dataframe_logs"]
    for query in ("snapshot", "read_optimized"):
        cluster_rows = rows_by_key(pq.read_table(on_cluster / "out" / f"{query}.parquet"), with_meta=KEYS)
        local_rows = rows_by_key(pq.read_table(local / "out" / f"{query}.parquet"), with_meta=KEYS)
        assert cluster_rows == local_rows, query
        assert rows_by_key(hudi_read(on_cluster / steps.TABLE, query), with_meta=KEYS) == cluster_rows, query
