"""Shared fixtures: one SparkSession per test process, Java fixture unzipping, the hudi 0.5.0 oracle."""
from __future__ import annotations

import logging
import os

import pytest
from hypothesis import HealthCheck, settings

from tests.support.fixtures import unzip_fixture

__all__ = ["unzip_fixture"]

# The control-plane stack (database, live server, Celery worker) for tests/tasks and tests/webapp, the catalogs
# and the headless browser; pytest only honours `pytest_plugins` in the top-level conftest.
pytest_plugins = ["tests.support.stack", "tests.support.catalogs", "tests.support.browser"]

# Hypothesis profiles (tests/integration/test_model_stateful.py): `ci` is reproducible (derandomized, no example
# database) and sized for CI; `soak` draws TIDEMARK_MODEL_EXAMPLES fresh random sequences (the bench target).
_SLOW_OK = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                print_blob=True)
settings.register_profile("ci", max_examples=int(os.environ.get("TIDEMARK_MODEL_EXAMPLES", "200")),
                          derandomize=True, database=None, **_SLOW_OK)
settings.register_profile("soak", max_examples=int(os.environ.get("TIDEMARK_MODEL_EXAMPLES", "2000")),
                          database=None, **_SLOW_OK)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items) -> None:
    """Tests on the live stack run after every pytest-django test of their process: the stack re-points
    this process's Django at its own database, which a later `db` test must never see."""
    items.sort(key=lambda item: "stack_env" in getattr(item, "fixturenames", ()))



@pytest.fixture(scope="session")
def spark():
    from engine.datasource import register
    from engine.spark import get_spark

    session = register(get_spark(cores=2))   # tests read with spark.read.format("tidemark") too
    yield session


@pytest.fixture(scope="module")
def spark_session(spark):
    """The session's Spark under the name module-scoped fixtures use."""
    return spark


@pytest.fixture
def fixture_table(tmp_path):
    return lambda name: unzip_fixture(name, tmp_path / name)


# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after pytest closed the
# captured streams, which prints a "--- Logging error ---" trace per connection; its INFO lines say nothing.
logging.getLogger("py4j").setLevel(logging.WARNING)
