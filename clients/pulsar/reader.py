"""``Reader``: a consumer on a non-durable subscription that the application positions itself.

As in the official clients, a reader subscribes Exclusive with ``durable=False`` and a start
message id; the broker delivers from the start id's entry on (a batch whole), and the reader
drops what comes before the start, and the start itself unless ``start_message_id_inclusive``.

A non-durable subscription lives only as long as its consumer: after a lost connection the
broker has forgotten it, and the reader subscribes again from its own position, kept per
partition in ``ReaderTopicConsumer.start_message_id``: the last message read (exclusive), or
the target of the last seek (which, as Pulsar does, the broker applies by closing the consumer,
keeping the subscription for it to come back to). A seek by publish time has no id until a
message arrives: after a lost connection before that, the reader subscribes again and repeats
the seek.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.consumer import (
    Consumer,
    ConsumerConfig,
    ReceiveQueue,
    TopicConsumer,
)
from protoframe.clients.pulsar.consumer.listener import start_listener
from protoframe.clients.pulsar.handle import HandleState, start_all
from protoframe.clients.pulsar.message import Message, MessageId
from protoframe.clients.pulsar.schema.base import Schema, ValueT
from protoframe.clients.pulsar.schema.binding import bind_consumer_schema
from protoframe.clients.pulsar.session import Session
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["Reader", "ReaderListener", "ReaderTopicConsumer", "open_reader"]

log = logging.getLogger(__name__)

R = TypeVar("R")

_GONE = (HandleState.CLOSING, HandleState.CLOSED, HandleState.FAILED)


def _ends_before(position: tuple[int, int, int], start: MessageId) -> tuple[bool, bool]:
    """Whether ``position`` (ledger, entry, batch index) is before ``start``, and whether it is
    ``start`` itself. A start without a batch index stands for its whole entry."""
    ledger, entry, index = position
    there = (start.ledger_id(), start.entry_id(), start.batch_index())
    # Without a batch index the start's index (-1) compares as the entry's own index would.
    here = (ledger, entry, index if there[2] >= 0 else -1)
    return here < there, here == there


def _position(mid: MessageId) -> tuple[int, int, int]:
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


class ReaderTopicConsumer(TopicConsumer):
    """One partition of a reader: its position survives reconnections (module docstring)."""

    inclusive: bool = False
    # A seek by publish time not yet followed by a message; repeated after a lost connection.
    seek_time: int | None = None
    _seek_again = False

    def connection_closed(self, cnx: ClientConnection, exc: BaseException) -> None:
        if cnx is self.cnx and self.seek_time is not None:
            self._seek_again = True
        super().connection_closed(cnx, exc)

    def _ready(self, cnx: ClientConnection, answer: None) -> None:
        super()._ready(cnx, answer)
        if self._seek_again:
            self._seek_again = False
            asyncio.ensure_future(self._repeat_time_seek(self.seek_time))

    async def _repeat_time_seek(self, timestamp: int | None) -> None:
        if timestamp is None:
            return
        try:
            await self.seek(None, timestamp)
        except errors.PulsarException as exc:
            log.warning("%r: could not seek to %d again after reconnecting: %s", self,
                        timestamp, exc)

    def accepts(self, position: tuple[int, int, int]) -> bool:
        """Whether a message at ``position`` is at or past this partition's start."""
        start = self.start_message_id
        if start is None or start == MessageId.latest:
            return True
        before, same = _ends_before(position, start)
        return not before and (not same or self.inclusive)

    def moved_past(self, mid: MessageId) -> None:
        """The application read ``mid``: resume after it."""
        self.start_message_id = mid
        self.inclusive = False
        self.seek_time = None

    async def last_and_mark_delete(self) -> tuple[MessageId, MessageId]:
        """The topic's last message id and the subscription's mark-delete position."""
        answer = await self._last_message_id_answer()
        mark = answer.consumer_mark_delete_position
        return (MessageId.from_proto(answer.last_message_id, self.partition),
                MessageId.from_proto(mark, self.partition) if mark is not None
                else MessageId.earliest)

    async def has_message_available(self) -> bool:
        """Whether the broker holds a message this partition has not yet read (as the
        official clients decide it from GET_LAST_MESSAGE_ID)."""
        last, mark = await self.last_and_mark_delete()
        if last.entry_id() < 0:
            return False
        start = self.start_message_id
        if start is None or start == MessageId.latest or self.seek_time is not None:
            # Nothing read since a start at the end or a seek by time: what the broker's
            # cursor has not passed is what is left.
            return (mark.ledger_id(), mark.entry_id()) < (last.ledger_id(), last.entry_id())
        before, same = _ends_before(_position(last), start)
        return not before and (not same or self.inclusive)


#: ``listener(reader, message)``: a function, or a coroutine function (awaited).
ReaderListener = Callable[["Reader[ValueT]", Message[ValueT]], object]


class Reader(Generic[ValueT]):
    """Reads a topic (every partition of it) from a position the application chooses.

    Made by ``PulsarClient.create_reader``. ``read_next`` returns the next message,
    ``has_message_available`` tells whether one is there to read, ``seek`` moves to a message
    id or a publish time. Nothing is acknowledged: the subscription ends with the reader. Its
    messages' values are of type ``ValueT`` (bytes without a schema).
    """

    def __init__(self, consumer: Consumer[ValueT], children: list[ReaderTopicConsumer],
                 operation_timeout: float) -> None:
        self._consumer = consumer
        self._children = children
        self._by_partition = {c.partition: c for c in children}
        self._peeked: Message[ValueT] | None = None
        self._operation_timeout = operation_timeout
        self._inclusive = bool(children) and children[0].inclusive
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._listening.set()

    def _child(self, msg: Message[ValueT]) -> ReaderTopicConsumer:
        return self._by_partition.get(msg.entry().partition, self._children[0])

    async def _next_accepted(self, timeout_millis: int | None) -> Message[ValueT]:
        loop = asyncio.get_running_loop()
        deadline = None if timeout_millis is None else loop.time() + timeout_millis / 1000.0
        while True:
            remaining = None if deadline is None else \
                max(0, int((deadline - loop.time()) * 1000))
            msg = await self._consumer.receive(remaining)
            info = msg.entry()
            if self._child(msg).accepts((info.ledger_id, info.entry_id, msg.batch_index())):
                return msg

    async def read_next(self, timeout_millis: int | None = None) -> Message[ValueT]:
        """The next message; waits for one (at most ``timeout_millis``, then ``Timeout``)."""
        msg = self._peeked
        if msg is not None:
            self._peeked = None
        else:
            msg = await self._next_accepted(timeout_millis)
        self._child(msg).moved_past(msg.message_id())
        return msg

    async def has_message_available(self) -> bool:
        """Whether ``read_next`` has a message to return without waiting for a new one."""
        if self._peeked is not None:
            return True
        while self._consumer.queued():
            try:
                self._peeked = await self._next_accepted(0)
            except errors.Timeout:
                break
            return True
        answers = await asyncio.gather(*(self._retried(c.has_message_available)
                                         for c in self._children))
        return any(answers)

    async def seek(self, message_id: MessageId | int) -> None:
        """Move to a message id (``MessageId.earliest``/``latest`` for the ends): what follows
        it is read next, and the message itself too when the reader's start is inclusive (as
        the official clients do); or to a publish time (ms since the epoch): the first message
        published at or after it is read next."""
        await self._connected()
        self._peeked = None
        if isinstance(message_id, MessageId):
            targets = self._children
            if len(self._children) > 1 and message_id.partition() >= 0:
                targets = [self._by_partition[message_id.partition()]]
            await asyncio.gather(*(self._retried(c.seek, message_id, None) for c in targets))
            for child in targets:
                # As the official clients: the target itself is read again only by a reader
                # whose start is inclusive.
                child.start_message_id = message_id
                child.inclusive = self._inclusive
                child.seek_time = None
        elif isinstance(message_id, int):
            await asyncio.gather(*(self._retried(c.seek, None, message_id)
                                   for c in self._children))
            for child in self._children:
                child.start_message_id = MessageId.earliest
                child.inclusive = True
                child.seek_time = message_id
        else:
            raise TypeError(f"cannot seek to {message_id!r}")

    async def seek_last(self) -> None:
        """Move every partition to its last message, so that it is read next (a partition
        with none stays where it is)."""
        await self._connected()
        self._peeked = None

        async def one(child: ReaderTopicConsumer) -> None:
            last, _ = await self._retried(child.last_and_mark_delete)
            if last.entry_id() < 0:
                return
            await self._retried(child.seek, last, None)
            child.start_message_id = last
            child.inclusive = True
            child.seek_time = None

        await asyncio.gather(*(one(c) for c in self._children))

    async def _retried(self, request: Callable[..., Awaitable[R]], *args: Any) -> R:
        """``request(*args)`` on a subscribed partition; again if its connection is lost first
        (a seek or a question about the end is the same when asked twice)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._operation_timeout
        while True:
            await self._connected()
            try:
                return await request(*args)
            except (errors.ConnectError, errors.NotConnected):
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.05)

    async def _connected(self) -> None:
        """Until every partition is subscribed (a seek closes them all for a moment)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._operation_timeout
        while not all(c.is_connected() for c in self._children):
            if any(c.state in _GONE for c in self._children):
                raise errors.AlreadyClosed("the reader is closed")
            if loop.time() > deadline:
                raise errors.Timeout("the reader did not connect again in time")
            await asyncio.sleep(0.01)

    def topic(self) -> str:
        return self._consumer.topic()

    def subscription_name(self) -> str:
        return self._consumer.subscription_name()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def consumer(self) -> Consumer[ValueT]:
        """The non-durable consumer under this reader (for statistics and tests)."""
        return self._consumer

    async def receive(self, timeout_millis: int | None = None) -> Message[ValueT]:
        """``read_next``, by the consumer's name (what a listener's loop calls)."""
        return await self.read_next(timeout_millis)

    def start_listener(self, listener: ReaderListener[ValueT]) -> None:
        """Call ``listener(reader, message)`` for every message, until closed (what
        ``create_reader(reader_listener=...)`` starts)."""
        if self._listener is not None:
            raise errors.InvalidConfiguration("this reader already has a listener")
        self._listener = start_listener(self, listener, self._listening)

    def pause_listener(self) -> None:
        """Stop handing messages to the listener (the one it is handling finishes)."""
        self._listening.clear()

    def resume_listener(self) -> None:
        self._listening.set()

    async def close(self) -> None:
        await self._consumer.close()
        listener, self._listener = self._listener, None
        if listener is not None and listener is not asyncio.current_task():
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)

    async def __aenter__(self) -> Reader[ValueT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __aiter__(self) -> Reader[ValueT]:
        return self

    async def __anext__(self) -> Message[ValueT]:
        try:
            return await self.read_next()
        except errors.AlreadyClosed:
            raise StopAsyncIteration from None

    def __repr__(self) -> str:
        return f"<Reader {self.topic()}>"


async def open_reader(session: Session, name: str, parts: list[tuple[str, int]],
                      start_message_id: MessageId, subscription: str, reader_name: str | None,
                      start_message_id_inclusive: bool, receiver_queue_size: int,
                      is_read_compacted: bool, *, next_id: Callable[[], int],
                      operation_timeout: float, schema: Schema[ValueT] | None = None,
                      reader_listener: ReaderListener[ValueT] | None = None
                      ) -> Reader[ValueT]:
    """A started ``Reader`` of topic ``name`` (``parts``: its partitions, or itself as
    partition -1) over the non-durable ``subscription``; on a partitioned topic a start id of
    one partition starts the others at the earliest. ``schema`` decodes its messages'
    values; ``reader_listener(reader, message)`` gets every message from then on."""
    queue = ReceiveQueue()
    children: list[ReaderTopicConsumer] = []
    for part, index in parts:
        start = start_message_id
        if len(parts) > 1 and start.partition() >= 0 and start.partition() != index:
            start = MessageId.earliest
        conf = ConsumerConfig(
            sub_type=pb.CommandSubscribe.SubType.Exclusive,
            receiver_queue_size=receiver_queue_size, consumer_name=reader_name,
            durable=False, read_compacted=is_read_compacted, start_message_id=start,
            schema=schema)
        child = ReaderTopicConsumer(session, queue, part, index, subscription, conf, next_id())
        child.inclusive = start_message_id_inclusive
        children.append(child)
    consumer: Consumer[ValueT] = Consumer(session, name, subscription, children[0].conf, queue,
                                          list(children))
    if schema is not None:
        bind_consumer_schema(consumer, schema, session, name)
    await start_all(children)
    reader = Reader(consumer, children, operation_timeout)
    if start_message_id == MessageId.latest and start_message_id_inclusive:
        # As the official clients: an inclusive reader at the end reads the last message.
        try:
            await reader.seek_last()
        except BaseException:
            await reader.close()
            raise
    if reader_listener is not None:
        reader.start_listener(reader_listener)
    return reader
