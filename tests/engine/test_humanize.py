"""engine.humanize: values in words for the CLI and the pages — never a Python repr."""
from __future__ import annotations

import datetime as dt

import pytest

from engine.humanize import human, label


@pytest.mark.parametrize(("value", "text"), [
    (None, "—"), ("", "—"), ({}, "—"), ([], "—"),
    (True, "yes"), (False, "no"), (152, "152"), (1234567, "1,234,567"), (2.5, "2.5"), (3.0, "3"),
    (dt.datetime(2013, 1, 20, tzinfo=dt.UTC), "2013-01-20T00:00:00Z"),
    ({"log_files_compacted": 152, "records_updated": 12000}, "log files compacted 152 · records updated 12,000"),
    ({"restored_ro": {}}, "restored ro —"), (["a.parquet", "b.parquet"], "a.parquet, b.parquet"),
    ("symlink", "symlink"),
])
def test_values_read_as_words(value, text):
    assert human(value) == text


def test_labels():
    assert label("log_files_compacted") == "log files compacted"


def test_no_python_repr_survives_nesting():
    text = human({"compaction_stats": {"ok": False, "missing": None, "files": [1, 2]}})
    assert "False" not in text and "None" not in text and "{" not in text and "[" not in text
