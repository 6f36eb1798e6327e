"""The asyncio TANK client: produce and consume over one broker connection.

This is the thin I/O layer. A ``runtime.io.endpoint.Endpoint`` runs the socket around the
generated ``TankProtocol`` (bytes in, frames out) with the generated ``TankRequests``, which
correlates answers by request id; the decisions live in sans-IO modules: ``bundles`` lays
messages out and reads chunks back, ``responses`` reads answers against their requests.

TANK has no ping reply: the broker greets a new connection with a ping and ignores the pings
it receives. So ``connect`` waits for the greeting (proof that a TANK broker answered), and
keepalive (``runtime.io.keepalive.IdlePing``) sends a ping after ``keepalive_interval`` seconds
without sending anything, to keep idle connections open through middleboxes; a dead broker
shows up as ``ConnectionClosed`` or ``RequestTimeout`` on the next request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import TracebackType

from protoframe.generated.tank import frames
from protoframe.generated.tank.client import TankRequests
from protoframe.generated.tank.machines import TankProtocol
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.connection import Connection
from protoframe.runtime.io.endpoint import Endpoint
from protoframe.runtime.io.keepalive import IdlePing

from .bundles import DEFAULT_MAX_UNCOMPRESSED, build_bundle
from .errors import FetchTooSmallError, InvalidMessageError
from .messages import ConsumeResult, Message
from .responses import produce_outcomes, read_partition

__all__ = ["CLIENT_VERSION", "DEFAULT_PORT", "FIRST_AVAILABLE", "TAIL", "TankClient"]

log = logging.getLogger(__name__)

DEFAULT_PORT = 11011
# What TANK's C++ client sends; 3 would announce consume op flags, which we do not use.
CLIENT_VERSION = 2
# Consume from here to start at the partition's first available message ...
FIRST_AVAILABLE = 0
# ... or from here to wait for the next message produced (the seq num after the last).
TAIL = 2**64 - 1
# The broker clamps fetch sizes to this.
MAX_FETCH_SIZE = 64 * 1024 * 1024


class TankClient:
    """One connection to a TANK broker.

    >>> async with TankClient("127.0.0.1", port) as client:     # doctest: +SKIP
    ...     await client.produce("events", 0, [Message(b"v", key=b"k", timestamp=1)])
    ...     result = await client.consume("events", 0, FIRST_AVAILABLE)
    """

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                 client_id: str = "protoframe", operation_timeout: float = 10.0,
                 connect_timeout: float = 10.0, keepalive_interval: float | None = 30.0,
                 max_fetch_size: int = MAX_FETCH_SIZE, expect_greeting: bool = True) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.operation_timeout = operation_timeout
        self.connect_timeout = connect_timeout
        self.keepalive_interval = keepalive_interval
        self.max_fetch_size = max_fetch_size
        self.expect_greeting = expect_greeting
        self.endpoint = Endpoint(
            TankProtocol(), lambda c: TankRequests(c, timeout=operation_timeout),
            keepalive=IdlePing(_ping, keepalive_interval) if keepalive_interval else None,
            name=f"tank {host}:{port}")
        self.endpoint.add_listener(self._on_greeting)
        self.conn: Connection[frames.Frame] = self.endpoint.connection
        self.requests = self.endpoint.requests
        self._greeting: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"<TankClient {self.host}:{self.port}>"

    # -- connection -----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the connection and, unless told otherwise, wait for the broker's greeting.

        Raises ``ConnectionClosed`` when the broker cannot be reached or does not greet within
        ``connect_timeout``.
        """
        loop = asyncio.get_running_loop()
        self._greeting = loop.create_future()
        self.conn.on_close(self._fail_greeting)
        await self.conn.connect(self.host, self.port, timeout=self.connect_timeout)
        if self.expect_greeting:
            try:
                await asyncio.wait_for(asyncio.shield(self._greeting), self.connect_timeout)
            except TimeoutError:
                self.conn.abort(ConnectionClosed(
                    f"{self.conn.name}: no greeting within {self.connect_timeout} s"))
                raise self.conn.closed or ConnectionClosed("no greeting") from None

    @property
    def is_connected(self) -> bool:
        """The connection is open."""
        return self.conn.is_open

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with ``ConnectionClosed``."""
        self.conn.close()
        await asyncio.wait_for(self.conn.wait_closed(), self.operation_timeout)

    async def __aenter__(self) -> TankClient:
        await self.connect()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def ping(self) -> None:
        """Send a ping. The broker does not answer it; it only shows the connection is used."""
        await self.conn.send_frame(_ping())

    def _on_greeting(self, frame: frames.Frame) -> None:
        if isinstance(frame.body, frames.Ping):
            if self._greeting is not None and not self._greeting.done():
                self._greeting.set_result(None)
            return
        log.debug("%r: an answer to no waiting request: %s", self, type(frame.body).__name__)

    def _fail_greeting(self, exc: ConnectionClosed) -> None:
        if self._greeting is not None and not self._greeting.done():
            self._greeting.set_exception(exc)
            self._greeting.exception()  # retrieved here: connect may have stopped waiting

    # -- produce --------------------------------------------------------------------------------

    async def produce(self, topic: str, partition: int, messages: Sequence[Message], *,
                      compression: bool | None = None) -> None:
        """Append ``messages`` to a partition as one bundle; the broker numbers them.

        ``compression`` True or False forces Snappy on or off; None compresses as TANK's own
        client does (past 512 messages or 1 KiB of keys and values). Raises a
        ``TankServerError`` subclass when the broker refuses (``UnknownTopicError``,
        ``UnknownPartitionError``, ...) and ``InvalidMessageError`` for a message TANK
        cannot carry. Nothing is sent for an empty ``messages``.
        """
        if not messages:
            return
        _check_address(topic, partition)
        bundle = build_bundle(messages, compression=compression)
        topics = [frames.ProduceTopic(name=topic, partitions=[
            frames.ProducePartition(partition=partition, bundle=bundle)])]
        response = await self.requests.produce(CLIENT_VERSION, self.client_id, 0, 0, topics)
        _raise_first(produce_outcomes(topics, response))

    async def produce_with_seqnum(self, topic: str, partition: int,
                                  messages: Sequence[Message], *,
                                  compression: bool | None = None) -> None:
        """Append ``messages`` under the seq nums they carry (``Message.seq_num``, increasing).

        They travel in one sparse bundle, so gaps between seq nums are allowed; the broker
        refuses seq nums at or below its high-water mark with ``InvalidSeqNumError``.
        """
        if not messages:
            return
        _check_address(topic, partition)
        bundle = build_bundle(messages, compression=compression, sparse=True)
        topics = [frames.ProduceTopic(name=topic, partitions=[frames.ProducePartition(
            partition=partition, first_msg_seqnum=bundle.first_seqnum, bundle=bundle)])]
        response = await self.requests.produce_with_seqnum(
            CLIENT_VERSION, self.client_id, 0, 0, topics)
        _raise_first(produce_outcomes(topics, response))

    # -- consume --------------------------------------------------------------------------------

    async def consume(self, topic: str, partition: int, from_seq_num: int = FIRST_AVAILABLE, *,
                      max_bytes: int = 64 * 1024, min_bytes: int = 0,
                      max_wait: float = 0.0) -> ConsumeResult:
        """Read messages from ``from_seq_num`` on (``FIRST_AVAILABLE``, ``TAIL`` or a seq num).

        The broker sends up to ``max_bytes`` of bundles; it waits up to ``max_wait`` seconds
        for at least ``min_bytes`` (or, with 0, any) to be there. A last bundle cut short by
        ``max_bytes`` is dropped and ``next_seq_num`` points at it; when not even the first
        bundle fits, the fetch grows until it does (up to ``max_fetch_size``). Raises
        ``UnknownTopicError``, ``UnknownPartitionError``, ``BoundaryCheckError`` (a seq num
        outside the partition) or another ``TankServerError``.
        """
        _check_address(topic, partition)
        if not 0 <= from_seq_num <= TAIL:
            raise ValueError(f"seq num {from_seq_num} does not fit in a u64")
        fetch = max(1, min(max_bytes, self.max_fetch_size))
        max_wait_ms = max(0, round(max_wait * 1000))
        timeout = self.operation_timeout + max_wait
        while True:
            request = [frames.ConsumeTopic(name=topic, partitions=[frames.ConsumePartition(
                partition=partition, abs_seq_num=from_seq_num, fetch_size=fetch)])]
            response = await self.requests.consume(
                CLIENT_VERSION, "", max_wait_ms, min_bytes, request, timeout=timeout)
            # From the tail, whatever arrives is new; nothing is before the seq num asked for.
            contents, highwater = read_partition(
                response, topic, partition,
                from_seq_num=0 if from_seq_num == TAIL else from_seq_num,
                max_uncompressed=max(DEFAULT_MAX_UNCOMPRESSED, self.max_fetch_size))
            if contents.whole_bundles or not contents.tail:
                break
            if fetch >= self.max_fetch_size:
                raise FetchTooSmallError(
                    f"{topic}/{partition}: a bundle at seq num {from_seq_num} needs "
                    f"{contents.needed or 'more than'} bytes; max_fetch_size is {fetch}")
            # Not even the first bundle fitted: ask again for all of it at once (from where it
            # starts, should the tail move on meanwhile).
            fetch = min(self.max_fetch_size, max(2 * fetch, contents.needed or 0))
            if from_seq_num == TAIL and contents.next_seq_num is not None:
                from_seq_num = contents.next_seq_num
        next_seq = contents.next_seq_num
        if next_seq is None:
            next_seq = highwater + 1 if from_seq_num in (FIRST_AVAILABLE, TAIL) else from_seq_num
        elif from_seq_num != TAIL:
            next_seq = max(next_seq, from_seq_num)
        return ConsumeResult(contents.messages, next_seq, highwater)


def _ping() -> frames.Frame:
    return frames.Frame(body=frames.Ping())


def _check_address(topic: str, partition: int) -> None:
    if not 0 < len(topic.encode()) <= 0xFF:
        raise InvalidMessageError(f"topic name {topic!r} must be 1 to 255 bytes of UTF-8")
    if not 0 <= partition <= 0xFFFF:
        raise InvalidMessageError(f"partition {partition} does not fit in a u16")


def _raise_first(errors: Sequence[Exception]) -> None:
    if errors:
        raise errors[0]
