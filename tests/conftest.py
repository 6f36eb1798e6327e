"""Markers that split the suite: ``spark``, ``interop`` and ``slow``.

``make test`` runs everything; ``make test-fast`` (the everyday loop) leaves out

- ``spark``: every test that starts a Spark session (it asks for a ``spark`` fixture, or
  lives in a module that only drives Spark);
- ``interop``: tests against other implementations run as peers: the official
  ``pulsar-client`` and the real ``pravega`` client;
- ``slow``: the wheel built and installed into a fresh environment (marked in its module).

Markers are given here, from fixtures and module names, so that a new Spark or interop test is
classified by what it uses rather than by remembering a decorator.
"""

from __future__ import annotations

import pytest

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
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if module in INTEROP_MODULES:
            item.add_marker(pytest.mark.interop)
