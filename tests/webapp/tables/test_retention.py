"""Sample retention (webapp.tables.retention) on SQLite and PostgreSQL: raw samples for a week, then one row
per table and hour, then per day, then gone; every rolled-up row keeps its bucket's peak lag, any breach
and how many samples it stands for; the latest sample is never touched; a second roll-up changes nothing.
And the table page's charts downsample long histories (webapp.tables.history)."""
from __future__ import annotations

import datetime as dt

import pytest

from engine import ConfigError
from webapp.tables import history, latest
from webapp.tables.models import MetricSample, RegisteredTable, SamplingState
from webapp.tables.retention import DAY, HOUR, Retention, roll_up

NOW = dt.datetime(2026, 3, 1, 0, 0, tzinfo=dt.UTC)
STEP = dt.timedelta(minutes=5)


@pytest.fixture
def tables(stack_env) -> list[RegisteredTable]:
    """Two tables with 12 days of 5-minute samples; lag peaks at 9999 s at minute 30 of every hour."""
    out = []
    for name in ("a", "b"):
        table = RegisteredTable.objects.create(name=name, path=f"/x/{name}", freshness_sla_minutes=60)
        t, rows = NOW - dt.timedelta(days=12), []
        while t < NOW:
            peak = t.minute == 30
            rows.append(MetricSample(table=table, taken_at=t, freshness_lag_seconds=9999.0 if peak else 60.0,
                                     sla_breached=peak, remaining_log_files=t.minute, tide=[{"start": "x"}]))
            t += STEP
        MetricSample.objects.bulk_create(rows)
        out.append(table)
    latest.point_at_newest([t.pk for t in out])
    return out


def test_hourly_rollup_keeps_peaks_counts_and_the_latest(tables):
    before = MetricSample.objects.count()
    newest = {t.pk: SamplingState.objects.get(table=t).latest_sample_id for t in tables}
    report = roll_up(NOW, Retention(raw_days=7, hourly_days=90, keep_days=400))
    cutoff = NOW - dt.timedelta(days=7)
    old = MetricSample.objects.filter(taken_at__lt=cutoff)
    assert old.count() == 2 * 5 * 24                                    # one row per table and hour
    assert set(old.values_list("resolution_seconds", flat=True)) == {HOUR}
    assert set(old.values_list("rolled_up", flat=True)) == {12}
    assert set(old.values_list("freshness_lag_seconds", flat=True)) == {9999.0}   # the hour's peak
    assert all(old.values_list("sla_breached", flat=True))
    assert set(old.values_list("remaining_log_files", flat=True)) == {55}          # state at the hour's end
    assert not any(old.values_list("tide", flat=True))
    recent = MetricSample.objects.filter(taken_at__gte=cutoff)
    assert recent.count() == 2 * 7 * 24 * 12 and set(recent.values_list("resolution_seconds", flat=True)) == {0}
    assert report.rolled_hourly == before - MetricSample.objects.count()
    assert sum(MetricSample.objects.values_list("rolled_up", flat=True)) == before   # nothing lost from counts
    assert {t.pk: SamplingState.objects.get(table=t).latest_sample_id for t in tables} == newest
    again = roll_up(NOW, Retention(raw_days=7, hourly_days=90, keep_days=400))
    assert (again.rolled_hourly, again.rolled_daily, again.deleted) == (0, 0, 0)


def test_daily_tier_and_deletion(tables):
    roll_up(NOW, Retention(raw_days=2, hourly_days=5, keep_days=10))
    rows = MetricSample.objects.filter(table=tables[0])
    assert not rows.filter(taken_at__lt=NOW - dt.timedelta(days=10)).exists()
    daily = rows.filter(taken_at__lt=NOW - dt.timedelta(days=5))
    assert daily.count() == 5 and set(daily.values_list("resolution_seconds", flat=True)) == {DAY}
    assert set(daily.values_list("rolled_up", flat=True)) == {288}
    hourly = rows.filter(taken_at__gte=NOW - dt.timedelta(days=5), taken_at__lt=NOW - dt.timedelta(days=2))
    assert hourly.count() == 3 * 24


def test_retention_settings_are_checked(monkeypatch):
    monkeypatch.setenv("TIDEMARK_SAMPLES_RAW_DAYS", "30")
    monkeypatch.setenv("TIDEMARK_SAMPLES_HOURLY_DAYS", "7")
    with pytest.raises(ConfigError, match="TIDEMARK_SAMPLES_HOURLY_DAYS must be at least"):
        Retention.from_env()
    monkeypatch.setenv("TIDEMARK_SAMPLES_RAW_DAYS", "a week")
    with pytest.raises(ConfigError, match="TIDEMARK_SAMPLES_RAW_DAYS='a week' must be a number of days"):
        Retention.from_env()


def test_chart_downsamples_long_histories_keeping_peaks(tables):
    newest = NOW - STEP
    week = history.chart_series(tables[0], "7d", points=500, newest=newest)
    assert len(week) <= 500 and max(p["lag"] for p in week) == 9999.0
    day = history.chart_series(tables[0], "1d", points=500, newest=newest)
    assert len(day) == 24 * 12 + 1                                     # fewer samples than points: all of them
    everything = history.chart_series(tables[0], "all", points=100, newest=newest)
    assert len(everything) <= 100 and sum(p["lag"] == 9999.0 for p in everything) == len(everything)


def test_downsample_buckets_are_consecutive_and_complete():
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [(start + dt.timedelta(minutes=i),) for i in range(1000)]
    buckets = history.downsample(rows, 10)
    assert len(buckets) == 10 and [r for b in buckets for r in b] == rows


def test_an_old_latest_sample_is_never_rolled_up(stack_env):
    table = RegisteredTable.objects.create(name="quiet", path="/x/quiet")
    old = NOW - dt.timedelta(days=20)
    MetricSample.objects.create(table=table, taken_at=old, freshness_lag_seconds=9.0)
    last = MetricSample.objects.create(table=table, taken_at=old + dt.timedelta(minutes=5), freshness_lag_seconds=1.0,
                                       tide=[{"start": "x"}])
    roll_up(NOW, Retention(raw_days=7, hourly_days=90, keep_days=400))
    last.refresh_from_db()
    assert (last.resolution_seconds, last.freshness_lag_seconds, last.tide) == (0, 1.0, [{"start": "x"}])
    assert MetricSample.objects.filter(table=table).count() == 2
