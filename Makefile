# protoframe developer commands. Everything installs into .venv; nothing is needed by hand
# beyond python3 (3.11+) with venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv generate check test run bench lint typecheck clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

generate: $(STAMP)
	$(PY) -m generator generate

check: $(STAMP)
	$(PY) -m generator --check

typecheck: $(STAMP)
	$(PY) -m mypy --strict

lint: $(STAMP)
	$(PY) -m ruff check .

test: $(STAMP)
	$(PY) -m generator --check
	$(PY) -m mypy --strict
	$(PY) -m ruff check .
	$(PY) -m pytest

run: $(STAMP) generate
	$(PY) -m clients.pulsar.demo

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
