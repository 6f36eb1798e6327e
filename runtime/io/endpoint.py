"""A client's end of one connection: the ``Connection``, the generated requests on it, and
where the frames that answer no request go.

Every protocol client needs the same four things: a ``Connection`` driving the generated
``*Protocol``, the generated ``*Requests`` sending over it, the requests failing when the
connection ends, and each received frame offered to the requests first and to the client's
listeners when it answers none. ``Endpoint`` does them once. It hands the requests the command
the protocol's machines decoded already (``protocol.command(frame)``), so no body is decoded
twice; a frame whose body cannot be read closes the connection.

Two hooks let a client keep its own paths without rewiring the rest. ``route`` gets every frame
before the requests do; it handles the frames it routes itself and hands the others on to
``Endpoint.dispatch``: a client whose busiest frames answer no request (messages pushed to a
consumer, receipts of sends) sends them where they go without a request lookup, and without a
call layer of the endpoint's in front (``python -m bench client``: the Pulsar client's MESSAGE
and SEND_RECEIPT frames). ``on_corrupt_frame`` gets a frame whose checksum failed (the
connection reads on after it), for a client that tells its owner which message was lost.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from protoframe.runtime.errors import ChecksumFailure, ConnectionClosed, DecodeError
from protoframe.runtime.io.connection import Connection, FrameProtocol
from protoframe.runtime.io.keepalive import KeepalivePolicy

__all__ = ["CommandProtocol", "Endpoint", "Requests"]

log = logging.getLogger(__name__)

F = TypeVar("F")
F_contra = TypeVar("F_contra", contravariant=True)
R = TypeVar("R", bound="Requests[Any]")


class CommandProtocol(FrameProtocol[F], Protocol[F]):
    """A generated ``*Protocol``: a ``FrameProtocol`` that names a received frame's command."""

    def command(self, frame: F) -> tuple[str, Any]: ...


class Requests(Protocol[F_contra]):
    """What ``Endpoint`` needs of a generated ``*Requests`` object."""

    def handle_frame(self, frame: F_contra, command: tuple[str, Any] | None = None) -> bool: ...

    def connection_lost(self, exc: BaseException) -> None: ...


class Endpoint(Generic[F, R]):
    """``connection`` driving ``protocol``, and ``requests = make_requests(connection)`` on it.

    Each received frame the keepalive policy did not take goes to ``route`` when there is one,
    which passes the frames it does not take to ``dispatch``; ``dispatch`` offers a frame to the
    requests, and the frames no request waits for go to the listeners added with
    ``add_listener``, in order; with none, they are logged and dropped. A frame whose checksum
    failed goes to ``on_corrupt_frame`` (logged and dropped without one).
    """

    def __init__(self, protocol: CommandProtocol[F], make_requests: Callable[[Connection[F]], R],
                 *, keepalive: KeepalivePolicy[F] | None = None, name: str = "",
                 route: Callable[[F], None] | None = None,
                 on_corrupt_frame: Callable[[F, ChecksumFailure], None] | None = None) -> None:
        self.protocol = protocol
        self.connection: Connection[F] = Connection(
            protocol, route if route is not None else self.dispatch,
            on_corrupt_frame=on_corrupt_frame, keepalive=keepalive, keepalive_interval=None,
            name=name)
        self.requests: R = make_requests(self.connection)
        self.connection.on_close(self.requests.connection_lost)
        self._listeners: list[Callable[[F], None]] = []

    def __repr__(self) -> str:
        return f"<Endpoint {self.connection!r}>"

    async def connect(self, host: str, port: int, *, timeout: float | None = 10.0,
                      ssl_context: ssl.SSLContext | None = None) -> None:
        """Open the connection; failures raise ``ConnectionClosed``."""
        await self.connection.connect(host, port, ssl_context=ssl_context, timeout=timeout)

    @property
    def name(self) -> str:
        return self.connection.name

    @property
    def is_open(self) -> bool:
        """Connected and not closing."""
        return self.connection.is_open

    def add_listener(self, listener: Callable[[F], None]) -> None:
        """Call ``listener(frame)`` for every frame that answers no request."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[F], None]) -> None:
        """Stop calling ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def on_close(self, listener: Callable[[ConnectionClosed], None]) -> None:
        """Call ``listener(reason)`` once when the connection ends (at once if it has)."""
        self.connection.on_close(listener)

    async def send(self, frame: F) -> None:
        """Send a frame no request waits on; waits while the write buffer is over its limit."""
        await self.connection.send_frame(frame)

    def send_nowait(self, frames: Sequence[F]) -> None:
        """Queue frames for the transport without waiting for room."""
        self.connection.write_many(frames)

    def close(self, reason: BaseException | None = None) -> None:
        """Close after what is queued is written; waiting requests fail."""
        self.connection.close(reason)

    def abort(self, reason: BaseException | None = None) -> None:
        """Close at once, dropping what is not written yet."""
        self.connection.abort(reason)

    async def wait_closed(self) -> None:
        await self.connection.wait_closed()

    def dispatch(self, frame: F) -> None:
        """Offer ``frame`` to the requests, then to the listeners (what ``route`` hands on)."""
        try:
            answered = self.requests.handle_frame(frame, self.protocol.command(frame))
        except DecodeError as exc:
            self.connection.abort(exc)
            return
        if answered:
            return
        if not self._listeners:
            log.debug("%r: a frame no request waits for: %s", self.connection,
                      self.protocol.command(frame)[0])
        for listener in list(self._listeners):
            listener(frame)
