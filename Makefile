# make demo: set everything up and run a short A/B comparison on this machine.
# make test: the test suite (installs what it needs first).
VENV   ?= .venv
PYTHON ?= python3
PY      = $(VENV)/bin/python

.PHONY: demo test lint deps clean cli-docs

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,fleet]'
	$(PY) scripts/install-share.py $(VENV)   # man page, completions: no data files for -e
	$(PY) -m stallbench.workloads.native
	touch $@

deps:
	./scripts/install-system-deps.sh

demo: $(VENV)/.installed
	$(VENV)/bin/stallbench demo

test: $(VENV)/.installed deps
	$(VENV)/bin/ruff check src tests benchmarks
	PY=$(PY) scripts/run-tests.sh

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks

cli-docs: $(VENV)/.installed
	$(PY) scripts/gen-cli-docs.py
	$(PY) scripts/install-share.py $(VENV)

clean:
	rm -rf $(VENV) build src/*.egg-info
