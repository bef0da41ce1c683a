"""Only the event-time strategy publishes an RO guarantee; malformed scheduling arguments are refused."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.compaction import run_compaction, schedule_compaction
from engine.compaction.carry_forward import SplitSpec, split_slice
from engine.config.layout import create_table
from engine.config.properties import EVENT_TIME_ORDERING
from engine.errors import ConfigError
from engine.logformat import DeleteBlock, read_log_file
from engine.observe.freshness import freshness_report
from engine.read.merge import DataItem, DeleteItem
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.write.pipeline import write_dataframe, write_file
from tests.support.inline_spark import InlineSpark
from tests.support.oracle import hudi_read

TS = pa.timestamp("ms", tz="UTC")


def ms(day: int) -> int:
    return int(dt.datetime(2024, 1, day, tzinfo=dt.UTC).timestamp() * 1000)


def test_size_strategy_with_a_threshold_promises_nothing(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["p"], ordering_field="seq",
                 event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})
    big = pa.table({"id": [f"e{i}" for i in range(200)], "p": ["eu"] * 200, "seq": [1] * 200,
                    "ts": pa.array([dt.datetime(2024, 1, 1)] * 200, TS)})
    small = pa.table({"id": ["u0"], "p": ["us"], "seq": [1], "ts": pa.array([dt.datetime(2024, 1, 1)], TS)})
    write_dataframe(path, spark.createDataFrame(big))
    write_dataframe(path, spark.createDataFrame(small))
    plan = schedule_compaction(path, strategy="size", threshold_ms=ms(3),
                               settings={"hoodie.compaction.logfile.size.threshold": "2000"})
    assert [op["partitionPath"] for op in plan.operations] == ["eu"]
    run_compaction(path, spark=spark)
    report = freshness_report(path)
    # The us log (event time Jan 1, ≤ T) is still only in a log: no "holds" claim may be made.
    assert report.guarantee == "none"


def test_malformed_scheduling_arguments(tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts")
    with pytest.raises(ConfigError, match="threshold_ms must be an integer"):
        schedule_compaction(path, threshold_ms="abc")
    with pytest.raises(ConfigError, match="data_latency_ms must be an integer"):
        schedule_compaction(path, data_latency_ms="1h")


# ------------------------------------------------------------------ exact mode and deletes (issue 12: 3, 4)

def hour(h: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1, h, tzinfo=dt.UTC)


def exact_table(tmp_path) -> Table:
    """Ordering `seq`, event time `ts`: a delete's ordering value says nothing about when it happened."""
    return Table.create(str(tmp_path / "t"), name="t", record_keys=["id"], ordering_field="seq",
                        event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})


def put(table: Table, tmp_path, operation: str, rows: list[tuple], ordered: bool = True) -> str:
    """rows: (id, seq, hour); `ordered` False leaves the seq column out (a delete without ordering value)."""
    cols: dict[str, pa.Array | list] = {"id": [r[0] for r in rows]}
    if ordered:
        cols["seq"] = pa.array([r[1] for r in rows], pa.int64())
    cols["ts"] = pa.array([hour(r[2]) for r in rows], TS)
    src = tmp_path / f"in-{len(list(tmp_path.iterdir()))}.parquet"
    pq.write_table(pa.table(cols), src)
    return write_file(table.path, str(src), operation, spark=InlineSpark()).instant


def keys(table: Table, query: str = "snapshot") -> set[str]:
    ours = set(read_arrow(table.path, query).column("id").to_pylist())
    assert set(hudi_read(table.path, query).column("id").to_pylist()) == ours, query
    return ours


def exact_compaction(table: Table, h: int) -> None:
    plan = table.schedule_compaction(strategy="event_time", threshold=hour(h), exact=True)
    assert plan.instant is not None
    run_compaction(table.path, plan.instant, spark=InlineSpark())


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_exact_mode_never_applies_a_delete_after_t(tmp_path, ordered):
    """Case 3: one delete write straddling T (k at 05:00, j at 02:00), exact at T = 03:00: the RO view holds k
    (deleted after T) and not j (deleted before T); the snapshot is unchanged; hudi 0.5.0 agrees."""
    table = exact_table(tmp_path)
    put(table, tmp_path, "upsert", [("k", 1, 1), ("j", 1, 1), ("m", 1, 1)])
    put(table, tmp_path, "delete", [("k", 5, 5), ("j", 5, 2)], ordered=ordered)
    assert keys(table) == {"m"}
    exact_compaction(table, 3)
    assert keys(table, "read_optimized") == {"k", "m"}
    assert keys(table) == {"m"}
    exact_compaction(table, 6)              # the delete after T reaches the RO view with the next cut
    assert keys(table, "read_optimized") == {"m"} == keys(table)


def test_exact_mode_never_resurrects_a_deleted_key(tmp_path):
    """Case 4: k deleted without ordering value after T, then an ordered delete of k (lower ordering, after T)
    and of m (before T) in one write, then a late put: before and after an exact compaction at 03:00 the
    snapshot is {j, late} (ours and hudi 0.5.0's); the RO view holds k, whose deletes are after T."""
    table = exact_table(tmp_path)
    put(table, tmp_path, "upsert", [("k", 10, 1), ("j", 1, 1), ("m", 1, 1)])
    put(table, tmp_path, "delete", [("k", 0, 5)], ordered=False)
    put(table, tmp_path, "delete", [("k", 2, 6), ("m", 20, 2)])
    put(table, tmp_path, "upsert", [("late", 1, 2)])
    assert keys(table) == {"j", "late"}
    exact_compaction(table, 3)
    assert keys(table) == {"j", "late"}
    assert keys(table, "read_optimized") == {"k", "j", "late"}
    exact_compaction(table, 6)
    assert keys(table) == {"j", "late"} == keys(table, "read_optimized")


def test_delete_blocks_carry_each_deletes_event_time_and_read_as_before(tmp_path):
    """The event times ride in the delete block's SCHEMA header (an Avro attribute stock readers ignore): our
    decode returns them per delete, in block order; hudi 0.5.0 reads the table as before (checked above)."""
    table = exact_table(tmp_path)
    put(table, tmp_path, "upsert", [("k", 1, 1), ("j", 1, 1)])
    put(table, tmp_path, "delete", [("k", 5, 5), ("j", 5, 2)], ordered=False)
    view = FileSystemView(table.path)
    (log,) = [lf for g in view.file_groups() for s in g.slices for lf in s.log_files if lf.version == 2]
    (block,) = read_log_file(log.path).blocks
    assert isinstance(block, DeleteBlock) and block.info.schema_json is not None
    assert "tidemark.eventTimes" in block.info.schema_json
    times = dict(zip(block.deletes.column("record_key").to_pylist(), block.deletes.column("event_time_ms").to_pylist()))
    assert times == {"k": int(hour(5).timestamp() * 1000), "j": int(hour(2).timestamp() * 1000)}


def split_spec(threshold: int, bounds: dict) -> SplitSpec:
    schema = pa.schema([("_hoodie_record_key", pa.string()), ("seq", pa.int64()), ("ts", pa.int64())])
    return SplitSpec(EVENT_TIME_ORDERING, "seq", "ts", schema, threshold, bounds)


def test_a_delete_block_without_event_times_that_straddles_t_is_spilled_never_applied():
    """Blocks written before deletes carried their event times: a write whose stats straddle T is judged after
    T (spilled whole), one entirely at or before T is applied, one entirely after T is spilled; the completion
    time never counts past the write's earliest event time."""
    t = 3_000
    deletes = DeleteItem(pa.array(["k", "j"]), pa.array([5, 5], pa.int64()), pa.array([False, False]), "D")
    for (lo, hi), spilled, earliest in (((2_000, 5_000), True, 2_000), ((1_000, 2_000), False, None),
                                        ((4_000, 5_000), True, 4_000)):
        split = split_slice([deletes], [], split_spec(t, {"D": (lo, hi)}))
        carried = [item for item in split.carry if isinstance(item, DeleteItem)]
        assert bool(carried) is spilled and split.base_winners.size == (0 if spilled else 2)
        assert split.carry_min_event_ms == earliest
        if spilled:   # the carry-forward log keeps a time at which the next cut applies it, never earlier
            assert carried[0].event_ms is not None and min(carried[0].event_ms.to_pylist()) > t


def test_a_late_processing_time_delete_survives_an_ordered_one_at_or_before_t():
    """A processing-time delete after T followed by an ordered delete at or before T: Hudi ignores the ordered
    delete, so the processing-time one is never dropped as "beaten" by it (issue 12 case 4's root)."""
    t = 3_000
    put_k = DataItem(pa.table({"_hoodie_record_key": ["k"], "seq": pa.array([10], pa.int64()),
                               "ts": pa.array([1_000], pa.int64())}))
    hard = DeleteItem(pa.array(["k"]), pa.array([0], pa.int64()), pa.array([True]), "H",
                      pa.array([5_000], pa.int64()))
    ordered = DeleteItem(pa.array(["k"]), pa.array([2], pa.int64()), pa.array([False]), "O",
                         pa.array([2_000], pa.int64()))
    split = split_slice([put_k, hard, ordered], [], split_spec(t, {}))
    assert split.base_winners.keys.to_pylist() == ["k"] and not split.base_winners.is_delete.any()
    replayed = [(i.always_wins.to_pylist(), i.instant) for i in split.carry if isinstance(i, DeleteItem)]
    assert replayed == [([True], "H"), ([False], "O")]   # in log order: the ordered one stays ignored


def test_a_late_ordered_delete_that_hudi_ignores_is_not_replayed():
    """Record, processing-time delete, ordered delete after T, record: Hudi ignores the ordered delete (it
    follows a processing-time delete before any record), so the key reads as the last record. Replayed alone
    after the new base it would delete the key; it is dropped instead (the model test's case from CI)."""
    t = 7

    def put(seq: int, ts: int) -> DataItem:
        return DataItem(pa.table({"_hoodie_record_key": ["k"], "seq": pa.array([seq], pa.int64()),
                                  "ts": pa.array([ts], pa.int64())}))

    hard = DeleteItem(pa.array(["k"]), pa.array([None], pa.int64()), pa.array([True]), "H")
    ordered = DeleteItem(pa.array(["k"]), pa.array([13], pa.int64()), pa.array([False]), "O",
                         pa.array([13], pa.int64()))
    split = split_slice([put(0, 0), hard, ordered, put(0, 0)], [], split_spec(t, {}))
    assert split.base_winners.keys.to_pylist() == ["k"] and not split.base_winners.is_delete.any()
    assert not [i for i in split.carry if isinstance(i, DeleteItem)]
