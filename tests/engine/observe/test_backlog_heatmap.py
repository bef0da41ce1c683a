"""The per-partition backlog (item 11): the engine's tide per partition sums to the table-wide tide, the
sample's heatmap is bounded (rows, columns) and the page's grid lays it out with gaps kept."""
from __future__ import annotations

import datetime as dt
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq

from engine import Table
from engine.config.layout import create_table
from engine.write.pipeline import write_parquet
from tests.support.inline_spark import InlineSpark

DAY = 86_400_000
E = 1_700_000_000_000 // DAY * DAY


def write(path: str, rows: list[tuple[str, str, int]]) -> None:
    data = pa.table({"id": [r[0] for r in rows], "p": [r[1] for r in rows], "ts": pa.array([r[2] for r in rows], pa.int64())})
    source = os.path.join(os.path.dirname(path), f"in-{time.monotonic_ns()}.parquet")
    pq.write_table(data, source)
    write_parquet(path, [source], "upsert", spark=InlineSpark())


def partitioned(path: str) -> Table:
    create_table(path, name="h", record_keys=["id"], partition_fields=["p"], ordering_field="ts", event_time_field="ts",
                 settings={"hoodie.bucket.index.num.buckets": "1"})
    write(path, [("a1", "a", E + 1000), ("b1", "b", E + 2 * DAY + 5)])
    write(path, [("a2", "a", E + 3 * DAY), ("c1", "c", E + 1000)])
    return Table.open(path)


def test_tide_per_partition_sums_to_the_table_tide(tmp_path):
    table = partitioned(str(tmp_path / "t"))
    whole = {(b.start, b.end): b for b in table.tide("1d")}
    cells = table.tide("1d", by_partition=True)
    assert {c.partition for c in cells} == {"a", "b", "c"}
    for key, bucket in whole.items():
        mine = [c for c in cells if (c.start, c.end) == key]
        assert sum(c.log_files for c in mine) == bucket.log_files
        assert sum(c.log_bytes for c in mine) == bucket.log_bytes
    assert "partition" in cells[0].to_dict() and "partition" not in table.tide("1d")[0].to_dict()


def test_the_sample_heatmap_and_the_page_grid(tmp_path, monkeypatch):
    from tasks import heatmap as sample_heatmap
    from webapp.tables import heatmap as page_heatmap

    table = partitioned(str(tmp_path / "t"))
    tide = [b.to_dict() for b in table.tide("1h")]
    assert sample_heatmap.bucket_seconds(tide) == 6 * 3600            # 3 days of event time: 6h columns
    stored = sample_heatmap.read(table, tide)
    assert stored["bucket_ms"] == 6 * 3600 * 1000 and len(stored["rows"]) == 3
    assert sum(c[3] for c in stored["cells"]) == sum(b["log_bytes"] for b in tide)

    grid = page_heatmap.layout(stored)
    assert grid is not None and grid.bucket == "6 h"
    assert len(grid.columns) == 13                                     # E .. E+3d in 6h steps, gaps kept
    assert all(len(r.cells) == 13 for r in grid.rows)
    top = grid.rows[0]
    assert top.name.endswith("a") and max(c.level for c in top.cells) == 5   # most backlog first, darkest
    assert sum(1 for r in grid.rows for c in r.cells if c.level) == 4
    assert "1 log file" in next(c.title for c in top.cells if c.level) and "UTC" in top.cells[0].title
    assert page_heatmap.layout({}) is None

    # Many partitions: the ROWS largest get a row, the rest share one.
    monkeypatch.setattr(sample_heatmap, "ROWS", 2)
    folded = sample_heatmap.read(table, tide)
    assert folded["rows"][-1] == sample_heatmap.OTHERS and len(folded["rows"]) == 3
    assert sum(c[3] for c in folded["cells"]) == sum(b["log_bytes"] for b in tide)


def test_bucket_widens_with_the_span():
    from tasks.heatmap import bucket_seconds

    def span(days: float) -> list[dict]:
        start = dt.datetime(2013, 1, 1, tzinfo=dt.UTC)
        return [{"start": start.isoformat(), "end": (start + dt.timedelta(days=days)).isoformat()}]

    assert bucket_seconds(span(1)) == 3600 and bucket_seconds(span(10)) == 6 * 3600
    assert bucket_seconds(span(40)) == 86400 and bucket_seconds(span(300)) == 7 * 86400
    assert bucket_seconds([]) == 3600


def test_backlog_age_is_the_oldest_write_still_in_a_log(tmp_path):
    from engine.compaction import run_compaction
    from engine.timeline.instants import Timeline
    from tests.support.inline_spark import InlineSpark as Inline

    path = str(tmp_path / "t")
    table = partitioned(path)
    writes = [i.timestamp for i in Timeline.load(path).completed()]
    assert table.metrics().oldest_log_instant == writes[0]
    table.schedule_compaction(strategy="unbounded")
    run_compaction(path, spark=Inline())
    assert table.metrics().oldest_log_instant is None                 # nothing waits in a log any more
    write(path, [("a3", "a", E + 4 * DAY)])
    assert table.metrics().oldest_log_instant == Timeline.load(path).completed()[-1].timestamp
