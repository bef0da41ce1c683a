"""engine.io.parquet_encoding: dictionaries only for the columns that repeat."""
from __future__ import annotations

import pyarrow as pa

from engine.io.parquet_encoding import DICTIONARY_SAMPLE, dictionary_columns


def test_only_repeating_columns_get_a_dictionary() -> None:
    n = 10_000
    table = pa.table({"unique": pa.array([f"k{i}" for i in range(n)]), "constant": pa.array(["c"] * n),
                      "few": pa.array([i % 7 for i in range(n)])})
    assert dictionary_columns(table) == ["constant", "few"]


def test_the_sample_is_spread_over_the_rows() -> None:
    """A column constant in its first rows but unique after them is judged by rows from the whole table."""
    n = 20 * DICTIONARY_SAMPLE
    head = ["same"] * (n // 10)
    table = pa.table({"late": pa.array(head + [f"v{i}" for i in range(n - len(head))])})
    assert dictionary_columns(table) == []


def test_nested_columns_and_null_columns_keep_the_default() -> None:
    assert dictionary_columns(pa.table({"s": pa.array([{"a": 1}] * 3)})) is True
    assert dictionary_columns(pa.table({"n": pa.nulls(5)})) == ["n"]
    assert dictionary_columns(pa.table({"x": pa.array([], pa.string())})) == ["x"]
