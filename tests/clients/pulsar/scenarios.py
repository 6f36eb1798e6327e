"""Running a client scenario against a fresh embedded broker, for the Pulsar client tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from protoframe.clients.pulsar.broker import EmbeddedBroker

Scenario = Callable[[str, EmbeddedBroker], Awaitable[None]]


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
