"""Keepalive policies: how a ``Connection`` keeps an idle connection alive and finds a dead one.

A policy is made for one connection (``Connection`` and ``Endpoint`` take one, ``serve`` a
factory making one a connection): the connection calls ``start`` once it is connected,
``received`` with every frame ``may_take`` picks (a True answer means the policy consumed it)
and ``stop`` when it ends. The policies differ in what they send and when they give up:

* ``PingPong``: both sides ping and answer pings; a ping goes out every ``interval`` seconds
  and the connection is closed when nothing at all arrived for twice that long.
* ``PingWhenQuiet``: a ping goes out only after ``interval`` seconds with nothing received,
  and the connection is closed when the next ``interval`` brings nothing either; a server's
  way, so that busy clients are never pinged.
* ``IdlePing``: for protocols without an answer to a ping (TANK): a ping goes out after
  ``interval`` seconds without *sending* anything, to keep middleboxes from dropping an idle
  connection; a dead peer shows up on the next request.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from protoframe.runtime.errors import ConnectionClosed

__all__ = ["IdlePing", "KeepaliveHooks", "KeepalivePolicy", "PingPong", "PingWhenQuiet"]

log = logging.getLogger(__name__)

F = TypeVar("F")
F_contra = TypeVar("F_contra", contravariant=True)


class Connection(Protocol[F_contra]):
    """What a policy uses of the connection it keeps alive (``runtime.io.connection``'s
    ``Connection`` has it all; declared here so that keepalive does not import it back)."""

    name: str
    last_received: float
    bytes_received: int
    bytes_sent: int

    @property
    def is_open(self) -> bool: ...

    @property
    def closed(self) -> ConnectionClosed | None: ...

    def write(self, frame: F_contra) -> None: ...

    def abort(self, reason: BaseException | None = None) -> None: ...


class KeepaliveHooks(Protocol[F]):
    """The protocol-specific part of keepalive: what a ping and its answer look like."""

    def ping(self) -> F: ...

    def pong(self) -> F: ...

    def is_ping(self, frame: F) -> bool: ...


class KeepalivePolicy(ABC, Generic[F]):
    """One connection's keepalive: a timer that fires every ``interval`` seconds.

    ``on_expired(reason)`` is called when the peer is found dead; by default the connection
    is aborted with ``reason``.
    """

    def __init__(self, interval: float, *,
                 on_expired: Callable[[ConnectionClosed], None] | None = None) -> None:
        self.interval = interval
        self.on_expired = on_expired
        self.connection: Connection[F] | None = None
        self._handle: asyncio.TimerHandle | None = None
        # The test a connection runs on each received frame: only those it says yes to go to
        # ``received``. None: the policy takes no frames, and is not asked; a policy that
        # overrides ``received`` sees every frame unless it narrows this.
        self.may_take: Callable[[F], bool] | None = (
            None if type(self).received is KeepalivePolicy.received else _every_frame)

    def start(self, connection: Connection[F]) -> None:
        """Begin timing ``connection`` (called when it is connected)."""
        self.connection = connection
        self._schedule()

    def stop(self) -> None:
        """Stop the timer (called when the connection ends)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def received(self, frame: F) -> bool:
        """See a received frame; True when it was keepalive traffic handled here."""
        return False

    @abstractmethod
    def tick(self, connection: Connection[F], now: float) -> None:
        """Act once an interval has passed (send a ping, or abort the connection)."""

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._handle = loop.call_later(self.interval, self._fire)

    def _fire(self) -> None:
        self._handle = None
        connection = self.connection
        if connection is None or connection.closed is not None:
            return
        self.tick(connection, asyncio.get_running_loop().time())
        if connection.closed is None and connection.is_open:
            self._schedule()

    def expire(self, connection: Connection[F], why: str) -> None:
        """The peer is dead: tell ``on_expired``, or abort the connection."""
        reason = ConnectionClosed(f"{connection.name or 'connection'}: {why}")
        if self.on_expired is not None:
            self.on_expired(reason)
        else:
            connection.abort(reason)

    def _send(self, connection: Connection[F], frame: F) -> None:
        try:
            connection.write(frame)
        except Exception as exc:  # the connection is going; its close says why
            log.debug("%r: could not send a keepalive frame: %s", connection, exc)


class PingPong(KeepalivePolicy[F]):
    """Ping every ``interval``; answer pings; give up after ``2 * interval`` of silence."""

    def __init__(self, hooks: KeepaliveHooks[F], interval: float) -> None:
        super().__init__(interval)
        self.hooks = hooks
        self.may_take = hooks.is_ping

    def received(self, frame: F) -> bool:
        if not self.hooks.is_ping(frame):
            return False
        if self.connection is not None:
            self._send(self.connection, self.hooks.pong())
        return True

    def tick(self, connection: Connection[F], now: float) -> None:
        idle = now - connection.last_received
        if idle >= 2 * self.interval:
            self.expire(connection, f"nothing received for {idle:.1f} s "
                                    f"(keepalive interval {self.interval} s)")
            return
        self._send(connection, self.hooks.ping())


def _every_frame(frame: object) -> bool:
    return True


class PingWhenQuiet(KeepalivePolicy[F]):
    """Ping after an ``interval`` with nothing received; give up when the next is silent too.

    Pings from the peer are left to the session (``received`` consumes nothing): a server
    answers them as one of its commands. ``may_ping`` says whether a ping may be sent now (a
    protocol may allow it only after its handshake); while it says no, silence is allowed.
    """

    def __init__(self, ping: Callable[[], F], interval: float, *,
                 may_ping: Callable[[], bool] = lambda: True,
                 on_expired: Callable[[ConnectionClosed], None] | None = None) -> None:
        super().__init__(interval, on_expired=on_expired)
        self.ping = ping
        self.may_ping = may_ping
        self.outstanding = False
        self._seen = 0

    def tick(self, connection: Connection[F], now: float) -> None:
        if connection.bytes_received != self._seen:
            self._seen = connection.bytes_received
            self.outstanding = False
        elif self.outstanding:
            self.expire(connection, "keepalive: no answer to a ping")
        elif self.may_ping():
            self.outstanding = True
            self._send(connection, self.ping())


class IdlePing(KeepalivePolicy[F]):
    """Send ``ping()`` after an ``interval`` in which nothing was sent; expect no answer."""

    def __init__(self, ping: Callable[[], F], interval: float) -> None:
        super().__init__(interval)
        self.ping = ping
        self._sent = 0

    def start(self, connection: Connection[F]) -> None:
        self._sent = connection.bytes_sent
        super().start(connection)

    def tick(self, connection: Connection[F], now: float) -> None:
        if connection.bytes_sent == self._sent:
            self._send(connection, self.ping())
        self._sent = connection.bytes_sent
