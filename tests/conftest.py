"""Shared fixtures: one SparkSession per test process, Java fixture unzipping, the hudi 0.5.0 oracle."""
from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hudi"
if not FIXTURES.is_dir():  # CI clones the repo with shared/ beside it; a local checkout may differ
    FIXTURES = Path(os.environ.get("TIDEMARK_FIXTURES", "/work/shared/fixtures/hudi"))


@pytest.fixture(scope="session")
def spark():
    from engine.spark import get_spark

    session = get_spark(cores=2)
    yield session


def unzip_fixture(name: str, dest: Path) -> Path:
    """Unzip a Java-written fixture table into dest and return the table's base path."""
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as zf:
        zf.extractall(dest)
    shutil.rmtree(dest / "__MACOSX", ignore_errors=True)
    candidates = [p.parent.parent for p in dest.rglob(".hoodie/hoodie.properties")
                  if "metadata" not in p.parts]
    assert candidates, f"fixture {name} has no table"
    return min(candidates, key=lambda p: len(p.parts))


@pytest.fixture
def fixture_table(tmp_path):
    return lambda name: unzip_fixture(name, tmp_path / name)
