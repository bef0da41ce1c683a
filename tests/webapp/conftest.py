"""Fixtures of the control-plane tests: role users, registered tables with samples, logged-in clients."""
from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.support.records import T0, make_user, sample
from webapp.accounts.roles import OPERATOR, VIEWER
from webapp.tables.models import RegisteredTable, Run


@pytest.fixture
def operator(db) -> User:
    return make_user("olivia", OPERATOR)


@pytest.fixture
def viewer(db) -> User:
    return make_user("victor", VIEWER)


@pytest.fixture
def operator_client(operator) -> Client:
    client = Client()
    client.force_login(operator)
    return client


@pytest.fixture
def viewer_client(viewer) -> Client:
    client = Client()
    client.force_login(viewer)
    return client


@pytest.fixture
def csrf_client(operator) -> Client:
    """A logged-in operator whose client enforces CSRF like a browser would."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    return client


@pytest.fixture
def flights(db, tmp_path, settings) -> RegisteredTable:
    """A registered table with two samples: an older one with more backlog, and the latest."""
    root = tmp_path / "tables"
    (root / "flights").mkdir(parents=True)
    settings.TIDEMARK_TABLE_ROOTS = [str(root)]
    table = RegisteredTable.objects.create(name="flights", path=str(root / "flights"), freshness_sla_minutes=120,
                                           data_latency="2h")
    sample(table, T0, completion=T0 - dt.timedelta(hours=6), lag_s=6 * 3600, files=12, log_bytes=12 << 20,
           slices=8, pending=0)
    tide = [{"start": "2013-01-20T00:00:00.000Z", "end": "2013-01-20T01:00:00.000Z", "log_files": 3,
             "log_records": 500, "log_bytes": 40_000},
            {"start": "2013-01-20T01:00:00.000Z", "end": "2013-01-20T02:00:00.000Z", "log_files": 1,
             "log_records": 200, "log_bytes": 16_000}]
    sample(table, T0 + dt.timedelta(hours=1), completion=T0 - dt.timedelta(hours=1), lag_s=3 * 3600, files=4,
           log_bytes=3 << 20, slices=3, pending=1, late=17, corrupt=2, tide=tide)
    return table


@pytest.fixture
def finished_compaction(flights, operator) -> Run:
    """A compaction run as a worker records it: plan with one compacted and one carried log."""
    plan = {"instant": "20130120020000000", "threshold": "2013-01-20T01:00:00Z", "strategy": "event_time",
            "carry_over": "symlink", "exact": False, "projected_ro_completion_time": "2013-01-20T01:00:00Z",
            "settings_used": {"hoodie.compaction.carry.over.mode": {"value": "symlink", "source": "default"}},
            "operations": [{"partition": "2013/01/20", "file_id": "fg-1", "base_file": "fg-1_0-1-0_001.parquet",
                            "logs_compacted": [".fg-1_001.log.1_0-1-0"],
                            "logs_carried": [{"name": ".fg-1_001.log.2_0-1-0", "target": ".fg-1_002.log.1_0-1-0",
                                              "mode": "symlink"}],
                            "bytes_compacted": 1000, "bytes_carried": 400}]}
    return Run.objects.create(table=flights, kind="schedule_execute", state="succeeded", instant=plan["instant"],
                              requested_by=operator, started_at=T0, finished_at=T0 + dt.timedelta(seconds=42),
                              progress_done=1, progress_total=1, progress_unit="file groups", plan=plan,
                              result={"instant": plan["instant"], "file_groups": 1})



@pytest.fixture
def planned(flights):
    """`flights` made a real table with a pending plan scheduled outside the control plane (engine.Table)."""
    from tests.support.tables import table_with_plan

    return table_with_plan(flights.path)
