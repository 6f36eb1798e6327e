"""The embedded segment store: an asyncio TCP server whose connections run ``StoreSession``s.

Each connection is a ``runtime.io.connection.Connection`` driving the generated
``PravegaProtocol(server=True)``; a frame that does not decode, or a command that breaks a
rule, closes that connection (logged with its reason) and leaves the server and every other
connection running.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter, deque
from types import TracebackType

from protoframe.generated.pravega import frames
from protoframe.generated.pravega.machines import PravegaProtocol, command_of
from protoframe.runtime.io.connection import Connection

from ..errors import PravegaError
from .segments import SegmentTable
from .session import DEFAULT_READ_SIZE, StoreSession

__all__ = ["EmbeddedSegmentStore"]

log = logging.getLogger(__name__)


class EmbeddedSegmentStore:
    """A segment store in the running event loop: ``async with EmbeddedSegmentStore() as s``.

    ``port=0`` picks a free port (``start`` returns ``(host, port)``). ``directory`` keeps
    segments on disk across restarts; without it they live in memory.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 directory: str | os.PathLike[str] | None = None,
                 max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE,
                 max_read_size: int = DEFAULT_READ_SIZE) -> None:
        self.host = host
        self.port = port
        self.table = SegmentTable(directory)
        self.max_frame_size = max_frame_size
        self.max_read_size = max_read_size
        self.connections: set[Connection[frames.Frame]] = set()
        # Why recent connections ended, oldest first (bounded: a server may run for long).
        self.closed_reasons: deque[BaseException] = deque(maxlen=64)
        self.received: Counter[str] = Counter()  # commands received, by name: what peers use
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` to connect to (the port is known after ``start``)."""
        return self.host, self.port

    async def start(self) -> tuple[str, int]:
        """Listen and return the address."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("segment store listening on %s:%d", self.host, self.port)
        return self.address

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.abort()
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> EmbeddedSegmentStore:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    def _accept(self) -> Connection[frames.Frame]:
        session = StoreSession(self.table, max_read_size=self.max_read_size)
        protocol = PravegaProtocol(server=True, max_frame_size=self.max_frame_size)
        connection: Connection[frames.Frame] = Connection(
            protocol, keepalive_interval=None, name="segment store connection")

        def on_frame(frame: frames.Frame) -> None:
            self.received[command_of(frame)[0]] += 1
            try:
                replies = session.handle(frame)
            except PravegaError as exc:
                connection.abort(exc)
                return
            connection.write_many(replies)
            if session.close_reason is not None:
                connection.close(session.close_reason)

        def on_close(reason: BaseException) -> None:
            self.connections.discard(connection)
            self.closed_reasons.append(reason)

        connection.on_frame = on_frame
        connection.on_close(on_close)
        self.connections.add(connection)
        return connection
