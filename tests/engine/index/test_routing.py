"""engine.index.routing: partition paths built once per distinct value, equal to the row-by-row strings."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.index import routing
from engine.index.keys import DEFAULT_PARTITION
from engine.index.routing import KEY_COL, PART_COL
from engine.write import log_writer


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(3)
    return pa.table({
        "k": pa.array([f"k{i}" for i in range(n)]),
        "a": pa.array(rng.choice(["x", "", None, "y"], n), pa.string()),    # "" and null: one path
        "c": pa.array(rng.choice(["x", "y", None], n), pa.string()),
        "b": pa.array(rng.integers(0, 5, n)),
    })


def test_partition_paths_equal_the_strings_row_by_row():
    table = _table(3_000)
    for fields in ((), ("a",), ("c",), ("b",), ("a", "b"), ("b", "a", "c")):
        for hive in (True, False):
            rt = routing.Routing(("k",), fields, hive, 4)
            paths = routing.partition_paths(rt, table)
            assert paths.to_pylist() == routing.partition_path_strings(rt, table).to_pylist(), (fields, hive)
            if fields:
                assert pa.types.is_dictionary(paths.type)
                assert len(set(paths.dictionary.to_pylist())) == len(paths.dictionary)   # one entry per path
    rt = routing.Routing(("k",), ("a",), True, 4)
    assert set(routing.partition_paths(rt, table).to_pylist()) == {"a=x", "a=y", f"a={DEFAULT_PARTITION}"}
    assert routing.partition_paths(rt, table.slice(0, 0)).to_pylist() == []


def test_routed_batches_group_across_their_own_dictionaries():
    """Each routed batch has a dictionary of its own: grouping their concatenation unifies them."""
    rt = routing.Routing(("k",), ("a",), True, 2)
    table = _table(2_000)
    routed = pa.concat_tables([routing.route(rt, table.slice(s, 250)) for s in range(0, 2_000, 250)])
    assert pa.types.is_dictionary(routed.schema.field(PART_COL).type)
    as_strings = routed.set_column(routed.schema.get_field_index(PART_COL), PART_COL,
                                   routed.column(PART_COL).cast(pa.string()))
    got = {key: rows.column(KEY_COL).to_pylist() for key, rows in log_writer.groups(routed)}
    assert got == {key: rows.column(KEY_COL).to_pylist() for key, rows in log_writer.groups(as_strings)}
    assert sum(len(v) for v in got.values()) == 2_000 and len({p for p, _ in got}) == 3
