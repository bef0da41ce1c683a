"""Our readers return what hudi 0.5.0 returns on each Java-written fixture table."""
from __future__ import annotations

import pytest

from engine.errors import UnsupportedTableError
from engine.read.query import read_arrow
from tests.oracle import hudi_read, rows_by_key

V6 = ["v6_trips_8i1u", "v6_nonpartitioned", "v6_complexkeygen_hivestyle", "v6_simplekeygen_nonhivestyle"]


@pytest.mark.parametrize("name", V6)
@pytest.mark.parametrize("query", ["snapshot", "read_optimized"])
def test_fixture_reads_like_hudi(fixture_table, name, query):
    path = fixture_table(name)
    ours = read_arrow(str(path), query)
    theirs = hudi_read(path, query)
    assert ours.num_rows == theirs.num_rows > 0
    assert rows_by_key(ours) == rows_by_key(theirs, columns=None)


def test_trips_update_is_visible_in_snapshot_only(fixture_table):
    path = str(fixture_table("v6_trips_8i1u"))
    snap = {r["rider"]: r["fare"] for r in read_arrow(path).to_pylist()}
    ro = {r["rider"]: r["fare"] for r in read_arrow(path, "read_optimized").to_pylist()}
    assert snap["rider-D"] == 25.0 and ro["rider-D"] == 33.9


def test_empty_fixture_reads_nothing(fixture_table):
    path = fixture_table("v6_empty")
    ours = read_arrow(str(path))
    assert ours.num_rows == 0 and "id" in ours.column_names  # schema from hoodie.table.create.schema
    assert hudi_read(path).num_rows == 0


def test_v8_is_reported_unsupported(fixture_table):
    path = str(fixture_table("v8_trips_8i3u1d"))
    with pytest.raises(UnsupportedTableError, match="hoodie.table.version=8 is not supported"):
        read_arrow(path)
