"""The embedded TANK broker's asyncio side: ``runtime.io.server.serve``, one session a connection.

Each connection drives the generated ``TankProtocol`` in its server role, so bytes are decoded
by the same generated stream decoder the client uses.
A frame that does not decode, or a bundle that cannot be read, closes that connection only.
A consume that cannot be answered yet (fewer than ``min_bytes`` available) waits in a task of
its own for up to ``max_wait_ms``, so later requests on the connection are not held up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from types import TracebackType

from protoframe.generated.tank import frames
from protoframe.generated.tank.machines import TankProtocol
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.server import Server, Session, serve

from .state import BadBundle, BrokerState

__all__ = ["EmbeddedTankBroker"]

log = logging.getLogger(__name__)

_PING = frames.Frame(body=frames.Ping())
# A consumer may ask for a wait of up to 2**64 - 1 ms; the broker holds a request no longer.
MAX_WAIT_SECONDS = 60.0


class _Session(Session[frames.Frame]):
    """One client connection: greets it with a ping, answers its requests."""

    def __init__(self, broker: EmbeddedTankBroker) -> None:
        super().__init__(TankProtocol(server=True, max_frame_size=broker.max_frame_size))
        self.broker = broker
        self._waiting: set[asyncio.Task[None]] = set()

    def connection_made(self) -> None:
        self.connection.write(_PING)  # TANK brokers introduce themselves this way

    def connection_lost(self, reason: ConnectionClosed) -> None:
        for task in self._waiting:
            task.cancel()

    def write(self, frame: frames.Frame) -> None:
        self.connection.write(frame)

    def frame_received(self, frame: frames.Frame) -> None:
        body = frame.body
        state = self.broker.state
        try:
            if isinstance(body, frames.ProduceRequest | frames.ProduceWithSeqnumRequest):
                before = state.appended
                self.write(frames.Frame(body=state.produce(body)))
                if state.appended != before:
                    self.broker.notify_appended()
            elif isinstance(body, frames.ConsumeRequest):
                response, ready = state.consume(body)
                if ready or body.max_wait_ms == 0:
                    self.write(frames.Frame(body=response))
                else:
                    task = asyncio.get_running_loop().create_task(
                        self._consume_later(state.pin_tail(body)))
                    self._waiting.add(task)
                    task.add_done_callback(self._waiting.discard)
            # A received ping needs nothing: TANK brokers ignore them.
        except BadBundle as exc:
            self.connection.abort(exc)

    async def _consume_later(self, request: frames.ConsumeRequest) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(request.max_wait_ms / 1000, MAX_WAIT_SECONDS)
        while True:
            remaining = deadline - loop.time()
            if remaining > 0:
                await self.broker.wait_appended(remaining)
            response, ready = self.broker.state.consume(request)
            if ready or loop.time() >= deadline:
                break
        if self.connection.is_open:
            self.write(frames.Frame(body=response))


class EmbeddedTankBroker:
    """A TANK broker in the running event loop, keeping partitions in memory.

    >>> async with EmbeddedTankBroker(topics={"events": 2}) as (host, port):  # doctest: +SKIP
    ...     ...

    ``topics`` maps names to partition counts; ``auto_create`` gives unknown topics that many
    partitions instead of refusing them; ``compress=True`` stores and serves every bundle
    Snappy-compressed. ``port=0`` picks a free port.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 topics: Mapping[str, int] | None = None, auto_create: int | None = None,
                 compress: bool = False,
                 max_frame_size: int = frames.DEFAULT_MAX_FRAME_SIZE) -> None:
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.state = BrokerState(topics, auto_create=auto_create, compress=compress)
        self._server: Server[_Session] | None = None
        self._appended: asyncio.Event | None = None

    @property
    def sessions(self) -> set[_Session]:
        """The sessions of the open connections."""
        return self._server.sessions if self._server is not None else set()

    async def start(self) -> tuple[str, int]:
        """Listen; return the (host, port) clients connect to."""
        self._server = await serve(self.host, self.port, lambda: _Session(self),
                                   name="TANK broker")
        self.port = self._server.port
        return self.host, self.port

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop()

    async def __aenter__(self) -> tuple[str, int]:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    def create_topic(self, name: str, partitions: int) -> None:
        """Admin: declare ``name`` with ``partitions`` partitions."""
        self.state.create_topic(name, partitions)

    def notify_appended(self) -> None:
        """Wake the consumes waiting for data."""
        if self._appended is not None:
            self._appended.set()
            self._appended = None

    async def wait_appended(self, timeout: float) -> None:
        """Return when a bundle is appended anywhere, or after ``timeout`` seconds."""
        if self._appended is None:
            self._appended = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._appended.wait(), timeout)
