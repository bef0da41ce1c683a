"""Partial-update log blocks (Hudi 1.x IS_PARTIAL: records holding only the columns a write changed), read as
hudi 0.5.0 reads them: the sdist's two Java tables in every query, and random log histories against hudi 0.5.0."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config.properties import COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING
from engine.read.query import QuerySpec, read_arrow
from tests.support.fixtures import unzip_fixture
from tests.support.java_queries import assert_every_query_like_hudi, assert_same
from tests.support.oracle import hudi_read
from tests.support.partial_tables import DATA_COLUMNS, Delete, Put, Step, build


@pytest.mark.parametrize("name", ["table_partial_update", "table_partial_update_event_time"])
def test_java_table_reads_like_hudi_in_every_query(tmp_path, name):
    assert_every_query_like_hudi(str(unzip_fixture(name, tmp_path / "t")))


def _by_key(table: pa.Table, *columns: str) -> dict[str, tuple]:
    return {r["_hoodie_record_key"]: tuple(r[c] for c in columns) for r in table.to_pylist()}


def test_partial_update_keeps_the_columns_it_does_not_carry(tmp_path):
    """Commit time: the partial block carries `value` alone; ts and num stay the base row's."""
    path = str(unzip_fixture("table_partial_update", tmp_path / "t"))
    got = _by_key(read_arrow(path), "key", "ts", "value", "num")
    assert got["k1"] == ("k1", 100, "v1_partial", 1) and got["k3"] == ("k3", 100, "v3", 3)


def test_the_losing_partial_record_still_fills_what_the_winner_lacks(tmp_path):
    """Event time (the fixture's .sql): k1's second update loses on ts yet its b survives; k2's wins and its
    first update's a survives; neither reads b-init / a-init from the base."""
    path = str(unzip_fixture("table_partial_update_event_time", tmp_path / "t"))
    got = _by_key(read_arrow(path), "id", "ts", "a", "b")
    assert got == {"k1": ("k1", 300, "a-high", "b-low"), "k2": ("k2", 300, "a-low", "b-high")}


# ------------------------------------------------------------------------------ random histories, hudi as oracle

KEYS = ["k0", "k1", "k2"]   # k2 is never in the base: a partial record may be all there is of it


@st.composite
def steps(draw: st.DrawFn) -> list[Step]:
    out: list[Step] = []
    for i in range(draw(st.integers(1, 6))):
        keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
        kind = draw(st.sampled_from(["partial", "partial", "full", "delete", "hard delete"]))
        if kind.endswith("delete"):
            out.append(Delete(tuple(keys), None if kind == "hard delete" else draw(st.integers(1, 4))))
            continue
        columns = None if kind == "full" else tuple(draw(st.lists(st.sampled_from(DATA_COLUMNS), min_size=1,
                                                                  max_size=2, unique=True)))
        records = {}
        for key in keys:
            values = {"ts": draw(st.integers(0, 4)), "a": draw(st.sampled_from([f"a{i}", None])), "b": f"b{i}"}
            records[key] = values if columns is None else {c: values[c] for c in columns}
        out.append(Put(records, columns))
    return out


BASE = st.lists(st.tuples(st.sampled_from(KEYS[:2]), st.integers(0, 4)), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=BASE, history=steps(), mode=st.sampled_from([EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING]))
def test_random_partial_histories_read_like_hudi(tmp_path_factory, base, history, mode):
    """Partial, full and delete blocks in any order over a base that may hold a key twice: snapshot and time
    travel at every step equal hudi 0.5.0's, meta columns included (its file names aside)."""
    rows_ = [(key, {"ts": ts, "a": f"a-{i}", "b": f"b-{i}"}) for i, (key, ts) in enumerate(base)]
    path, instants = build(tmp_path_factory.mktemp("t"), mode, rows_, history)
    assert_same(read_arrow(path), hudi_read(path), "snapshot")
    for ts in instants:
        assert_same(read_arrow(path, QuerySpec("time_travel", as_of=ts)), hudi_read(path, "time_travel", as_of=ts),
                    f"as of {ts}")
