"""What a server allows one connection, and all of them together, before it closes them.

A client that connects and says nothing, trickles a frame a byte at a time, or announces a
large frame and never finishes it holds the server's memory for as long as it likes unless
something times it out. ``ConnectionLimits`` says how long and how much; ``serve``
(``runtime.io.server``) applies them to every connection through a ``ConnectionGuard``:

* ``max_connections``: connections beyond it are closed as soon as they are accepted.
* ``handshake_timeout``: a connection must finish its protocol's handshake (the session says
  when: ``Session.established``) within this many seconds of being accepted.
* ``frame_timeout``: a frame whose first byte has arrived must be complete this many seconds
  later; a slow trickle of bytes does not count as progress, a completed frame does.
* ``max_partial_bytes``: the bytes of an unfinished frame one connection may hold.
* ``max_partial_bytes_total``: the same for every connection of the server together
  (``ReceiveBudget``); the connection whose read goes over it is the one closed.

Zero (or None for the times) means no limit. Only a protocol whose decoder can say how many
bytes it holds (``FrameStream.buffered``, which every generated ``*Protocol``'s ``decoder``
is) can have the byte budgets enforced; the others get the times and the connection count.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from protoframe.runtime.errors import ConnectionClosed

__all__ = ["ConnectionGuard", "ConnectionLimits", "ReceiveBudget", "partial_bytes_of"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Limits a server applies to its connections (0 or None: no limit); see the module."""

    max_connections: int = 0
    handshake_timeout: float | None = None
    frame_timeout: float | None = None
    max_partial_bytes: int = 0
    max_partial_bytes_total: int = 0


class ReceiveBudget:
    """The bytes of unfinished frames every connection of one server holds, together."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    @property
    def over(self) -> bool:
        return bool(self.limit) and self.held > self.limit


class Buffering(Protocol):
    @property
    def buffered(self) -> int: ...


class Guarded(Protocol):
    """What a guard uses of the connection it watches (``runtime.io.connection.Connection``)."""

    bytes_received: int

    @property
    def is_open(self) -> bool: ...

    def abort(self, reason: BaseException | None = None) -> None: ...


def partial_bytes_of(protocol: object) -> Callable[[], int] | None:
    """How to ask ``protocol`` for the bytes of its unfinished frame: its ``decoder``'s
    ``buffered`` (generated ``*Protocol``s), or its own; None when it has neither."""
    for holder in (getattr(protocol, "decoder", None), protocol):
        if holder is not None and isinstance(getattr(type(holder), "buffered", None),
                                             property):
            return _reader(cast(Buffering, holder))
    return None


def _reader(buffering: Buffering) -> Callable[[], int]:
    return lambda: buffering.buffered


class ConnectionGuard:
    """Applies ``limits`` to one connection: ``start`` when it is connected, ``received``
    after each read, ``stop`` when it ends."""

    def __init__(self, limits: ConnectionLimits, budget: ReceiveBudget | None,
                 partial_bytes: Callable[[], int] | None,
                 established: Callable[[], bool], name: str = "connection") -> None:
        self.limits = limits
        self.budget = budget
        self.partial_bytes = partial_bytes
        self.established = established
        self.name = name
        self.held = 0  # this connection's share of the budget
        self._connection: Guarded | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handshake: asyncio.TimerHandle | None = None
        self._frame_timer: asyncio.TimerHandle | None = None
        self._frame_since: float | None = None  # when the unfinished frame's first byte came
        self._frame_start = 0  # bytes_received - buffered then: which frame that was

    def start(self, connection: Guarded) -> None:
        self._connection = connection
        self._loop = loop = asyncio.get_running_loop()
        timeout = self.limits.handshake_timeout
        if timeout:
            self._handshake = loop.call_later(timeout, self._handshake_due)

    def stop(self) -> None:
        for handle in (self._handshake, self._frame_timer):
            if handle is not None:
                handle.cancel()
        self._handshake = self._frame_timer = None
        self._frame_since = None
        if self.budget is not None:
            self.budget.held -= self.held
        self.held = 0

    def received(self) -> None:
        """After a read: account the unfinished frame, close the connection over a limit."""
        connection, loop = self._connection, self._loop
        if connection is None or loop is None or not connection.is_open:
            return
        buffered = self.partial_bytes() if self.partial_bytes is not None else 0
        if self.limits.frame_timeout:
            self._time_frame(connection, loop, buffered)
        if self.partial_bytes is None:
            return
        budget = self.budget
        grown = buffered - self.held
        self.held = buffered
        if budget is not None:
            budget.held += grown
        per_connection = self.limits.max_partial_bytes
        if per_connection and buffered > per_connection:
            self._close(f"{buffered} bytes of an unfinished frame, over the "
                        f"{per_connection}-byte limit of a connection")
        elif budget is not None and grown > 0 and budget.over:
            self._close(f"unfinished frames of all connections hold {budget.held} bytes, "
                        f"over the {budget.limit}-byte limit")

    def _time_frame(self, connection: Guarded, loop: asyncio.AbstractEventLoop,
                    buffered: int) -> None:
        if not buffered:
            self._frame_since = None
            return
        start = connection.bytes_received - buffered
        if self._frame_since is None or start != self._frame_start:
            self._frame_since = loop.time()
            self._frame_start = start
            if self._frame_timer is None:
                timeout = self.limits.frame_timeout
                assert timeout is not None
                self._frame_timer = loop.call_later(timeout, self._frame_due)

    def _frame_due(self) -> None:
        self._frame_timer = None
        since, loop, timeout = self._frame_since, self._loop, self.limits.frame_timeout
        if since is None or loop is None or timeout is None:
            return
        left = since + timeout - loop.time()
        if left > 0:  # another frame began since the timer was set: time that one
            self._frame_timer = loop.call_later(left, self._frame_due)
            return
        self._close(f"a frame begun {timeout:g} s ago is still incomplete")

    def _handshake_due(self) -> None:
        self._handshake = None
        timeout = self.limits.handshake_timeout
        if not self.established():
            self._close(f"no handshake within {timeout:g} s")

    def _close(self, why: str) -> None:
        connection = self._connection
        if connection is not None and connection.is_open:
            log.info("%s: closing: %s", self.name, why)
            connection.abort(ConnectionClosed(f"{self.name}: {why}"))
