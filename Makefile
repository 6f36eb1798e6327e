# protoframe developer commands. Everything installs into .venv; nothing is needed by hand
# beyond python3 (3.11+) with venv, and Java 17+ for the Spark tests and benchmark.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
JAVA_MIN := 17
JAVA := $(if $(JAVA_HOME),$(JAVA_HOME)/bin/java,java)
# Spark binds to loopback only (no hostname lookups, nothing listening outside).
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: venv generate check test test-fast run bench lint typecheck clean java-check

venv: $(STAMP)

# The install also compiles runtime/_wirecodec.c and runtime/_framecodec.c, the optional fast
# paths of the protobuf and frame codecs (needs a C compiler and Python's headers; without them
# the Python codecs run, and this says so).
$(STAMP): pyproject.toml setup.py runtime/_wirecodec.c runtime/_framecodec.c runtime/_codec_common.h
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	@$(PY) -c 'import protoframe.runtime._wirecodec, protoframe.runtime._framecodec' 2>/dev/null || echo "note: the \
	compiled codecs (runtime/_wirecodec.c, runtime/_framecodec.c) did not build, so the slower \
	Python codecs run; to build them install a C compiler and Python's headers \
	(sudo apt-get install gcc python3-dev) and run make again."
	@touch $(STAMP)

# The repository is configured like a user's project ([tool.protoframe] in pyproject.toml).
generate: $(STAMP)
	$(VENV)/bin/protoframe generate

check: $(STAMP)
	$(VENV)/bin/protoframe check

typecheck: $(STAMP)
	$(PY) -m mypy --strict

lint: $(STAMP)
	$(PY) -m ruff check .

# Spark (pyspark 4) runs on Java 17 or newer: stop early, saying how to install it.
java-check:
	@v=$$($(JAVA) -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1); \
	if [ -z "$$v" ] || [ "$$v" -lt $(JAVA_MIN) ]; then \
		echo "Spark needs Java $(JAVA_MIN) or newer (found: $${v:-no java})."; \
		echo "Install it with:  sudo apt-get install openjdk-17-jre-headless"; \
		echo "(or point JAVA_HOME at a JDK/JRE 17+)"; \
		exit 1; \
	fi

test: $(STAMP) java-check
	$(VENV)/bin/protoframe check
	$(PY) -m mypy --strict
	$(PY) -m ruff check .
	$(PY) -m pytest

# The everyday loop (under 2 minutes): no Spark, no interop peers, no wheel build, no fuzzing
# campaigns (markers from tests/conftest.py), on two processes; mypy runs incrementally.
test-fast: $(STAMP)
	$(VENV)/bin/protoframe check
	$(PY) -m ruff check .
	$(PY) -m mypy --strict
	$(PY) -m pytest -q -n 2 -m "not slow and not spark and not interop"

run: $(STAMP) generate
	$(PY) -m protoframe.clients.pulsar.demo

bench: $(STAMP) java-check
	$(PY) -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
