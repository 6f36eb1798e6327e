"""A client connection to a segment store: HELLO first, KEEP_ALIVE while open, typed requests.

``PravegaConnection.connect`` opens the TCP connection, sends HELLO with our version range
and refuses a server whose range does not overlap (``IncompatibleVersion``). Replies that
answer a request go to the generated ``PravegaRequests``; the rest (DATA_APPENDED and the
failures of appends, which no request waits for) go to the listeners registered with
``add_listener``, which is how writers hear about their appends. ``ConnectionOptions`` holds
the settings of ``connect`` as one value, for code that connects again later (a writer that
reconnects).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from protoframe.generated.pravega import frames
from protoframe.generated.pravega.client import PravegaRequests
from protoframe.generated.pravega.machines import PravegaProtocol
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.connection import Connection
from protoframe.runtime.io.endpoint import Endpoint
from protoframe.runtime.io.keepalive import KeepaliveHooks, PingPong

from .versions import HIGH_VERSION, LOW_VERSION, check_overlap

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_REQUEST_TIMEOUT",
    "ConnectionOptions",
    "PravegaConnection",
    "PravegaKeepalive",
    "keepalive_policy",
]

DEFAULT_KEEPALIVE_INTERVAL = 20.0
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 10.0

Listener = Callable[[frames.Frame], None]


class PravegaKeepalive(KeepaliveHooks[frames.Frame]):
    """KEEP_ALIVE in both directions, with the client never answering one.

    The segment store echoes every KEEP_ALIVE it gets, so a KEEP_ALIVE arriving at the
    client is an answer (to ``requests.keep_alive`` when one waits); echoing it back would
    bounce the same frame forever. The runtime still counts it as traffic, which is what
    keeps the idle check from closing.
    """

    def ping(self) -> frames.Frame:
        return frames.Frame(body=frames.KeepAlive())

    def pong(self) -> frames.Frame:
        return frames.Frame(body=frames.KeepAlive())

    def is_ping(self, frame: frames.Frame) -> bool:
        return False


def keepalive_policy(interval: float | None) -> PingPong[frames.Frame] | None:
    """The client's keepalive: a KEEP_ALIVE every ``interval`` seconds."""
    return PingPong(PravegaKeepalive(), interval) if interval else None


class PravegaConnection:
    """One connection to a segment store; ``requests`` sends the typed requests over it."""

    def __init__(self, endpoint: Endpoint[frames.Frame, PravegaRequests]) -> None:
        self.endpoint = endpoint
        self.connection: Connection[frames.Frame] = endpoint.connection
        self.requests = endpoint.requests
        self.server_versions: tuple[int, int] | None = None

    @classmethod
    async def connect(cls, host: str, port: int, *,
                      keepalive_interval: float | None = DEFAULT_KEEPALIVE_INTERVAL,
                      request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                      connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                      versions: tuple[int, int] = (LOW_VERSION, HIGH_VERSION),
                      ) -> PravegaConnection:
        """Connect and exchange HELLO; raises ``IncompatibleVersion`` or ``ConnectionClosed``.

        ``versions`` is the ``(low, high)`` range we announce; tests lower it to see a server
        refuse us.
        """
        endpoint = Endpoint(
            PravegaProtocol(), lambda c: PravegaRequests(c, timeout=request_timeout),
            keepalive=keepalive_policy(keepalive_interval), name=f"pravega {host}:{port}")
        await endpoint.connect(host, port, timeout=connect_timeout)
        self = cls(endpoint)
        connection = endpoint.connection
        try:
            hello = await self.requests.hello(versions[1], versions[0])
            self.server_versions = (hello.low_version, hello.high_version)
            check_overlap(versions, self.server_versions)
        except BaseException as exc:
            connection.abort(exc)
            raise
        return self

    @property
    def is_open(self) -> bool:
        """Connected and not closing."""
        return self.connection.is_open

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(frame)`` for every frame that answers no request."""
        self.endpoint.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        self.endpoint.remove_listener(listener)

    def on_close(self, listener: Callable[[ConnectionClosed], None]) -> None:
        """Call ``listener(reason)`` once when the connection ends."""
        self.endpoint.on_close(listener)

    async def send(self, frame: frames.Frame) -> None:
        """Send a frame that expects no direct answer (appends); waits for buffer room."""
        await self.connection.send_frame(frame)

    async def close(self) -> None:
        """Close after what is queued is written; waiting requests fail."""
        self.connection.close()
        await self.connection.wait_closed()

    async def __aenter__(self) -> PravegaConnection:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """The keyword arguments of ``PravegaConnection.connect``, kept to connect again later."""

    keepalive_interval: float | None = DEFAULT_KEEPALIVE_INTERVAL
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    versions: tuple[int, int] = (LOW_VERSION, HIGH_VERSION)

    async def connect(self, host: str, port: int) -> PravegaConnection:
        """``PravegaConnection.connect(host, port)`` with these options."""
        return await PravegaConnection.connect(
            host, port, keepalive_interval=self.keepalive_interval,
            request_timeout=self.request_timeout, connect_timeout=self.connect_timeout,
            versions=self.versions)
