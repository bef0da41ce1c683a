"""Java-written fixture tables: where they are and how to unpack one."""
from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

# The fixtures live beside the repository (<repo>/../shared/fixtures/hudi); env TIDEMARK_FIXTURES points
# elsewhere when a checkout is laid out differently.
FIXTURES = Path(os.environ.get("TIDEMARK_FIXTURES")
                or Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "hudi")


def unzip_fixture(name: str, dest: Path) -> Path:
    """Unzip a Java-written fixture table into dest and return the table's base path."""
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as zf:
        zf.extractall(dest)
    shutil.rmtree(dest / "__MACOSX", ignore_errors=True)
    candidates = [p.parent.parent for p in dest.rglob(".hoodie/hoodie.properties")
                  if "metadata" not in p.parts]
    assert candidates, f"fixture {name} has no table"
    return min(candidates, key=lambda p: len(p.parts))
