"""The embedded segment store: ``runtime.io.server.serve`` with a ``StoreSession`` a connection.

Each connection drives the generated ``PravegaProtocol(server=True)``; a frame that does not
decode, or a command that breaks a rule, closes that connection (logged with its reason) and
leaves the server and every other connection running.
"""

from __future__ import annotations

import logging
import os
from collections import Counter, deque
from pathlib import Path
from types import TracebackType

from protoframe.generated.pravega import frames
from protoframe.generated.pravega.machines import PravegaProtocol, command_of
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.connection import Connection
from protoframe.runtime.io.server import Server, Session, serve

from ..errors import PravegaError
from .segments import SegmentTable
from .session import DEFAULT_READ_SIZE, StoreSession
from .tables import TableStore

__all__ = ["EmbeddedSegmentStore"]

log = logging.getLogger(__name__)


class _Served(Session[frames.Frame]):
    """One connection: its commands counted, answered by a ``StoreSession``."""

    def __init__(self, store: EmbeddedSegmentStore) -> None:
        super().__init__(PravegaProtocol(server=True, max_frame_size=store.max_frame_size))
        self.store = store
        self.session = StoreSession(store.table, max_read_size=store.max_read_size,
                                    tables=store.tables, max_frame_size=store.max_frame_size)

    def frame_received(self, frame: frames.Frame) -> None:
        self.store.received[command_of(frame)[0]] += 1
        try:
            replies = self.session.handle(frame)
        except PravegaError as exc:
            self.connection.abort(exc)
            return
        self.connection.write_many(replies)
        if self.session.close_reason is not None:
            self.connection.close(self.session.close_reason)

    def connection_lost(self, reason: ConnectionClosed) -> None:
        self.store.closed_reasons.append(reason)


class EmbeddedSegmentStore:
    """A segment store in the running event loop: ``async with EmbeddedSegmentStore() as s``.

    ``port=0`` picks a free port (``start`` returns ``(host, port)``). ``directory`` keeps
    segments and table segments on disk across restarts; without it they live in memory.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 directory: str | os.PathLike[str] | None = None,
                 max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE,
                 max_read_size: int = DEFAULT_READ_SIZE) -> None:
        self.host = host
        self.port = port
        self.table = SegmentTable(directory)
        # Table segments live beside the stream segments, in a folder of their own.
        self.tables = TableStore(Path(directory) / "tables" if directory is not None else None)
        self.max_frame_size = max_frame_size
        self.max_read_size = max_read_size
        # Why recent connections ended, oldest first (bounded: a server may run for long).
        self.closed_reasons: deque[BaseException] = deque(maxlen=64)
        self.received: Counter[str] = Counter()  # commands received, by name: what peers use
        self._server: Server[_Served] | None = None

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` to connect to (the port is known after ``start``)."""
        return self.host, self.port

    @property
    def connections(self) -> set[Connection[frames.Frame]]:
        """The open connections."""
        sessions = self._server.sessions if self._server is not None else ()
        return {served.connection for served in sessions}

    async def start(self) -> tuple[str, int]:
        """Listen and return the address."""
        self._server = await serve(self.host, self.port, lambda: _Served(self),
                                   name="segment store")
        self.port = self._server.port
        return self.address

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop()

    async def __aenter__(self) -> EmbeddedSegmentStore:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()
