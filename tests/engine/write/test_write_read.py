"""Every table our writer produces reads identically through our readers and hudi 0.5.0, and equals the
expected last-write-wins result (invariant 4 of docs/ARCHITECTURE.md)."""
from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest

from engine.config.layout import create_table
from engine.errors import InputError
from engine.read.query import read_arrow
from engine.write.pipeline import WriteError, write_dataframe
from tests.support.oracle import hudi_read, rows_by_key

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
COLS = ["id", "region", "seq", "event_time", "amount", "note"]


def batch(ids, seq, hour_offset=0, region=None):
    rows = [{"id": f"k{i:04d}", "region": region or ("eu" if i % 3 else "us"), "seq": seq,
             "event_time": T0 + dt.timedelta(hours=i % 48 + hour_offset), "amount": float(i * 10 + seq),
             "note": f"n{i}-{seq}" if i % 7 else None} for i in ids]
    return pa.Table.from_pylist(rows)


def expected_state(ops, merge_mode):
    """Independent last-write-wins model of what a snapshot must return, keyed by (partition, key)."""
    state: dict = {}
    for op, table, part_fn in ops:
        for row in table.to_pylist():
            key = (part_fn(row), row["id"])
            if op == "delete":
                cur = state.get(key)
                if cur is not None and (merge_mode == "commit_time" or "seq" not in row or row["seq"] is None
                                        or row["seq"] >= cur["seq"]):
                    del state[key]
                continue
            cur = state.get(key)
            if cur is None or merge_mode == "commit_time" or row["seq"] >= cur["seq"]:
                state[key] = row
    return state


def check_table(path, expected, columns=("id", "seq", "amount", "note")):
    ours = rows_by_key(read_arrow(path, "snapshot"))
    theirs = rows_by_key(hudi_read(path, "snapshot"))
    assert set(ours) == set(expected), "our snapshot keys differ from the model"
    assert set(theirs) == set(expected), "hudi 0.5.0 snapshot keys differ from the model"
    for key, row in expected.items():
        for c in columns:
            assert ours[key][c] == row[c], (key, c)
            assert theirs[key][c] == row[c], (key, c)
    assert ours == theirs


@pytest.mark.parametrize("partitioned,merge_mode,block_format", [
    (True, "event_time", "avro"),
    (False, "commit_time", "parquet"),
    (True, "commit_time", "avro"),
    (False, "event_time", "parquet"),
])
def test_batches_upserts_deletes_match_hudi(spark, tmp_path, partitioned, merge_mode, block_format):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"] if partitioned else [],
                 ordering_field="seq", event_time_field="event_time", merge_mode=merge_mode, hive_style=partitioned,
                 settings={"hoodie.logfile.data.block.format": block_format, "hoodie.bucket.index.num.buckets": "3"})
    part = (lambda r: f"region={r['region']}") if partitioned else (lambda r: "")
    rng = random.Random(7)
    ops = [("upsert", batch(range(0, 120), seq=1), part)]
    ops.append(("upsert", batch(rng.sample(range(0, 200), 80), seq=2, hour_offset=1), part))
    # Out-of-order update: an older seq arrives later (event-time ordering must keep the newer one).
    ops.append(("upsert", batch(rng.sample(range(0, 120), 30), seq=0), part))
    deletes = batch(rng.sample(range(0, 200), 25), seq=5).select(["id", "region"])
    ops.append(("delete", deletes, part))
    ops.append(("upsert", batch(rng.sample(range(0, 200), 20), seq=9, hour_offset=2), part))
    for op, table, _ in ops:
        write_dataframe(path, spark.createDataFrame(table), op)
    check_table(path, expected_state(ops, merge_mode))


def test_event_time_delete_with_ordering_value(spark, tmp_path):
    """A delete carrying an ordering value loses to a newer record and wins over older ones."""
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="event_time")
    ops = [("upsert", batch(range(10), seq=5), lambda r: "")]
    newer = batch([0, 1], seq=9)
    ops.append(("upsert", newer, lambda r: ""))
    dels = batch(range(4), seq=7).select(["id", "region", "seq"])
    ops.append(("delete", dels, lambda r: ""))
    for op, table, _ in ops:
        write_dataframe(path, spark.createDataFrame(table), op)
    expected = expected_state(ops, "event_time")
    assert ("", "k0000") in expected and ("", "k0002") not in expected
    check_table(path, expected)


def test_a_delete_with_ordering_value_zero_competes_like_any_other(spark, tmp_path):
    """Only Java's Int 0 means "no ordering" (always wins); a delete whose ordering column holds 0 is a Long 0
    that loses to a record of a larger ordering value (as hudi 0.5.0 reads it) and wins over 0 and below."""
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="event_time")
    ops = [("upsert", batch(range(2), seq=1), lambda r: ""), ("upsert", batch(range(2, 4), seq=0), lambda r: ""),
           ("upsert", batch(range(4, 6), seq=-1), lambda r: ""),
           ("delete", batch(range(6), seq=0).select(["id", "region", "seq"]), lambda r: "")]
    for op, table, _ in ops:
        write_dataframe(path, spark.createDataFrame(table), op)
    expected = expected_state(ops, "event_time")
    assert sorted(k for _, k in expected) == ["k0000", "k0001"]
    check_table(path, expected)


def test_log_rollover_and_read_optimized_is_empty_without_compaction(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="event_time",
                 settings={"hoodie.logfile.max.size": "4000", "hoodie.logfile.data.block.max.size": "1500",
                           "hoodie.bucket.index.num.buckets": "1"})
    result = write_dataframe(path, spark.createDataFrame(batch(range(300), seq=1)), "upsert")
    assert len(result.log_files) > 1, "a large write must roll over to several log versions"
    versions = sorted(int(p.rsplit(".log.", 1)[1].split("_")[0]) for p in result.log_files)
    assert versions == list(range(1, len(versions) + 1))
    check_table(path, expected_state([("upsert", batch(range(300), seq=1), lambda r: "")], "event_time"))
    assert read_arrow(path, "read_optimized").num_rows == 0
    assert hudi_read(path, "read_optimized").num_rows == 0


def test_insert_operation_and_schema_evolution(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="event_time")
    write_dataframe(path, spark.createDataFrame(batch(range(5), seq=1)), "insert")
    extra = batch(range(3, 8), seq=2).append_column("channel", pa.array(["web"] * 5))
    write_dataframe(path, spark.createDataFrame(extra), "upsert")
    ours = rows_by_key(read_arrow(path))
    theirs = rows_by_key(hudi_read(path))
    assert ours == theirs
    assert ours[("", "k0004")]["channel"] == "web" and ours[("", "k0001")]["channel"] is None


def test_spark_data_source_matches_in_process_read(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="event_time")
    write_dataframe(path, spark.createDataFrame(batch(range(50), seq=1)), "upsert")
    write_dataframe(path, spark.createDataFrame(batch(range(25), seq=2)), "upsert")
    df = spark.read.format("tidemark").option("query", "snapshot").load(path)
    via_spark = rows_by_key(df.toArrow())
    assert via_spark == rows_by_key(read_arrow(path))
    assert spark.read.format("tidemark").option("query", "read_optimized").load(path).count() == 0


def test_bad_input_is_refused_clearly(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="event_time")
    with pytest.raises(InputError, match="lacks column"):
        write_dataframe(path, spark.createDataFrame(pa.table({"id": ["a"]})), "upsert")
    with pytest.raises(WriteError, match="unknown operation"):
        write_dataframe(path, spark.createDataFrame(batch(range(2), 1)), "merge")
    from engine.errors import ConfigError, TableNotFoundError

    with pytest.raises(ConfigError, match="unknown config key"):
        write_dataframe(path, spark.createDataFrame(batch(range(2), 1)), "upsert", {"hoodie.nope": "1"})
    with pytest.raises(TableNotFoundError):
        write_dataframe(str(tmp_path / "missing"), spark.createDataFrame(batch(range(2), 1)), "upsert")


def test_delete_with_timestamp_ordering_field(spark, tmp_path):
    """A delete carrying a timestamp ordering value compares in the data's own unit (ours and hudi)."""
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="updated", event_time_field="updated")
    ts = lambda h: dt.datetime(2024, 1, 1, h, tzinfo=dt.UTC)  # noqa: E731
    data = pa.table({"id": ["a", "b"], "updated": pa.array([ts(1), ts(5)], pa.timestamp("us", tz="UTC")),
                     "v": [1, 2]})
    write_dataframe(path, spark.createDataFrame(data), "upsert")
    dels = pa.table({"id": ["a", "b"], "updated": pa.array([ts(3), ts(3)], pa.timestamp("us", tz="UTC"))})
    write_dataframe(path, spark.createDataFrame(dels), "delete")
    # a (updated 01:00) is older than the delete (03:00) and goes; b (05:00) is newer and stays.
    assert sorted(read_arrow(path).column("id").to_pylist()) == ["b"]
    assert sorted(hudi_read(path).column("id").to_pylist()) == ["b"]


def test_balance_packs_small_slices_and_keeps_big_ones_apart():
    from engine.read.query import balance
    from engine.read.slice_reader import SliceRef

    refs = [SliceRef("", f"f{i}", "1", None, (), size) for i, size in enumerate([100, 5, 5, 5, 90, 5])]
    groups = balance(refs, 3)
    assert len(groups) == 3 and sorted(len(g) for g in groups) == [1, 1, 4]
    assert sorted(sum(r.size for r in g) for g in groups) == [20, 90, 100]
    assert balance(refs[:1], 8) == [[refs[0]]] and balance([], 4) == []


def test_load_table_reads_ro_natively_and_snapshot_through_the_source(spark, tmp_path):
    from engine.compaction import run_compaction, schedule_compaction
    from engine.datasource import load_table

    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="event_time", hive_style=True)
    from engine.errors import TidemarkError

    with pytest.raises(TidemarkError, match="has no schema yet"):
        load_table(spark, path, "read_optimized")
    write_dataframe(path, spark.createDataFrame(batch(range(40), seq=1)), "upsert")
    schedule_compaction(path, strategy="unbounded")
    run_compaction(path, spark=spark)
    extra = batch(range(30, 50), seq=2).append_column("channel", pa.array(["web"] * 20))
    write_dataframe(path, spark.createDataFrame(extra), "upsert")
    ro = rows_by_key(load_table(spark, path, "read_optimized").toArrow())
    assert ro == rows_by_key(read_arrow(path, "read_optimized")) == rows_by_key(hudi_read(path, "read_optimized"))
    assert len(ro) == 40 and all(r["channel"] is None for r in ro.values())
    snap = rows_by_key(load_table(spark, path, "snapshot").toArrow())
    assert snap == rows_by_key(read_arrow(path)) and len(snap) == 50


def test_load_table_snapshot_reads_log_free_slices_natively(spark, tmp_path):
    """Slices without logs go to Spark's Parquet reader, the rest through the data source given the same plan;
    the union holds exactly the snapshot (ours in-process and hudi 0.5.0's), deletes included."""
    from engine.compaction import run_compaction, schedule_compaction
    from engine.datasource import load_table
    from engine.read.query import plan_read

    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="event_time", hive_style=True, settings={"hoodie.bucket.index.num.buckets": "4"})
    write_dataframe(path, spark.createDataFrame(batch(range(200), seq=1)), "upsert")
    schedule_compaction(path, strategy="unbounded")
    run_compaction(path, spark=spark)

    def scans(df) -> tuple[bool, bool]:
        text = df._jdf.queryExecution().executedPlan().toString()
        return "FileScan parquet" in text, "BatchScan tidemark" in text

    only_bases = load_table(spark, path, "snapshot")
    assert scans(only_bases) == (True, False)
    assert rows_by_key(only_bases.toArrow()) == rows_by_key(read_arrow(path)) == rows_by_key(hudi_read(path))

    # Upserts and deletes reaching some file groups only: those slices now have logs.
    write_dataframe(path, spark.createDataFrame(batch([3, 4, 300], seq=2)), "upsert")
    write_dataframe(path, spark.createDataFrame(batch([5], seq=3)), "delete")
    slices = plan_read(path).slices
    assert any(s.log_paths for s in slices) and any(not s.log_paths for s in slices)
    mixed = load_table(spark, path, "snapshot")
    assert scans(mixed) == (True, True)
    snap = rows_by_key(mixed.toArrow())
    assert snap == rows_by_key(read_arrow(path)) == rows_by_key(hudi_read(path))
    assert len(snap) == 200 and "k0005" not in {r["id"] for r in snap.values()} and mixed.count() == 200
