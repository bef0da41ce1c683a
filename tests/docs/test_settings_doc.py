"""docs/SETTINGS.md names every environment variable the code reads, each in exactly one row, and nothing the
code does not read: a setting added without its documentation (or documented twice, or left behind after
the code stopped reading it) fails here."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "docs" / "SETTINGS.md"
CODE = ("engine", "webapp", "tasks")
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")
# Functions that read one variable by name: os.environ.get / getenv / setdefault and Tidemark's helpers.
READERS = re.compile(r"environ|getenv|^env\.(text|flag|number|whole)$|(^|\.)_?[a-z_]*env[a-z_]*$|^_flag$|^_seconds$")
# Variables the code reads only in a list it hands on (the AWS chain, shipped to Spark's Python workers) or
# builds from parts (retention's f-string): named here so the test knows they are read.
INDIRECT = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE", "AWS_S3_DISABLE_EXPRESS_SESSION_AUTH", "TIDEMARK_SAMPLES_RAW_DAYS",
            "TIDEMARK_SAMPLES_HOURLY_DAYS", "TIDEMARK_SAMPLES_KEEP_DAYS", "DEMO_BATCHES"}


def _read_by_code() -> set[str]:
    names: set[str] = set()
    files = [p for root in CODE for p in (ROOT / root).rglob("*.py")] + [ROOT / "manage.py"]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names |= _names_read(node)
    return names


def _names_read(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Call) and node.args and READERS.search(ast.unparse(node.func)):
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and ENV_NAME.match(first.value):
            return {first.value}
    if isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value) \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return {node.slice.value}
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) \
            and any(isinstance(t, ast.Name) and t.id.endswith("ENV") for t in node.targets) \
            and ENV_NAME.match(node.value.value):
        return {node.value.value}   # MAX_ROWS_ENV = "TIDEMARK_LOCAL_MAX_ROWS", read through the constant
    return set()


def _documented() -> list[str]:
    """Every variable named in the first column of a table row of docs/SETTINGS.md, as often as it is named."""
    rows = [line for line in SETTINGS.read_text().splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])]


def test_every_variable_the_code_reads_is_documented_once():
    documented = _documented()
    twice = sorted({n for n in documented if documented.count(n) > 1})
    assert not twice, f"documented more than once in docs/SETTINGS.md: {twice}"
    missing = sorted((_read_by_code() | INDIRECT) - set(documented))
    assert not missing, f"read by the code, not in docs/SETTINGS.md: {missing}"


def test_nothing_is_documented_that_the_code_does_not_read():
    stale = sorted(set(_documented()) - _read_by_code() - INDIRECT - {"AWS_REGION", "AWS_ENDPOINT_URL"})
    assert not stale, f"in docs/SETTINGS.md, read by no code: {stale}"
