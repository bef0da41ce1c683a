"""docs/ARCHITECTURE.md's promise about the engine's doors: the workers (`tasks/`) and the dashboard (`webapp/`)
import from the engine only its public package (`engine`: `Table` and the names `engine/__init__.py` exports),
`engine.spark` (a worker's warm session), `engine.env` (reading the environment) and `engine.demo`; and the
engine imports no Django, Celery, webapp or tasks."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOORS = {"engine", "engine.spark", "engine.env", "engine.demo"}


def _imports(folder: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / folder).rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def test_the_control_plane_uses_only_the_engines_doors():
    through_walls = {path: sorted(m for m in names if m.split(".")[0] == "engine" and m not in DOORS)
                     for folder in ("webapp", "tasks") for path, names in _imports(folder).items()}
    assert not {path: mods for path, mods in through_walls.items() if mods}


def test_the_engine_imports_no_control_plane():
    outside = {path: sorted(m for m in names if m.split(".")[0] in ("django", "celery", "webapp", "tasks"))
               for path, names in _imports("engine").items()}
    assert not {path: mods for path, mods in outside.items() if mods}
