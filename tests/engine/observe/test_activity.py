"""engine.observe.activity: a table's housekeeping (clean, archival, active timeline) and ingestion (last write,
lag, a stream's progress), read from hoodie.properties and one timeline load, on v6 and v8 tables."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from engine import Table
from engine.cli import output
from engine.io import storage
from engine.io.naming import instant_to_millis
from engine.observe.activity import table_activity
from engine.results import utc
from engine.timeline.instants import Timeline
from tests.support.tables import create_table, day_file, stream_commit

WATERMARK_MS = 1_704_196_800_000   # 2024-01-02T12:00:00Z


def _table(tmp: Path, version: int, settings: dict[str, str] | None = None) -> Table:
    table = Table.create(str(tmp / f"v{version}"), name=f"v{version}", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts", table_version=version,
                         settings={"hoodie.bucket.index.num.buckets": "1", **(settings or {})})
    for i, day in enumerate(("01", "02", "03")):
        table.write(day_file(tmp, i, day))
    return table


def _compacted_and_cleaned(tmp: Path, version: int) -> tuple[Table, str, int]:
    """Three writes, a compaction of all of them, one more write, then a clean keeping one commit: the clean
    deletes the three logs the compaction folded. Returns the table, the clean instant and its count."""
    table = _table(tmp, version)
    table.schedule_compaction(strategy="unbounded")
    table.run_compaction()
    table.write(day_file(tmp, 4, "04"))
    clean = table.clean(retain_commits=1)
    assert clean.instant is not None
    return table, clean.instant, sum(len(v) for v in clean.deleted.values())


@pytest.mark.parametrize("version", [6, 8])
def test_last_clean_and_last_write_skip_the_compaction(tmp_path, version):
    table, clean_instant, deleted = _compacted_and_cleaned(tmp_path, version)
    timeline = Timeline.load(table.path)
    last_delta = [i for i in timeline.completed() if i.action == "deltacommit"][-1]

    facts = table.activity()

    hk = facts.housekeeping
    assert (hk.last_clean, hk.last_clean_files_deleted) == (clean_instant, deleted) and deleted == 3
    ing = facts.ingestion
    # the compaction's commit completed after three of the writes but is no write; the fourth write is the last
    assert (ing.last_write, ing.last_write_action, ing.last_write_operation) == (last_delta.timestamp, "deltacommit",
                                                                                  "UPSERT")
    if version == 8:   # layout 2 names the completion time; layout 1 has the file's modification time (as Hudi)
        assert ing.last_write_at == utc(instant_to_millis(last_delta.completion_time))
        clean = timeline.get(clean_instant)[0]
        assert hk.last_clean_at == utc(instant_to_millis(clean.completion_time))
    else:
        assert ing.last_write_at == utc(storage.mtime_ms(timeline.instant_path(last_delta)))
    assert ing.lag_seconds == pytest.approx((ing.checked_at - ing.last_write_at).total_seconds())
    assert ing.stream is None
    assert hk.active_instants == len(timeline.instants)
    assert hk.active_instant_files == len([n for n in storage.list_names(timeline.timeline_path)
                                           if n[0].isdigit() and not n.endswith(".properties")])
    assert hk.archived is False


def test_hudi_defaults_shown_as_defaults(tmp_path):
    hk = table_activity(_table(tmp_path, 6).path).housekeeping
    assert (hk.clean_policy, hk.clean_retained, hk.clean_retained_unit) == ("KEEP_LATEST_COMMITS", 10, "commits")
    assert (hk.clean_automatic, hk.clean_async, hk.archive_automatic) == (True, False, True)
    assert (hk.archive_min_commits, hk.archive_max_commits) == (20, 30)
    assert {s.source for s in hk.settings} == {"default"}
    assert hk.last_clean is None and hk.last_clean_at is None


def test_table_settings_shown_as_the_tables(tmp_path):
    table = _table(tmp_path, 6, {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"})
    table.update_settings({"hoodie.cleaner.fileversions.retained": "2", "hoodie.clean.automatic": "false",
                           "hoodie.keep.min.commits": "5", "hoodie.keep.max.commits": "8"})

    hk = table.activity().housekeeping

    assert (hk.clean_policy, hk.clean_retained, hk.clean_retained_unit) == ("KEEP_LATEST_FILE_VERSIONS", 2,
                                                                            "file versions")
    assert hk.clean_automatic is False and (hk.archive_min_commits, hk.archive_max_commits) == (5, 8)
    assert hk.source("hoodie.cleaner.policy") == "table" and hk.source("hoodie.cleaner.fileversions.retained") == "table"
    assert hk.source("hoodie.archive.automatic") == "default" and hk.source("hoodie.clean.async") == "default"


def test_by_hours_policy_counts_hours(tmp_path):
    table = _table(tmp_path, 6, {"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "6"})
    hk = table.activity().housekeeping
    assert (hk.clean_retained, hk.clean_retained_unit, hk.clean_retained_key) == (6, "hours",
                                                                                  "hoodie.cleaner.hours.retained")


@pytest.mark.parametrize("version", [6, 8])
def test_a_streams_last_batch_is_shown(tmp_path, version):
    table = _table(tmp_path, version)
    checkpoint = json.dumps({"q-1": "41"})
    ts = stream_commit(table.path, {"tidemark.stream.queryId": "q-1", "tidemark.stream.batchId": "41",
                                    "tidemark.stream.watermark": str(WATERMARK_MS),
                                    "_hudi_streaming_sink_checkpoint": checkpoint})
    now = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)

    ing = table.activity(now=now).ingestion

    assert ing.last_write == ts and ing.stream is not None
    assert (ing.stream.query_id, ing.stream.batch_id, ing.stream.watermark, ing.stream.checkpoint) == (
        "q-1", 41, utc(WATERMARK_MS), checkpoint)
    assert ing.checked_at == now and ing.lag_seconds == pytest.approx((now - ing.last_write_at).total_seconds())
    assert ing.lag_seconds >= 300


def test_a_hudi_sink_checkpoint_alone_names_query_and_batch(tmp_path):
    table = _table(tmp_path, 6)
    stream_commit(table.path, {"_hudi_streaming_sink_checkpoint": json.dumps({"writer-7": "3"})})
    stream = table.activity().ingestion.stream
    assert stream is not None and (stream.query_id, stream.batch_id, stream.watermark) == ("writer-7", 3, None)


def test_empty_table_has_no_write(tmp_path):
    table = create_table(tmp_path / "empty")
    facts = table.activity()
    assert facts.ingestion.last_write is None and facts.ingestion.lag_seconds is None
    assert facts.housekeeping.active_instants == 0


def test_v6_archive_files_mean_archived(tmp_path):
    table = _table(tmp_path, 6)
    archived = Path(table.path) / ".hoodie" / "archived"
    assert archived.is_dir()   # created with the table, as Java does
    assert table.activity().housekeeping.archived is False   # an empty folder archived nothing
    (archived / ".commits_.archive.1_1-0-1").write_bytes(b"#HUDI#")
    assert table.activity().housekeeping.archived is True


def test_v8_lsm_history_means_archived(tmp_path):
    table = _table(tmp_path, 8)
    history = Path(Timeline.load(table.path).history_folder or "")
    history.mkdir(parents=True, exist_ok=True)
    assert table.activity().housekeeping.archived is False
    (history / "_version_").write_text("1")
    assert table.activity().housekeeping.archived is True


def test_show_prints_and_serialises_the_facts(tmp_path):
    table, clean_instant, _ = _compacted_and_cleaned(tmp_path, 6)
    stream_commit(table.path, {"tidemark.stream.queryId": "q-9", "tidemark.stream.batchId": "7",
                               "tidemark.stream.watermark": str(WATERMARK_MS)})
    described = table.describe()

    text = output.describe(described)
    doc = described.to_dict()["activity"]

    assert "clean: KEEP_LATEST_COMMITS (default), retain 10 commits (default)" in text
    assert f"last clean: {clean_instant} at" in text and "deleted 3 file(s)" in text
    assert "stream: query q-9, batch 7, watermark 2024-01-02T12:00:00.000Z" in text
    assert doc["housekeeping"]["last_clean_files_deleted"] == 3
    assert doc["ingestion"]["stream"] == {"query_id": "q-9", "batch_id": 7, "watermark": "2024-01-02T12:00:00.000Z",
                                          "watermark_ms": WATERMARK_MS, "checkpoint": None}
    assert isinstance(doc["ingestion"]["last_write_at_ms"], int)
