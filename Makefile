PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test bench demo clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: setup
	rm -rf demo-data/flights
	$(BIN)/python -m engine demo demo-data/flights
	$(BIN)/python -m engine compaction schedule demo-data/flights --strategy event_time \
	  --threshold 2013-01-20T00:00:00Z
	$(BIN)/python -m engine compaction run demo-data/flights
	$(BIN)/python -m engine freshness demo-data/flights
	$(BIN)/python -m engine metrics demo-data/flights

test: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile tests

bench: setup
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) demo-data
