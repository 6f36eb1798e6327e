"""Serving a protocol: one listening socket, one ``Connection`` and one ``Session`` a client.

``serve(host, port, session_factory)`` listens and, for each accepted connection, makes a
session and a ``Connection`` driving the session's ``protocol``: the connection does the I/O
(write coalescing, back-pressure, keepalive, abort, the close fan-out) and the session the
protocol's meaning. A session sees ``connection_made`` once, ``frame_received`` for every
frame and ``connection_lost`` once; a frame that does not decode, or a protocol violation,
closes that connection only (logged with its reason) and leaves the server running.

``limits`` (``runtime.io.limits.ConnectionLimits``) bound what clients can hold: how many
connections, how long a handshake and a frame may take, how many bytes of unfinished frames one
connection and all of them may park; a connection over a limit is closed, the others go on.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from protoframe.runtime.errors import ChecksumFailure, ConnectionClosed
from protoframe.runtime.io.connection import Connection, FrameProtocol
from protoframe.runtime.io.keepalive import KeepalivePolicy
from protoframe.runtime.io.limits import (
    ConnectionGuard,
    ConnectionLimits,
    ReceiveBudget,
    partial_bytes_of,
)

__all__ = ["ConnectionLimits", "Server", "Session", "serve"]

log = logging.getLogger(__name__)

F = TypeVar("F")
S = TypeVar("S", bound="Session[Any]")


class Session(Generic[F]):
    """The server's side of one connection; ``connection`` is set before any call below."""

    connection: Connection[F]

    def __init__(self, protocol: FrameProtocol[F]) -> None:
        self.protocol = protocol

    def connection_made(self) -> None:
        """The client connected (a greeting goes here)."""

    def frame_received(self, frame: F) -> None:
        """One frame from the client."""

    def corrupt_frame(self, frame: F, exc: ChecksumFailure) -> None:
        """A frame whose checksum failed; by default the connection closes."""
        self.connection.abort(exc)

    def connection_lost(self, reason: ConnectionClosed) -> None:
        """The connection ended (release what the session held)."""

    @property
    def established(self) -> bool:
        """The protocol's handshake is done (``ConnectionLimits.handshake_timeout`` stops
        applying); by default, once a whole frame has arrived."""
        return self.connection.frames_received > 0


class _Served(Connection[F]):
    def __init__(self, session: Session[F], keepalive: KeepalivePolicy[F] | None,
                 name: str, guard: ConnectionGuard | None = None) -> None:
        super().__init__(session.protocol, session.frame_received,
                         on_corrupt_frame=session.corrupt_frame, keepalive=keepalive,
                         keepalive_interval=None, name=name)
        self.session = session
        self.guard = guard
        session.connection = self

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.name = f"{self.name} {peer[0]}:{peer[1]}"
        if self.guard is not None:
            self.guard.name = self.name
            self.guard.start(self)
        self.session.connection_made()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.guard is not None:
            self.guard.received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.guard is not None:
            self.guard.stop()
        super().connection_lost(exc)


class _Refused(asyncio.Protocol):
    """A connection over ``max_connections``: closed as soon as it is accepted."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.server.refused += 1
        log.warning("%s: refusing a connection from %s: %d connections open, the limit",
                    self.server.name, transport.get_extra_info("peername"),
                    len(self.server.sessions))
        assert isinstance(transport, asyncio.Transport)
        transport.abort()


class Server(Generic[S]):
    """What ``serve`` returns: the listening socket and the sessions of open connections."""

    def __init__(self, session_factory: Callable[[], S],
                 keepalive: Callable[[S], KeepalivePolicy[Any] | None] | None,
                 name: str, limits: ConnectionLimits | None = None) -> None:
        self._session_factory = session_factory
        self._keepalive = keepalive
        self.name = name
        self.limits = limits or ConnectionLimits()
        self.budget = ReceiveBudget(self.limits.max_partial_bytes_total)
        self.sessions: set[S] = set()
        self.refused = 0  # connections closed at once for being over max_connections
        self.host = ""
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def _guard(self, session: S) -> ConnectionGuard | None:
        limits = self.limits
        if not (limits.handshake_timeout or limits.frame_timeout or limits.max_partial_bytes
                or limits.max_partial_bytes_total):
            return None
        return ConnectionGuard(limits, self.budget, partial_bytes_of(session.protocol),
                               lambda: session.established, self.name)

    def _accept(self) -> asyncio.Protocol:
        limit = self.limits.max_connections
        if limit and len(self.sessions) >= limit:
            return _Refused(self)
        session = self._session_factory()
        keepalive = self._keepalive(session) if self._keepalive is not None else None
        connection: Connection[Any] = _Served(session, keepalive, self.name,
                                              self._guard(session))
        self.sessions.add(session)

        def ended(reason: ConnectionClosed) -> None:
            self.sessions.discard(session)
            session.connection_lost(reason)

        connection.on_close(ended)
        return connection

    async def _listen(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._accept, host, port, ssl=ssl_context)
        self.host = host
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("%s listening on %s:%d", self.name, host, self.port)

    async def serve_forever(self) -> None:
        """Wait until the server is stopped (or the waiting task cancelled)."""
        assert self._server is not None, "stopped"
        await self._server.serve_forever()

    def abort_all(self, reason: BaseException | None = None) -> None:
        """Close every connection at once (the server keeps listening)."""
        for session in list(self.sessions):
            session.connection.abort(reason)

    async def stop(self, reason: BaseException | None = None) -> None:
        """Stop listening and close every connection at once."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        self.abort_all(reason or ConnectionClosed(f"{self.name}: shutting down"))
        await server.wait_closed()


async def serve(host: str, port: int, session_factory: Callable[[], S], *,
                keepalive: Callable[[S], KeepalivePolicy[Any] | None] | None = None,
                name: str = "server", ssl_context: ssl.SSLContext | None = None,
                limits: ConnectionLimits | None = None) -> Server[S]:
    """Listen on ``host:port`` (0: a free port, in ``Server.port``); a session a connection.

    ``keepalive(session)``, when given, makes the connection's keepalive policy (None: none);
    ``limits`` bound the connections (see ``runtime.io.limits``; default: none).
    """
    server = Server(session_factory, keepalive, name, limits)
    await server._listen(host, port, ssl_context)
    return server
