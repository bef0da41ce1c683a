"""The cheap change check (engine.observe.changes via `Table.mark`): every kind of timeline change moves the
mark — a deltacommit, a compaction plan and its commit, a clean, a rollback, a changed hoodie.properties —
while an untouched table keeps it, and sub-folders of `.hoodie/` (metadata table, heartbeats) do not count."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table, TableNotFoundError
from engine.io.listing import Entry
from engine.observe.changes import mark_of

E = 1_700_000_000_000   # event times (epoch ms)


def _write(table: Table, tmp_path, n: int, rows: list[tuple[str, int]]) -> str:
    src = tmp_path / f"batch-{n}.parquet"
    pq.write_table(pa.table({"id": [k for k, _ in rows], "region": ["eu" if i % 2 else "us" for i in range(len(rows))],
                             "ts": pa.array([t for _, t in rows], pa.int64())}), src)
    return table.write(str(src)).instant


@pytest.fixture
def table(spark, tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="ts", event_time_field="ts",
                     partition_fields=["region"])
    _write(t, tmp_path, 1, [(f"k{i}", E + i * 1000) for i in range(6)])
    _write(t, tmp_path, 2, [(f"k{i}", E + 10_000 + i) for i in range(3)])
    return t


def test_every_timeline_change_moves_the_mark_and_nothing_else_does(table, tmp_path):
    seen = [Table.mark(table.path)]

    def moved(suffix: str) -> None:
        mark = Table.mark(table.path)
        assert mark.digest not in {m.digest for m in seen}, f"{suffix} was not noticed"
        assert mark.newest_instant and mark.newest_instant.endswith(suffix), mark.newest_instant
        seen.append(mark)

    assert Table.mark(table.path) == seen[0]                        # unchanged: the same mark again
    _write(table, tmp_path, 3, [("k9", E + 20_000)])
    moved(".deltacommit")
    plan = table.schedule_compaction(threshold=E + 15_000)
    assert plan.instant
    moved(".compaction.requested")
    table.run_compaction(plan.instant)
    moved(".commit")
    _write(table, tmp_path, 4, [("k1", E + 30_000)])
    moved(".deltacommit")
    cleaned = table.clean(retain_commits=1)
    assert cleaned.instant, cleaned.message                          # the compaction left old slices to clean
    moved(".clean")
    doomed = _write(table, tmp_path, 5, [("k2", E + 40_000)])
    seen.append(Table.mark(table.path))
    table.rollback(doomed)
    moved(".rollback")
    assert Table.mark(table.path) == seen[-1]


def test_subfolders_of_hoodie_do_not_count_but_properties_do(tmp_path):
    hoodie = str(tmp_path / "t" / ".hoodie")   # the listing is all the check reads: a skeleton table will do
    os.makedirs(hoodie)
    open(os.path.join(hoodie, "hoodie.properties"), "w").write("hoodie.table.name=t\n")
    open(os.path.join(hoodie, "20260101000000000.deltacommit"), "w").write("{}")
    before = Table.mark(str(tmp_path / "t"))
    os.makedirs(os.path.join(hoodie, "metadata", ".hoodie"), exist_ok=True)
    open(os.path.join(hoodie, "metadata", ".hoodie", "hoodie.properties"), "w").write("hoodie.table.name=t_meta\n")
    os.makedirs(os.path.join(hoodie, ".heartbeat"), exist_ok=True)
    open(os.path.join(hoodie, ".heartbeat", "20990101000000000"), "w").write("1")
    assert Table.mark(str(tmp_path / "t")) == before
    with open(os.path.join(hoodie, "hoodie.properties"), "a") as f:
        f.write("# edited\n")
    assert Table.mark(str(tmp_path / "t")).digest != before.digest


def test_mark_depends_on_names_sizes_and_times_not_listing_order():
    a, b = Entry("20260101000000000.deltacommit", 10, 1), Entry("hoodie.properties", 5, 2)
    assert mark_of([a, b]) == mark_of([b, a])
    assert mark_of([a, b]).newest_instant == a.name and mark_of([a, b]).files == 2
    assert mark_of([a, Entry(b.name, 6, 2)]).digest != mark_of([a, b]).digest


def test_a_folder_without_a_table_is_named_in_the_error(tmp_path):
    with pytest.raises(TableNotFoundError, match="does not exist"):
        Table.mark(str(tmp_path / "nothing"))
    (tmp_path / "half" / ".hoodie").mkdir(parents=True)
    with pytest.raises(TableNotFoundError, match="hoodie.properties is missing"):
        Table.mark(str(tmp_path / "half"))
