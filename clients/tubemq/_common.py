"""Small helpers the producer and consumer share."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import logging
import os
import socket
import zlib
from collections.abc import Awaitable, Callable

from protoframe.clients.tubemq.connection import TubeMQConnection

log = logging.getLogger("protoframe.clients.tubemq")

_ids = itertools.count(1)


def new_client_id(kind: str) -> str:
    """A client id unique to this process: host, pid, a counter and the client's kind."""
    return f"{socket.gethostname()}-{os.getpid()}-{next(_ids)}-{kind}"


def int32(value: int) -> int:
    """``value`` (an unsigned 32-bit number) as Java's int holds it."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def checksum(data: bytes) -> int:
    """The CRC-32 a producer sends with a message (as a signed 32-bit number)."""
    return int32(zlib.crc32(data))


def local_ipv4(conn: TubeMQConnection) -> int:
    """This side's IPv4 address on ``conn`` as a signed 32-bit number (0 if not IPv4)."""
    transport = conn.conn.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    try:
        return int32(int(ipaddress.IPv4Address(sockname[0]))) if sockname else 0
    except ValueError:
        return 0


class Heartbeat:
    """Calls ``beat`` every ``interval`` seconds until stopped; failures are logged."""

    def __init__(self, name: str, interval: float | None,
                 beat: Callable[[], Awaitable[object]]) -> None:
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        if interval:
            self._task = asyncio.get_running_loop().create_task(self._run(name, interval, beat))

    async def _run(self, name: str, interval: float,
                   beat: Callable[[], Awaitable[object]]) -> None:
        # The flag, not only the cancel, ends the loop: on Python 3.11 a wait_for inside
        # ``beat`` whose awaitable completes just as the cancel arrives returns normally,
        # dropping the cancel, and ``stop`` would then wait for ever.
        while not self._stopping:
            await asyncio.sleep(interval)
            if self._stopping:
                break
            try:
                await beat()
            except Exception as exc:
                log.warning("%s: heartbeat failed: %s", name, exc)

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
