"""Freshness lag, as the sampler stores it: the engine's, from its own tide buckets."""
from __future__ import annotations

import datetime as dt

from engine.observe.tide import freshness_lag
from engine.results import TideBucket

UTC = dt.UTC


def _bucket(hour: int, records: int | None, size: int) -> TideBucket:
    start = dt.datetime(2013, 1, 1, hour, tzinfo=UTC)
    return TideBucket(start, start + dt.timedelta(hours=1), 1, records, size)


def freshness_lag_seconds(completion: dt.datetime | None, tide: list[TideBucket]) -> float | None:
    lag = freshness_lag(completion, tide)
    return None if lag is None else lag.total_seconds()


def test_lag_runs_from_completion_to_the_newest_logged_bucket() -> None:
    tide = [_bucket(2, 10, 100), _bucket(5, 3, 30)]
    completion = dt.datetime(2013, 1, 1, 4, tzinfo=UTC)
    assert freshness_lag_seconds(completion, tide) == 2 * 3600   # bucket 5:00-6:00 ends 2 h after 4:00


def test_without_a_completion_time_the_lag_spans_all_logged_data() -> None:
    assert freshness_lag_seconds(None, [_bucket(2, None, 100), _bucket(5, None, 30)]) == 4 * 3600


def test_no_logs_means_no_lag_once_compacted_and_unknown_before() -> None:
    assert freshness_lag_seconds(dt.datetime(2013, 1, 1, tzinfo=UTC), []) == 0.0
    assert freshness_lag_seconds(None, []) is None


def test_a_log_of_months_of_data_counts_its_newest_event_not_its_bucket() -> None:
    # one write of March to December sits in the bucket of its min event time (March): its max is what is behind
    march = dt.datetime(2013, 3, 1, tzinfo=UTC)
    tide = [TideBucket(march, march + dt.timedelta(days=1), 1, 285_000, 9 << 20,
                       newest_event_time=dt.datetime(2013, 12, 31, 23, tzinfo=UTC))]
    completion = dt.datetime(2013, 2, 1, tzinfo=UTC)
    assert freshness_lag_seconds(completion, tide) == (dt.datetime(2013, 12, 31, 23, tzinfo=UTC) - completion).total_seconds()
