PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run lint test bench demo clean model-soak

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The control plane's state (SQLite database, filesystem broker, demo tables) unless DATABASE_URL /
# CELERY_BROKER_URL point elsewhere; TIDEMARK_TABLE_ROOTS defaults to $(STATE)/tables.
STATE ?= $(CURDIR)/state
DEMO_BATCHES ?= 12
export TIDEMARK_STATE_DIR ?= $(STATE)

# migrate, load + register the flights demo table (once, catalog sync on), create the demo users (passwords
# printed when they are created; later runs keep them), then a Hive metastore + web (gunicorn, bounded
# workers × threads) + worker + beat in one terminal, supervised: a process that dies is restarted; Ctrl-C
# stops them gracefully (running runs finish first). Served on localhost; DJANGO_ALLOWED_HOSTS names other
# host names (tasks/supervisor.py).
run: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py tidemark_demo --batches $(DEMO_BATCHES) --hive-sync
	$(BIN)/python manage.py tidemark_users
	$(BIN)/python -m tasks.supervisor

# the engine alone, no control plane: stream the demo, compact it up to 2013-01-20, print its freshness
demo: setup
	rm -rf demo-data/flights
	$(BIN)/python -m engine demo demo-data/flights
	$(BIN)/python -m engine compaction schedule demo-data/flights --threshold 2013-01-20T00:00:00Z
	$(BIN)/python -m engine compaction run demo-data/flights
	$(BIN)/python -m engine freshness demo-data/flights
	$(BIN)/python -m engine metrics demo-data/flights

lint: setup
	$(BIN)/ruff check engine tests bench webapp tasks
	$(BIN)/mypy

# the Java-written test tables come from hudi 0.5.0's sdist on the package index pip is configured with
# (tests/support/hudi_sdist.py), fetched and checked once, before the parallel workers start
test: lint
	$(BIN)/python -m tests.support.hudi_sdist
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=25 tests

bench: setup
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) demo-data

# the stateful model test (tests/integration/test_model_stateful.py) on thousands of fresh random sequences
MODEL_SEQUENCES ?= $(or $(TIDEMARK_MODEL_EXAMPLES),2000)
model-soak: setup
	$(BIN)/python -m bench.bench_model_sequences --sequences $(MODEL_SEQUENCES)
