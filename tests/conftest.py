"""Markers that split the suite: ``spark``, ``interop`` and ``slow``.

``make test`` runs everything; ``make test-fast`` (the everyday loop) leaves out

- ``spark``: every test that needs the spark extra: it starts a Spark session (it asks for
  a ``spark`` fixture) or lives in a module of Spark schemas, rows and sources;
- ``interop``: tests against other implementations run as peers: the official
  ``pulsar-client`` and the real ``pravega`` client;
- ``slow``: the wheel built and installed into a fresh environment, fuzzing campaigns,
  restarts under load, and ``mypy`` or the peers run as subprocesses.

Markers are given here, from fixtures and module names, so that a new Spark or interop test is
classified by what it uses rather than by remembering a decorator.
"""

from __future__ import annotations

import pytest

SPARK_MODULES = frozenset({
    "test_capture_pipeline",
    "test_pulsar_positions",
    "test_spark_pulsar_sink",
    "test_spark_pulsar_source",
    "test_spark_pulsar_stream",
    "test_spark_rows",
    "test_spark_rows_protocols",
})
SLOW_MODULES = frozenset({
    "test_faults",
    "test_frame_fuzz",
    "test_generated_output_valid",
    "test_installed_wheel",
    "test_nested_enums",
    "test_peer_runners",
    "test_pravega_fuzz",
    "test_spec_fuzz",
    "test_tank_fuzz",
    "test_tubemq_fuzz",
    "test_typecheck",
})
INTEROP_MODULES = frozenset({
    "test_broker_official",
    "test_broker_restart",
    "test_client_interop",
    "test_pravega_real_client",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        owner = getattr(item, "module", None)
        module = owner.__name__.rsplit(".", 1)[-1] if owner is not None else ""
        if module in SPARK_MODULES or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if module in INTEROP_MODULES:
            item.add_marker(pytest.mark.interop)
