# Set-up and entry points.  `make demo` runs the demo pipeline, `make test` the whole suite;
# both create the virtual environment in .venv from pyproject.toml on first use, and compile
# the modules setup.py lists again when a source has changed since (`make build`).
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
BUILT := $(VENV)/.compiled
SOURCES := $(wildcard src/upkeep/*.py src/upkeep/*/*.py src/upkeep/*.pxd src/upkeep/*/*.pxd)

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev,spark]'
	touch $(STAMP) $(BUILT)

# Cython recompiles only the listed modules whose source is newer than their build.
$(BUILT): $(STAMP) $(SOURCES)
	$(VENV)/bin/python setup.py --quiet build_ext --inplace
	touch $(BUILT)

# The status page's test drives Debian's chromium (headless, through Playwright).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null

.PHONY: build demo test lint bench
build: $(BUILT)

demo: $(BUILT)
	$(VENV)/bin/python examples/tpch/run_demo.py

test: $(BUILT) $(CHROMIUM)
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/python -m pytest -n auto --dist load --durations=40

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench examples

bench: $(BUILT)
	$(VENV)/bin/pip install --quiet -e '.[bench]'
	$(VENV)/bin/python -m bench.tpch.run
