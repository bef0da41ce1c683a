"""Fixtures of the worker tests: a flights demo table built once per session, copied per test."""
from __future__ import annotations

import uuid

import pytest

from tests.support.tables import table_copy

DEMO_BATCHES = 6  # 6 windows of 60 h of real 2013 departures, with late arrivals and cancellations


@pytest.fixture(scope="session")
def flights_template(tmp_path_factory, spark):
    from engine.demo import run_demo

    path = tmp_path_factory.mktemp("flights-template") / "flights"
    run_demo(str(path), spark, batches=DEMO_BATCHES)
    return path


@pytest.fixture
def flights(stack_env, flights_template):
    """A private copy of the demo table under the stack's table root."""
    return table_copy(flights_template, stack_env.table_root / f"flights-{uuid.uuid4().hex[:8]}")
