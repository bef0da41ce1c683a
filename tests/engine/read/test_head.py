"""`head_arrow`: a look at a query's first rows reads only the file slices they need."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Table
from engine.errors import ConfigError
from engine.read import query
from engine.read.query import head_arrow, read_arrow
from tests.support.oracle import rows_by_key


@pytest.fixture
def table(tmp_path):
    t = Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], partition_fields=["region"],
                     ordering_field="seq", event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "4"})
    n = 400
    rows = pa.table({"id": [f"k{i:03d}" for i in range(n)], "region": [f"r{i % 3}" for i in range(n)],
                     "seq": pa.array([1] * n, pa.int64()),
                     "ts": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()).cast(pa.timestamp("ms", "UTC"))})
    path = tmp_path / "in.parquet"
    import pyarrow.parquet as pq
    pq.write_table(rows, path)
    t.write(str(path), local=True)
    return t


def test_head_reads_only_the_slices_its_rows_need(table, monkeypatch):
    read: list[str] = []
    real = query.read_slice

    def spy(ref, *args, **kwargs):
        read.append(ref.file_id)
        return real(ref, *args, **kwargs)

    monkeypatch.setattr(query, "read_slice", spy)
    monkeypatch.setattr(query.os, "cpu_count", lambda: 1)   # slice by slice, no read-ahead
    rows, more = head_arrow(table.path, "snapshot", 5)
    everything = read_arrow(table.path)
    slices = len(read) - len({*read})   # read_arrow read every slice once more
    assert rows.num_rows == 5 and more
    assert slices == 1, read   # the first slice holds more than 5 rows: no other was read
    assert set(rows.column("id").to_pylist()) <= set(everything.column("id").to_pylist())


def test_head_of_everything_says_nothing_more_follows(table):
    rows, more = head_arrow(table.path, "snapshot", 1000)
    assert not more and rows_by_key(rows) == rows_by_key(read_arrow(table.path))
    result = table.head(limit=0)
    assert result.rows == 0 and result.more and result.table is not None and result.table.num_rows == 0
    with pytest.raises(ConfigError, match="negative"):
        head_arrow(table.path, "snapshot", -1)


def test_a_corrupt_block_fails_a_look_as_it_fails_an_export(table):
    from engine.errors import CorruptLogBlockError
    from engine.logformat.integrity import CorruptLogBlockWarning
    from engine.slices.fsview import FileSystemView

    log = FileSystemView(table.path).latest_slices()[0].log_files[0].path
    with open(log, "r+b") as fh:   # the last block's trailing length no longer matches
        fh.seek(-3, 2)
        byte = fh.read(1)
        fh.seek(-3, 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptLogBlockError):
        table.head(limit=1000)
    with pytest.warns(CorruptLogBlockWarning):
        shown = table.head(limit=1000, skip_corrupt=True)
    assert 0 < shown.rows < 400


def test_lock_files_do_not_change_a_tables_mark(table):
    from engine.lock import FileLock, holding

    before = Table.mark(table.path)
    with holding(FileLock(table.path, ".tidemark.sync.lock"), "sync the table to its catalog"):
        pass
    assert Table.mark(table.path) == before
