"""An asyncio TCP proxy that cuts connections at seeded-random points, for fault tests.

``FaultProxy(upstream_host, upstream_port, seed=...)`` listens on 127.0.0.1 (a free port) and
forwards every accepted connection to the upstream address. While it still has cuts left
(``max_cuts``), each new connection is *doomed* with probability ``doom_rate`` (default: all
of them). A doomed connection gets a random byte budget for each direction and a random
lifetime, and is cut at whichever comes first:

* a budget: in the middle of the chunk that crosses it, so the receiver gets a prefix of that
  chunk (usually part of a frame), then the connection ends;
* the lifetime: wherever the traffic happens to be.

A cut either aborts both sides (RST: buffered bytes are lost) or closes them after flushing
what was forwarded (FIN), chosen at random too. Once ``max_cuts`` connections have been cut,
new connections pass through untouched, so a test always ends with a working path.

The random choices come from ``random.Random(seed)``; which bytes a budget lands on still
depends on timing (how the stream is chunked), so a run is repeatable in kind, not byte for
byte. ``cuts``, ``connections`` and ``log`` (one line per cut) tell what happened.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

__all__ = ["FaultProxy"]


@dataclass
class _Plan:
    """How a doomed connection dies: byte budgets per direction and/or a lifetime."""

    to_server: float = float("inf")
    to_client: float = float("inf")
    lifetime: float | None = None
    abort: bool = True


class _Side(asyncio.Protocol):
    """One end of a proxied connection (the accepted client socket or the upstream one)."""

    def __init__(self, link: _Link, name: str) -> None:
        self.link = link
        self.name = name
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.link.forward(self, data)

    def eof_received(self) -> bool | None:
        self.link.close_both("eof from " + self.name, cut=False)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.close_both("lost " + self.name, cut=False)

    # Back-pressure: stop reading from the peer while this side cannot write.
    def pause_writing(self) -> None:
        peer = self.link.peer_of(self)
        if peer.transport is not None:
            peer.transport.pause_reading()

    def resume_writing(self) -> None:
        peer = self.link.peer_of(self)
        if peer.transport is not None and not peer.transport.is_closing():
            peer.transport.resume_reading()


class _Link:
    """A client connection and its upstream connection."""

    def __init__(self, proxy: FaultProxy, number: int, plan: _Plan | None) -> None:
        self.proxy = proxy
        self.number = number
        self.plan = plan
        self.client = _Side(self, "client")
        self.server = _Side(self, "server")
        self.early: list[bytes] = []  # client bytes that came before upstream was connected
        self.closed = False
        self.forwarded = [0, 0]  # bytes to the server, to the client
        self.timer: asyncio.TimerHandle | None = None

    def peer_of(self, side: _Side) -> _Side:
        return self.server if side is self.client else self.client

    def start_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.plan is not None and self.plan.lifetime is not None:
            lifetime = self.plan.lifetime
            self.timer = loop.call_later(lifetime, self.cut, f"after {lifetime:.3f} s")

    def forward(self, source: _Side, data: bytes) -> None:
        if self.closed:
            return
        target = self.peer_of(source)
        if target.transport is None:  # upstream still connecting: keep the bytes for later
            self.early.append(data)
            return
        direction = 0 if source is self.client else 1
        plan = self.plan
        if plan is not None:
            budget = plan.to_server if direction == 0 else plan.to_client
            left = budget - self.forwarded[direction]
            if len(data) >= left:
                part = data[:int(left)]
                if part:
                    target.transport.write(part)
                self.forwarded[direction] += len(part)
                what = "client->server" if direction == 0 else "server->client"
                self.cut(f"{what} after {int(budget)} bytes "
                         f"({len(part)} of a {len(data)}-byte chunk)")
                return
        self.forwarded[direction] += len(data)
        target.transport.write(data)

    def upstream_ready(self) -> None:
        early, self.early = self.early, []
        for data in early:
            self.forward(self.client, data)

    def cut(self, why: str) -> None:
        if self.closed:
            return
        assert self.plan is not None
        self.proxy.cuts += 1
        how = "abort" if self.plan.abort else "close"
        self.proxy.log.append(f"connection {self.number}: {how} {why}")
        self._shut(abort=self.plan.abort)

    def close_both(self, why: str, *, cut: bool) -> None:
        if not self.closed:
            self._shut(abort=False)

    def _shut(self, *, abort: bool) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.proxy.links.discard(self)
        for side in (self.client, self.server):
            transport = side.transport
            if transport is not None and not transport.is_closing():
                if abort:
                    transport.abort()
                else:
                    transport.close()


class FaultProxy:
    """See the module docstring."""

    def __init__(self, upstream_host: str, upstream_port: int, *, seed: int,
                 max_cuts: int = 10, doom_rate: float = 1.0,
                 to_server_bytes: tuple[int, int] = (100, 60_000),
                 to_client_bytes: tuple[int, int] = (100, 200_000),
                 lifetime: tuple[float, float] = (0.05, 0.6)) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.rng = random.Random(seed)
        self.max_cuts = max_cuts
        self.doom_rate = doom_rate
        self.to_server_bytes = to_server_bytes
        self.to_client_bytes = to_client_bytes
        self.lifetime = lifetime
        self.cuts = 0
        self.connections = 0
        self.doomed = 0
        self.log: list[str] = []
        self.links: set[_Link] = set()
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def _plan(self) -> _Plan | None:
        rng = self.rng
        if self.doomed >= self.max_cuts or rng.random() >= self.doom_rate:
            return None
        self.doomed += 1
        # Whichever limit is reached first cuts the connection.
        return _Plan(to_server=rng.randint(*self.to_server_bytes),
                     to_client=rng.randint(*self.to_client_bytes),
                     lifetime=rng.uniform(*self.lifetime),
                     abort=rng.random() < 0.5)

    async def start(self) -> str:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.url

    def _accept(self) -> _Side:
        self.connections += 1
        link = _Link(self, self.connections, self._plan())
        self.links.add(link)
        loop = asyncio.get_running_loop()
        # Reading from the client waits until upstream is connected (bytes queue in ``early``).
        task = loop.create_task(self._connect_upstream(link))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        link.start_timer(loop)
        return link.client

    async def _connect_upstream(self, link: _Link) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: link.server, self.upstream_host,
                                         self.upstream_port)
        except OSError:
            link.close_both("upstream refused", cut=False)
            return
        if link.closed:
            if link.server.transport is not None:
                link.server.transport.abort()
            return
        link.upstream_ready()

    def heal(self) -> None:
        """Stop cutting: connections not cut yet, and new ones, pass through untouched."""
        self.max_cuts = self.doomed
        for link in list(self.links):
            if link.timer is not None:
                link.timer.cancel()
                link.timer = None
            link.plan = None

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for link in list(self.links):
                link._shut(abort=True)
            await self._server.wait_closed()
            self._server = None
