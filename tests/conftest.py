"""Markers that split the suite: ``spark``, ``interop`` and ``slow``.

``make test`` runs everything; ``make test-fast`` (the everyday loop) leaves out

- ``spark``: every test that needs the spark extra: all of ``tests/pipeline/`` (its
  conftest.py), the modules of Spark rows that say so, and any test that asks for a ``spark``
  fixture (marked here, so that a new one is classified by what it uses);
- ``interop``: all of ``tests/interop/``: tests against other implementations run as peers (the
  official ``pulsar-client``, the real ``pravega`` client), and any test that asks for a real
  server of ``make peers`` (``mariadb_server``, ``rabbitmq_server``, ``websocket_server``:
  tests/support/server_fixtures.py);
- ``slow``: all of ``tests/install/`` (the wheel installed into a fresh environment), and the
  modules that say so (``pytestmark``): fuzzing campaigns, restarts under load, ``mypy`` or the
  peers run as subprocesses.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support import real_pulsar as real_pulsar_module
from tests.support.codec_modes import either_codec  # noqa: F401 (a fixture, found by its name)
from tests.support.examples import FAST_EXAMPLES
from tests.support.real_pulsar import RealPulsar
from tests.support.server_fixtures import (  # noqa: F401 (fixtures, found by their names)
    SERVER_FIXTURES,
    mariadb_server,
    rabbitmq_server,
    websocket_server,
)

# The everyday loop (make test-fast: --hypothesis-profile=fast) draws fewer examples; make test
# runs hypothesis' defaults and every count as written (tests/support/examples.py).
settings.register_profile("fast", max_examples=FAST_EXAMPLES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if any(name in getattr(item, "fixturenames", ()) for name in SERVER_FIXTURES):
            item.add_marker(pytest.mark.interop)
    # A process has one SparkContext: the tests on the standalone cluster stop the local session
    # to start theirs, so they run after every other test (a stable sort keeps their order).
    items.sort(key=lambda item: "cluster_spark" in getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the run (skipped without Java 17+), stopped at its end.

    One for all, as the Pulsar source tests always shared one: stopping and starting the
    SparkContext again per module costs seconds each time.
    """
    # Imported here: pyspark is an optional extra, and the modules that ask for a session
    # importorskip it first.
    from tests.support.spark import spark_session

    yield from spark_session("protoframe-tests")


@pytest.fixture(scope="session")
def real_pulsar(request: pytest.FixtureRequest) -> Iterator[RealPulsar]:
    """One Apache Pulsar standalone for the run (skipped with the reason when Java 17+ or the
    jars of ``make pulsar`` are missing), stopped by its pid at the end."""
    reason = real_pulsar_module.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    pulsar = real_pulsar_module.start()
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[Apache Pulsar standalone up in {pulsar.startup_seconds:.1f} s at {pulsar.url}]")
    try:
        yield pulsar
    finally:
        pulsar.stop()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate and key for localhost and 127.0.0.1 (TLS tests)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60)
    return cert, key



@pytest.fixture(scope="session")
def spark_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Spark standalone master and two workers on 127.0.0.1 (tests/support/spark_cluster.py),
    for the run's last tests; stopped by their pids at the end (a watchdog stops them should
    pytest die first). Skipped without Java 17+."""
    pytest.importorskip("pyspark")
    from tests.support import spark_cluster as spark_cluster_module
    from tests.support.spark import java_missing

    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    cluster = spark_cluster_module.start()
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[Spark standalone cluster up in {cluster.startup_seconds:.1f} s at "
              f"{cluster.master_url}]")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def cluster_spark(spark_cluster: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A SparkSession on ``spark_cluster`` (two one-core executors, each its own JVM), with
    ``format("pulsar")`` registered. It stops the local session first: these tests run last."""
    from pyspark.sql import SparkSession

    from protoframe.pipeline.pulsar_source import register
    from tests.support.spark_cluster import session

    active = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if active is not None:
        active.stop()
    started = time.monotonic()
    spark = session(spark_cluster, "protoframe-cluster-tests")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[Spark application on the cluster, executors up in "
              f"{time.monotonic() - started:.1f} s]")
    register(spark)
    try:
        yield spark
    finally:
        spark.stop()
