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

# The Python versions `make test-versions` runs the suite on, each that this machine has.
TEST_VERSIONS := 3.11 3.12 3.13
CODEC_DEPS := pyproject.toml setup.py runtime/codec/_wirecodec.c runtime/codec/_framecodec.c \
	runtime/codec/_columnar.c \
	runtime/codec/_codec_common.h runtime/codec/_vocabulary.h
VOCABULARY := runtime/codec/vocabulary.py

.PHONY: venv generate check imports test test-fast test-versions run bench lint typecheck clean \
	java-check pulsar peers

venv: $(STAMP)

# The install also compiles runtime/codec/_wirecodec.c, runtime/codec/_framecodec.c and
# runtime/codec/_columnar.c, the optional fast paths of the protobuf and frame codecs and of
# Spark's protobuf decoding (needs a C compiler and Python's headers;
# without them the Python codecs run, and this says so).
$(STAMP): $(CODEC_DEPS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	@$(PY) -c 'from protoframe.runtime.codec import _wirecodec, _framecodec, _columnar' \
	2>/dev/null || echo "note: the compiled codecs (runtime/codec/_wirecodec.c, \
	runtime/codec/_framecodec.c, runtime/codec/_columnar.c) did not build, so the slower \
	Python codecs run; to build them install a C compiler and Python's headers \
	(sudo apt-get install gcc python3-dev) and run make again."
	@touch $(STAMP)

# The C codecs' enums, written from the one Python definition of the layout tables' words.
runtime/codec/_vocabulary.h: $(VOCABULARY)
	$(PYTHON) $(VOCABULARY) > $@.tmp && mv $@.tmp $@

# The repository is configured like a user's project ([tool.protoframe] in pyproject.toml).
generate: $(STAMP)
	$(VENV)/bin/protoframe generate

check: $(STAMP)
	$(VENV)/bin/protoframe check
	$(PY) $(VOCABULARY) --check runtime/codec/_vocabulary.h

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

# Apache Pulsar's broker (standalone) and its dependencies, from Maven into interop/pulsar/target/lib
# (git-ignored; Maven's own cache is ~/.m2), for the tests against the real broker
# (tests/support/real_pulsar.py). Without Maven those tests skip, and this says so.
PULSAR_LIB := interop/pulsar/target/lib
pulsar: $(PULSAR_LIB)/.fetched

$(PULSAR_LIB)/.fetched: interop/pulsar/pom.xml
	@if command -v mvn >/dev/null 2>&1; then \
		cd interop/pulsar && rm -rf target/lib && mvn -B -q -Dstyle.color=never package && touch target/lib/.fetched; \
	else \
		echo "note: mvn is not installed, so the tests against Apache Pulsar skip;" \
			"install Maven (sudo apt-get install maven) and run make pulsar."; \
	fi

# The real servers the example protocols are tested against (issue #16): mariadb-server and
# rabbitmq-server from Debian's packages, installed with apt-get, so it needs root or sudo
# (.ci/install-peers says which it uses). The system services are left stopped: the tests start
# their own instances (tests/support/mariadb_server.py, rabbitmq_server.py) and skip, saying
# so, when a server is not installed. Quick when both are installed.
peers:
	.ci/install-peers

# lint-imports: the import contracts of [tool.importlinter] in pyproject.toml.
imports: $(STAMP)
	$(VENV)/bin/lint-imports

test: $(STAMP) java-check pulsar
	$(VENV)/bin/protoframe check
	$(VENV)/bin/lint-imports
	$(PY) -m mypy --strict
	$(PY) -m ruff check .
	$(PY) -m pytest

# The everyday loop (under 2 minutes): the import contracts, then no Spark, no interop peers, no
# wheel build, no fuzzing campaigns or leak checks (markers: see tests/conftest.py), a fifth of
# the random examples and of the long sweeps' cases (the hypothesis profile "fast" and ``sweep``:
# tests/support/examples.py), on two processes; mypy runs incrementally. The folders whose every
# test is Spark, interop or slow are not even collected (their imports cost each worker seconds).
test-fast: $(STAMP)
	$(VENV)/bin/protoframe check
	$(VENV)/bin/lint-imports
	$(PY) -m ruff check .
	$(PY) -m mypy --strict
	$(PY) -m pytest -q -n 2 -m "not slow and not spark and not interop" --hypothesis-profile=fast \
		--ignore=tests/pipeline --ignore=tests/interop --ignore=tests/install

# mypy --strict and pytest on each of TEST_VERSIONS that .ci/find-python finds, each in its own
# .venv-3.X with the dev extra (not spark: its tests skip). It says which versions it found and
# which it skipped, installs their environments one after another (pip writes the shared
# *.egg-info), then runs the versions' suites side by side: each is one pytest process, and most
# of a suite's time is spent waiting on sockets and peers, so two of them fit two cores. Each
# version's output goes to build/test-versions/3.X.log and is printed when all have finished; it
# fails if any run failed.
test-versions:
	@found=; skipped=; \
	for v in $(TEST_VERSIONS); do \
		if py=$$(.ci/find-python $$v); then \
			echo "test-versions: Python $$v: $$py"; found="$$found $$v"; \
		else \
			echo "test-versions: Python $$v: not found (python$$v on PATH or under" \
				"$${PYENV_ROOT:-~/.pyenv}/versions), skipped"; \
			skipped="$$skipped $$v"; \
		fi; \
	done; \
	if [ -z "$$found" ]; then echo "test-versions: none of $(TEST_VERSIONS) found"; exit 1; fi; \
	for v in $$found; do $(MAKE) --no-print-directory .venv-$$v/.installed-stamp || exit 1; done; \
	mkdir -p build/test-versions && rm -f build/test-versions/*.rc; \
	start=$$(date +%s); \
	for v in $$found; do \
		echo "test-versions: Python $$v started (build/test-versions/$$v.log)"; \
		( $(MAKE) --no-print-directory test-version-$$v > build/test-versions/$$v.log 2>&1; \
		  echo $$? > build/test-versions/$$v.rc ) & \
	done; \
	wait; \
	passed=; failed=; \
	for v in $$found; do \
		echo "test-versions: === Python $$v ==="; \
		cat build/test-versions/$$v.log; \
		if [ "$$(cat build/test-versions/$$v.rc)" = 0 ]; then passed="$$passed $$v"; \
		else failed="$$failed $$v"; fi; \
	done; \
	echo "test-versions: passed:$${passed:- none}; failed:$${failed:- none};" \
		"skipped:$${skipped:- none}; $$(( $$(date +%s) - start )) s"; \
	test -z "$$failed"

test-version-%: .venv-%/.installed-stamp
	.venv-$*/bin/python -m mypy --strict --python-version $*
	.venv-$*/bin/python -m pytest -rs

# An editable install per version, like .venv's; each builds its own compiled codecs in place
# (runtime/codec/_wirecodec.cpython-3XX-*.so: the version is in the name).
.PRECIOUS: .venv-%/.installed-stamp
.venv-%/.installed-stamp: $(CODEC_DEPS)
	@py=$$(.ci/find-python $*) || { echo "no working python$* found"; exit 1; }; \
	.venv-$*/bin/python -c 'import sys; sys.exit("%d.%d" % sys.version_info[:2] != "$*")' \
		2>/dev/null || $$py -m venv --clear .venv-$*
	.venv-$*/bin/python -m pip install --quiet --upgrade pip
	.venv-$*/bin/python -m pip install --quiet -e '.[dev]'
	@.venv-$*/bin/python -c \
	'import protoframe.runtime.codec._wirecodec, protoframe.runtime.codec._framecodec' 2>/dev/null || echo "note: the compiled codecs did not build for Python $*, so its tests of \
	them skip; to build them install a C compiler and Python $*'s headers."
	@touch $@

run: $(STAMP) generate
	$(PY) examples/pulsar_demo/demo.py

bench: $(STAMP) java-check
	$(PY) -m bench

clean:
	rm -rf $(VENV) $(TEST_VERSIONS:%=.venv-%) .mypy_cache .ruff_cache .pytest_cache .hypothesis
