"""Java-written fixture tables (hudi 0.5.0's sdist, tests/support/hudi_sdist.py): find one, unzip one."""
from __future__ import annotations

import shutil
import zipfile
from functools import cache
from pathlib import Path

from tests.support.hudi_sdist import data_dir


@cache
def fixture_zips() -> dict[str, Path]:
    """Every table zip of the sdist under its path without `.zip` (e.g. `sample_table/mor/avro/v9_txns_simple_meta`)."""
    root = data_dir()
    return {str(z.relative_to(root))[:-len(".zip")]: z for z in sorted(root.rglob("*.zip"))}


def mor_fixtures() -> list[str]:
    """The Merge-On-Read tables (47): the ones Tidemark reads, compacts and writes."""
    return [name for name in fixture_zips() if "/mor/" in f"/{name}/"]


def fixture_zip(name: str) -> Path:
    """A table zip by full name, or by its file name alone (`v6_trips_8i1u`); a name that both a Copy-On-Write
    and a Merge-On-Read table carry means the Merge-On-Read one."""
    zips = fixture_zips()
    if name in zips:
        return zips[name]
    matches = [full for full in zips if full.rsplit("/", 1)[-1] == name]
    mor = [full for full in matches if "/mor/" in f"/{full}/"]
    chosen = mor or matches
    if len(chosen) != 1:
        raise KeyError(f"fixture {name!r}: {len(chosen)} tables match ({', '.join(chosen) or 'none'})")
    return zips[chosen[0]]


def unzip_fixture(name: str, dest: Path) -> Path:
    """Unzip a Java-written fixture table into dest and return the table's base path."""
    with zipfile.ZipFile(fixture_zip(name)) as zf:
        zf.extractall(dest)
    shutil.rmtree(dest / "__MACOSX", ignore_errors=True)
    candidates = [p.parent.parent for p in dest.rglob(".hoodie/hoodie.properties")
                  if "metadata" not in p.parts]
    assert candidates, f"fixture {name} has no table"
    return min(candidates, key=lambda p: len(p.parts))
