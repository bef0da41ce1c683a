"""tests/README.md's rules, held against the tree: no test module imports another (shared helpers live in
tests/support/), every test folder is a package, and tests/webapp/<app>/ mirrors an app of webapp/."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "support" not in p.relative_to(TESTS).parts)


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_test_module_imports_another():
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in _imported(p) if m.rpartition(".")[2].startswith("test_")
                                                  or ".test_" in m)
                 for p in _test_modules()}
    assert not {k: v for k, v in offenders.items() if v}


def test_every_test_folder_is_a_package():
    folders = {p.parent for p in _test_modules()}
    assert not [str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()]


def test_webapp_test_folders_mirror_the_apps():
    apps = {p.parent.name for p in (ROOT / "webapp").glob("*/apps.py")}
    folders = {p.name for p in (TESTS / "webapp").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - {"browser"} == apps
