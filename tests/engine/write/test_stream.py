"""engine.write.stream: one deltacommit a micro-batch, replays skipped, failures invisible; Table.write_stream and
the compaction that follows the stream."""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.errors import ConfigError
from engine.timeline.instants import DELTACOMMIT, Timeline
from engine.timeline.stream_checkpoint import SINK_CHECKPOINT_KEY, WATERMARK_KEY, checkpoints
from engine.write.pipeline import WriteError
from engine.write.stream import StreamSink, commit_batch, sink_from_options
from tests.support.stream_tables import START, file_source, source_rows, stream_table

QUERY = "6f1c1c0e-0000-4000-8000-000000000001"


def _sink(tmp_path: Path, table: Path) -> StreamSink:
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(json.dumps({"id": QUERY}))
    return sink_from_options({"path": str(table), "checkpointLocation": str(checkpoint),
                              "hoodie.datasource.write.recordkey.field": "id"})


def _stage(sink: StreamSink, batch_id: int, first_id: int) -> list[str]:
    folder = Path(sink.batch_staging(batch_id))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"0-0-{first_id}.parquet"
    pq.write_table(source_rows(first_id, 10, first_id), path)
    return [str(path)]


def _deltacommits(table: Path) -> list[dict[str, str]]:
    timeline = Timeline.load(str(table))
    return [dict(timeline.commit_metadata(i).extra) for i in timeline.completed() if i.action == DELTACOMMIT]


def test_batch_is_one_deltacommit_with_hudis_checkpoint_and_a_replay_is_skipped(tmp_path: Path) -> None:
    table = tmp_path / "events"
    stream_table(table)
    sink = _sink(tmp_path, table)
    assert commit_batch(sink, _stage(sink, 0, 0), 0) is not None
    assert commit_batch(sink, _stage(sink, 1, 100), 1) is not None
    assert commit_batch(sink, _stage(sink, 1, 200), 1) is None   # Spark ran batch 1 again after a crash
    extras = _deltacommits(table)
    assert [json.loads(e[SINK_CHECKPOINT_KEY]) for e in extras] == [{"default_single_writer": "0"},
                                                                    {"default_single_writer": "1"}]
    assert [e["tidemark.stream.queryId"] for e in extras] == [QUERY, QUERY]
    # The watermark is the greatest event time written so far: batch 1's rows are 100..109 minutes past START.
    assert int(extras[-1][WATERMARK_KEY]) == int((START.timestamp() + 109 * 60) * 1000)
    assert Table.open(str(table)).read().rows == 20   # the replay's rows (ids 200..) are not in
    assert not list(Path(sink.staging).iterdir())


def test_a_failing_batch_leaves_nothing_and_runs_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "events"
    stream_table(table)
    sink = _sink(tmp_path, table)
    monkeypatch.setenv("TIDEMARK_FAULT", "write:tasks:raise")
    with pytest.raises(WriteError):
        commit_batch(sink, _stage(sink, 0, 0), 0)
    assert _deltacommits(table) == [] and not Timeline.load(str(table)).pending()
    monkeypatch.delenv("TIDEMARK_FAULT")
    assert commit_batch(sink, _stage(sink, 0, 0), 0) is not None   # the query reruns batch 0
    assert [json.loads(e[SINK_CHECKPOINT_KEY]) for e in _deltacommits(table)] == [{"default_single_writer": "0"}]
    assert Table.open(str(table)).read().rows == 10


def test_another_query_on_the_table_is_not_taken_for_a_replay(tmp_path: Path) -> None:
    table = tmp_path / "events"
    stream_table(table)
    sink = _sink(tmp_path, table)
    commit_batch(sink, _stage(sink, 0, 0), 0)
    other = StreamSink(sink.base_path, str(tmp_path / "other"))
    Path(other.checkpoint).mkdir()
    (Path(other.checkpoint) / "metadata").write_text(json.dumps({"id": "another-query"}))
    assert commit_batch(other, _stage(other, 0, 50), 0) is not None
    assert Table.open(str(table)).read().rows == 20


@pytest.mark.parametrize("options, message", [
    ({"hoodie.datasource.write.recordkey.field": "name"}, "disagrees with table"),
    ({"hoodie.datasource.write.operation": "insert_overwrite"}, "a stream writes with"),
    ({"hoodie.unknown.key": "1"}, "unknown config key"),
    ({"hoodie.datasource.write.streaming.disable.compaction": "yes"}, "must be true or false"),
])
def test_options_the_table_cannot_honour_are_refused(tmp_path: Path, options: dict[str, str], message: str) -> None:
    table = tmp_path / "events"
    stream_table(table)
    with pytest.raises(ConfigError, match=message):
        sink_from_options({"path": str(table), "checkpointLocation": str(tmp_path / "c"), **options})


def test_write_stream_and_the_compaction_that_follows_it(spark, tmp_path: Path) -> None:
    table = stream_table(tmp_path / "events", settings={"hoodie.compaction.event.time.stream.lateness": "10m"})
    file_source(tmp_path / "source", 3)
    df = spark.readStream.schema("id long, name string, ts long, event_time timestamp, region string") \
        .option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "source"))
    query = table.write_stream(df, checkpoint_location=str(tmp_path / "checkpoint"), trigger={"availableNow": True})
    assert query.name == "tidemark:events"
    query.awaitTermination()

    status = table.stream_status()
    assert status is not None and status.last_batch_id == 2 and status.query_id == str(query.id)
    watermarks = {cp.watermark_ms for cp in checkpoints(Timeline.load(table.path))}
    assert status.watermark is not None
    watermark = int(status.watermark.timestamp() * 1000)
    assert watermark == max(watermarks)
    lateness = 10 * 60 * 1000
    deadline = time.monotonic() + 60
    while Timeline.load(table.path).pending_compactions():   # the sink's own run, in a process of its own
        assert time.monotonic() < deadline
        time.sleep(0.2)
    runs = table.compactions()
    assert runs and {c.state for c in runs} == {"completed"}
    assert {int(c.threshold.timestamp() * 1000) for c in runs if c.threshold} <= {w - lateness for w in watermarks}
    assert table.plan_compaction().threshold is not None
    assert int(table.plan_compaction().threshold.timestamp() * 1000) == watermark - lateness


def test_javas_keys_turn_the_sinks_compaction_off(tmp_path: Path) -> None:
    table = tmp_path / "events"
    stream_table(table)
    base = {"path": str(table), "checkpointLocation": str(tmp_path / "c")}
    assert sink_from_options(base).compact
    assert not sink_from_options({**base, "hoodie.datasource.write.streaming.disable.compaction": "true"}).compact
    assert not sink_from_options({**base, "hoodie.datasource.compaction.async.enable": "false"}).compact


def test_a_schedule_without_threshold_follows_the_stream_watermark(tmp_path: Path) -> None:
    table_path = tmp_path / "events"
    table = stream_table(table_path, settings={"hoodie.compaction.event.time.stream.lateness": "30m"})
    assert table.plan_compaction().state == "nothing_to_do"   # no stream has written a watermark yet
    sink = dataclasses.replace(_sink(tmp_path, table_path), compact=False)   # the sink schedules none itself
    commit_batch(sink, _stage(sink, 0, 0), 0)       # event times START + 0..9 min
    commit_batch(sink, _stage(sink, 1, 100), 1)     # START + 100..109 min
    watermark = int((START.timestamp() + 109 * 60) * 1000)
    plan = table.plan_compaction()
    assert plan.threshold is not None and int(plan.threshold.timestamp() * 1000) == watermark - 30 * 60 * 1000
    assert plan.settings_used["threshold"].source == "stream"
    assert plan.settings_used["hoodie.compaction.event.time.stream.lateness"].value == 30 * 60 * 1000
    explicit = table.plan_compaction(threshold=START)   # an explicit threshold, or data latency, is the caller's
    assert explicit.threshold == START and explicit.settings_used["threshold"].source == "argument"
    assert table.plan_compaction(data_latency="1h").settings_used["threshold"].source == "argument"
