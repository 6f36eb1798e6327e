"""What a producer or consumer may ask of the client that made it, and nothing more.

A ``Session`` finds the connection for a topic (LOOKUP, then the pooled connection to the
broker it names), carries the timeouts and retry policies, and lets a closed producer or
consumer be forgotten by the client. Producers and consumers hold a session instead of the
``PulsarClient``, so they depend on these few things rather than on the client's internals
(and ``client`` can import them without a cycle).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.lookup import LookupService
from protoframe.runtime.io.retry import RetryPolicy

__all__ = ["RECONNECT_RETRY", "Session", "create_retry_policy"]

# Reconnecting after a lost connection never gives up by itself (close() stops it): a broker
# that comes back after minutes gets its producers and consumers back.
RECONNECT_RETRY = RetryPolicy(initial_delay=0.1, max_delay=30.0, timeout=math.inf)


def create_retry_policy(operation_timeout: float) -> RetryPolicy:
    """The default policy for creating a producer or subscribing: transient failures are tried
    again until the operation timeout."""
    return RetryPolicy(initial_delay=0.1, max_delay=2.0, timeout=max(operation_timeout, 1e-6))


class Session:
    """A client's services for its producers and consumers (see the module docstring)."""

    def __init__(self, lookup: LookupService,
                 connect: Callable[[str, str], Awaitable[ClientConnection]], *,
                 operation_timeout: float, forget: Callable[[object], None],
                 create_retry: RetryPolicy | None = None,
                 reconnect_retry: RetryPolicy | None = None) -> None:
        self._lookup = lookup
        self._connect = connect
        self._forget = forget
        self.operation_timeout = operation_timeout
        self.create_retry = create_retry if create_retry is not None \
            else create_retry_policy(operation_timeout)
        self.reconnect_retry = reconnect_retry if reconnect_retry is not None \
            else RECONNECT_RETRY

    async def connection_for(self, topic: str) -> ClientConnection:
        """The connection to the broker that serves ``topic`` now."""
        address = await self._lookup.find_broker(topic)
        return await self._connect(address.logical, address.physical)

    def forget(self, handle: object) -> None:
        """``handle`` (a ``Producer`` or ``Consumer``) is closed: the client no longer closes
        it on its own close."""
        self._forget(handle)
