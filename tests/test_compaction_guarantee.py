"""Only the event-time strategy publishes an RO guarantee; malformed scheduling arguments are refused."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine.compaction import run_compaction, schedule_compaction
from engine.errors import ConfigError
from engine.observe.freshness import freshness_report
from engine.config.layout import create_table
from engine.write.pipeline import write_dataframe

TS = pa.timestamp("ms", tz="UTC")


def ms(day: int) -> int:
    return int(dt.datetime(2024, 1, day, tzinfo=dt.timezone.utc).timestamp() * 1000)


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
