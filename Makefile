# Set-up and entry points.  `make demo` runs the demo pipeline, `make test` the whole suite;
# both create the virtual environment in .venv from pyproject.toml on first use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

.PHONY: demo test lint bench
demo: $(STAMP)
	$(VENV)/bin/python examples/tpch/run_demo.py

test: $(STAMP)
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/python -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench examples

bench: $(STAMP)
	$(VENV)/bin/pip install --quiet -e '.[bench]'
	$(VENV)/bin/python -m bench.tpch.run
