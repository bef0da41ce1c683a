"""EVENT_TIME_TRIGGER: one compaction at a time, nothing else in flight, the new instant is the newest."""
from __future__ import annotations

import pytest

from engine.compaction import check_event_time_trigger, schedule_compaction
from engine.errors import CompactionRefused
from engine.timeline import avro_models as am
from engine.timeline import instants as tl
from engine.timeline.instants import Timeline
from tests.support.fixtures import unzip_fixture

NEW = "20300101000000000"
_REQUESTED_REPLACE = {
    "type": "record", "name": "HoodieRequestedReplaceMetadata", "namespace": am.NAMESPACE,
    "fields": [{"name": "operationType", "type": ["null", "string"], "default": None},
               {"name": "version", "type": ["int", "null"], "default": 1}],
}


@pytest.fixture
def trips(tmp_path):
    return str(unzip_fixture("v6_trips_8i1u", tmp_path / "t"))


def refused(base: str, new: str = NEW) -> CompactionRefused:
    with pytest.raises(CompactionRefused) as exc:
        check_event_time_trigger(Timeline.load(base), new)
    return exc.value


def test_clean_timeline_is_accepted(trips):
    check_event_time_trigger(Timeline.load(trips), NEW)


@pytest.mark.parametrize("inflight", [False, True])
def test_pending_compaction_blocks(trips, inflight):
    ts = "20250401000000000"
    tl.create_requested(trips, ts, "compaction", am.write_compaction_plan({"operations": []}))
    if inflight:
        tl.transition_to_inflight(trips, ts, "compaction")
    err = refused(trips)
    assert err.blocking_instant == ts
    assert ts in str(err) and "compaction" in str(err) and ("inflight" if inflight else "requested") in str(err)


def test_completed_compaction_does_not_block(trips):
    ts = "20250401000000000"
    tl.create_requested(trips, ts, "compaction", am.write_compaction_plan({"operations": []}))
    tl.transition_to_inflight(trips, ts, "compaction")
    tl.complete(trips, ts, "compaction", tl.commit_metadata_json({}, schema="{}", operation_type="COMPACT"))
    check_event_time_trigger(Timeline.load(trips), NEW)


def test_pending_clustering_blocks(trips):
    ts = "20250401000000001"
    plan = am.write_avro_instant(_REQUESTED_REPLACE, {"operationType": "cluster"})
    tl.create_requested(trips, ts, "replacecommit", plan)
    err = refused(trips)
    assert err.blocking_instant == ts and "clustering" in str(err)


@pytest.mark.parametrize("action", ["deltacommit", "commit"])
def test_pending_write_blocks(trips, action):
    ts = "20250401000000002"
    tl.create_requested(trips, ts, action)
    tl.transition_to_inflight(trips, ts, action)
    err = refused(trips)
    assert err.blocking_instant == ts and action in str(err) and "inflight" in str(err)


def test_instant_not_newest_is_refused(trips):
    err = refused(trips, new="20250331030645735")   # equal to the last deltacommit
    assert err.blocking_instant == "20250331030645735" and "newest" in str(err)
    err = refused(trips, new="20250101000000000")   # before everything
    assert err.blocking_instant == "20250331030642808"


def test_schedule_refuses_second_plan_naming_the_pending_one(trips):
    first = schedule_compaction(trips, strategy="unbounded")
    assert first.written
    with pytest.raises(CompactionRefused, match=first.instant) as exc:
        schedule_compaction(trips, strategy="unbounded")
    assert exc.value.blocking_instant == first.instant
    with pytest.raises(CompactionRefused, match=first.instant):
        schedule_compaction(trips, threshold_ms=0)   # the trigger applies to every strategy
