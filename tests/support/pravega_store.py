"""Running a test scenario against a fresh embedded Pravega segment store on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from protoframe.clients.pravega.store import EmbeddedSegmentStore

Scenario = Callable[[EmbeddedSegmentStore], Awaitable[None]]


def run_in_store(scenario: Scenario, timeout: float = 10.0, **options: Any) -> None:
    """Start a store with ``options``, run ``scenario`` on it within ``timeout`` s, stop it."""

    async def main() -> None:
        async with EmbeddedSegmentStore(**options) as store:
            await asyncio.wait_for(scenario(store), timeout)

    asyncio.run(main())
