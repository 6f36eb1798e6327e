"""Markers that split the suite: ``spark``, ``interop`` and ``slow``.

``make test`` runs everything; ``make test-fast`` (the everyday loop) leaves out

- ``spark``: every test that needs the spark extra: all of ``tests/pipeline/`` (its
  conftest.py), the modules of Spark rows that say so, and any test that asks for a ``spark``
  fixture (marked here, so that a new one is classified by what it uses);
- ``interop``: all of ``tests/interop/``: tests against other implementations run as peers (the
  official ``pulsar-client``, the real ``pravega`` client);
- ``slow``: all of ``tests/install/`` (the wheel installed into a fresh environment), and the
  modules that say so (``pytestmark``): fuzzing campaigns, restarts under load, ``mypy`` or the
  peers run as subprocesses.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
