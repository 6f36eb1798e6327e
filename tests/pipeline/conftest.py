"""Everything here needs the spark extra (pyspark, pyarrow; most of it a Spark session and
Java 17+): marked ``spark``, which ``make test-fast`` leaves out.

The Pulsar source and sink tests share the embedded broker and a session with ``format("pulsar")``
registered; the capture tests get the same session (registering changes nothing for them).
``pulsar_service`` is the broker a data source test reads and writes: the embedded one, and for
the tests marked ``ON_BOTH_BROKERS`` also the session's Apache Pulsar standalone (``real_pulsar``
in tests/conftest.py; those runs are ``interop``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pulsar.broker import BrokerThread
from tests.support.markers import mark_folder
from tests.support.pulsar_service import PulsarService
from tests.support.real_pulsar import RealPulsar


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.spark)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    """The embedded Pulsar broker on its own thread (Spark's tasks connect from other threads)."""
    with BrokerThread() as thread:
        yield thread


@pytest.fixture
def pulsar_service(request: pytest.FixtureRequest) -> PulsarService:
    """The broker a data source test runs on: the module's embedded broker, or, for the tests
    marked ``ON_BOTH_BROKERS`` (tests/support/pulsar_service.py), also the session's Apache
    Pulsar standalone (skipped with the reason where it cannot start)."""
    if getattr(request, "param", "embedded") == "embedded":
        broker: BrokerThread = request.getfixturevalue("broker")
        return PulsarService.of_embedded(broker)
    real: RealPulsar = request.getfixturevalue("real_pulsar")
    return PulsarService.of_real(real)


@pytest.fixture(scope="module")
def spark(spark: Any) -> Any:
    """tests/conftest.py's session, with the Pulsar data source registered."""
    from protoframe.pipeline.pulsar_source import register

    register(spark)
    return spark
