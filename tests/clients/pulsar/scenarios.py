"""Running a client scenario against a fresh embedded broker, or against Apache Pulsar itself,
for the Pulsar client tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from protoframe.clients.pulsar.broker import EmbeddedBroker
from tests.support.real_pulsar import RealPulsar

Scenario = Callable[[str, EmbeddedBroker], Awaitable[None]]


class Broker(Protocol):
    """What a scenario that runs on both brokers may ask of its broker."""

    def create_partitioned_topic(self, topic: str, partitions: int) -> str: ...

    def update_partitioned_topic(self, topic: str, partitions: int) -> str: ...


BrokerScenario = Callable[[str, Broker], Awaitable[None]]

# The real broker's runs are interop (make test-fast leaves them out): they need the standalone
# of tests/support/real_pulsar.py, a minute to start.
BROKERS = [pytest.param("embedded", id="embedded"),
           pytest.param("pulsar", id="pulsar", marks=pytest.mark.interop)]


def run(scenario: Scenario, timeout: float = 30, **broker_options: Any) -> None:
    """Start a broker on a free port of 127.0.0.1, run ``scenario(url, broker)`` within
    ``timeout`` seconds in a new event loop, and stop the broker whatever happens."""

    async def main() -> None:
        broker = EmbeddedBroker(port=0, **broker_options)
        url = await broker.start()
        try:
            await asyncio.wait_for(scenario(url, broker), timeout)
        finally:
            await broker.stop()

    asyncio.run(main())


@dataclass
class Target:
    """The broker a parametrized test runs on: ``embedded`` (fresh per scenario) or ``pulsar``
    (the session's standalone, its default namespace emptied before each scenario)."""

    name: str
    real: RealPulsar | None = None

    def run(self, scenario: BrokerScenario, timeout: float = 30) -> None:
        if self.real is None:
            run(scenario, timeout)
            return
        real = self.real
        real.delete_all_topics()

        async def main() -> None:
            # The real broker persists through a bookie on a loaded machine: more time.
            await asyncio.wait_for(scenario(real.url, real), timeout * 2)

        asyncio.run(main())
