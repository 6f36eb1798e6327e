"""One open connection per address, shared by everyone who asks for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from protoframe.runtime.errors import ConnectionClosed

__all__ = ["ConnectionPool"]

K = TypeVar("K", bound=Hashable)


def _consume_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class _Poolable(Protocol):
    @property
    def is_open(self) -> bool: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=_Poolable)


class ConnectionPool(Generic[K, C]):
    """One connection per key (an address), shared by everyone who asks for it.

    ``connect(key)`` makes a new connection; callers asking for the same key while it is
    being made share its result. A connection that has closed is replaced on the next ``get``.
    """

    def __init__(self, connect: Callable[[K], Awaitable[C]]) -> None:
        self._connect = connect
        self._connections: dict[K, C] = {}
        self._connecting: dict[K, asyncio.Future[C]] = {}
        self._closed = False

    def __len__(self) -> int:
        return sum(1 for c in self._connections.values() if c.is_open)

    def connections(self) -> list[C]:
        return [c for c in self._connections.values() if c.is_open]

    def peek(self, key: K) -> C | None:
        """The open connection for ``key``, if there is one (never connects)."""
        conn = self._connections.get(key)
        return conn if conn is not None and conn.is_open else None

    async def get(self, key: K) -> C:
        if self._closed:
            raise ConnectionClosed("connection pool is closed")
        conn = self._connections.get(key)
        if conn is not None and conn.is_open:
            return conn
        pending = self._connecting.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._make(key))
            # Read the outcome even if every caller gave up waiting (no "never retrieved").
            pending.add_done_callback(_consume_outcome)
            self._connecting[key] = pending
        return await asyncio.shield(pending)

    async def _make(self, key: K) -> C:
        try:
            conn = await self._connect(key)
            if self._closed:
                conn.close()
                raise ConnectionClosed("connection pool is closed")
            self._connections[key] = conn
            return conn
        finally:
            self._connecting.pop(key, None)

    def discard(self, key: K, conn: C | None = None) -> None:
        """Forget the connection for ``key`` (only if it is ``conn``, when given)."""
        current = self._connections.get(key)
        if current is not None and (conn is None or current is conn):
            del self._connections[key]

    def close(self) -> None:
        """Close every connection; later ``get`` calls fail."""
        self._closed = True
        for pending in self._connecting.values():
            pending.cancel()
        conns, self._connections = list(self._connections.values()), {}
        for conn in conns:
            conn.close()
