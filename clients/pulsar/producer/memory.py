"""``MemoryLimit``: the payload bytes of pending sends, shared by every producer of a client.

The client's ``memory_limit_bytes``, as the official clients' memory limit controller: a send
reserves its (uncompressed) size until its receipt or failure releases it. A send that would
go over the limit waits (``block_if_queue_full``) or fails with ``MemoryBufferIsFull``. A
single message larger than the whole limit still goes when nothing else is reserved, or it
could never be sent.
"""

from __future__ import annotations

import asyncio

__all__ = ["MemoryLimit"]


class MemoryLimit:
    """Bytes reserved by pending sends, at most ``limit`` of them (see the module docstring)."""

    __slots__ = ("limit", "used", "_waiters")

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError("a memory limit must be positive (0 means none: make no MemoryLimit)")
        self.limit = limit
        self.used = 0
        self._waiters: list[asyncio.Future[None]] = []

    def __repr__(self) -> str:
        return f"<MemoryLimit {self.used}/{self.limit} bytes>"

    def has_room(self, size: int) -> bool:
        return self.used == 0 or self.used + size <= self.limit

    def try_reserve(self, size: int) -> bool:
        if not self.has_room(size):
            return False
        self.used += size
        return True

    def force_reserve(self, size: int) -> None:
        """Reserve even over the limit (a send that was told to block but cannot wait)."""
        self.used += size

    def release(self, size: int) -> None:
        self.used = max(self.used - size, 0)
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def wait_for_room(self, size: int) -> None:
        """Return once ``size`` more bytes fit (each release wakes every waiter to look)."""
        while not self.has_room(size):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
