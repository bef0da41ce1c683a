"""engine.spark on cluster masters: the engine zip the driver ships to executors, and paths for Spark's own
(JVM) readers. The cluster itself is exercised in tests/integration/test_spark_cluster.py."""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

import engine
from engine import spark as factory


@pytest.fixture
def package_copy(tmp_path, monkeypatch) -> Path:
    """A copy of the engine package posing as the imported one, so a test may edit its sources."""
    copy = tmp_path / "src" / "engine"
    shutil.copytree(Path(engine.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "table.cpython-311.pyc").write_bytes(b"stale bytecode")
    monkeypatch.setattr(factory, "__file__", str(copy / "spark.py"))   # the package engine.spark belongs to
    monkeypatch.setenv("TIDEMARK_CACHE", str(tmp_path / "cache"))
    return copy


def test_the_zip_holds_the_package_sources_and_data_without_bytecode(package_copy):
    archive = factory.engine_archive()
    names = zipfile.ZipFile(archive).namelist()
    assert "engine/__init__.py" in names and "engine/compaction/execute.py" in names
    assert "engine/log4j2.properties" in names
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]
    assert not [n for n in names if not n.startswith("engine/")]
    assert not list(archive.parent.glob("*.tmp")), "the zip is built under a private name and renamed"


def test_the_zip_is_reused_until_a_source_changes(package_copy):
    first = factory.engine_archive()
    mtime = first.stat().st_mtime_ns
    assert factory.engine_archive() == first and first.stat().st_mtime_ns == mtime
    (package_copy / "table.py").write_text((package_copy / "table.py").read_text() + "\n# edited\n")
    second = factory.engine_archive()
    assert second != first
    assert "# edited" in zipfile.ZipFile(second).read("engine/table.py").decode()


def test_an_engine_imported_from_a_zip_ships_that_zip(package_copy, tmp_path, monkeypatch):
    built = factory.engine_archive()
    monkeypatch.setattr(factory, "__file__", f"{built}/engine/spark.py")
    assert factory.engine_archive() == built
    monkeypatch.setattr(factory, "__file__", str(tmp_path / "nowhere" / "engine" / "spark.py"))
    with pytest.raises(RuntimeError, match="cannot ship the engine package"):
        factory.engine_archive()


def test_spark_paths_name_the_local_filesystem_explicitly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # On YARN a scheme-less path would mean HDFS; local files are named file:// for Spark's JVM readers.
    assert factory.spark_path("/data/t/a.parquet") == "file:///data/t/a.parquet"
    assert factory.spark_path("in.parquet") == f"file://{tmp_path}/in.parquet"
    assert factory.spark_path("s3://lake/t/a.parquet") == "s3://lake/t/a.parquet"


def test_only_cluster_masters_get_the_zip(monkeypatch):
    assert factory.is_local("local[*]") and factory.is_local("local[2]")
    assert not factory.is_local("spark://127.0.0.1:7077") and not factory.is_local("yarn")


def test_warming_starts_every_python_worker_with_the_engine_imported(spark):
    from engine.spark import warm_python_workers

    # one task per core, each importing the compaction task's modules (an import error would fail the job)
    assert warm_python_workers(spark) == spark.sparkContext.defaultParallelism
