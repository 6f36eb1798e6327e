"""``Consumer``, what applications hold: receive, acknowledge, seek, close.

It owns the receive queue that its ``TopicConsumer``s (one per partition) fill. Hot path
(MESSAGE -> ``receive`` -> ``acknowledge``, measured by bench/bench_client.py's consume
phase): ``receive`` pops from a deque and counts a permit, and only suspends when the queue is
empty; ``acknowledge`` marks the message's position in its entry's flags and, once the whole
entry is acknowledged, adds one ``(ledger, entry)`` pair to the grouping tracker, which sends
one ACK per 100 ms or 1000 entries. A FLOW goes to the socket at once (the receive loop may not
yield again until the queue is empty).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, cast

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.consumer.handle import TopicConsumer
from protoframe.clients.pulsar.consumer.options import ConsumerConfig
from protoframe.clients.pulsar.consumer.queue import ReceiveQueue
from protoframe.clients.pulsar.message import EntryOwner, Message, MessageId, ReceivedEntry
from protoframe.clients.pulsar.schema.base import ValueT
from protoframe.clients.pulsar.session import Session

__all__ = ["Consumer"]


def _release(taken: Iterable[tuple[EntryOwner | None, int]]) -> None:
    """Tell each topic consumer how many of its messages the application took (flow control)."""
    counts: dict[EntryOwner, int] = {}
    for owner, n in taken:
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + n
    for owner, n in counts.items():
        owner.taken(n)


class Consumer(Generic[ValueT]):
    """A subscription's consumer on a topic (all of its partitions, if it has several); its
    messages' values are of type ``ValueT`` (bytes without a schema)."""

    def __init__(self, session: Session, topic: str, subscription: str, conf: ConsumerConfig,
                 queue: ReceiveQueue, children: list[TopicConsumer]) -> None:
        self._session = session
        self._topic = topic
        self._subscription = subscription
        self._conf = conf
        self._children = children
        self._by_partition = {c.partition: c for c in children}
        self._receive_queue = queue
        queue.single_source = len(children) <= 1
        # The queue's deques themselves, one attribute away for receive's hot path.
        self._queue = cast("deque[Message[ValueT]]", queue.messages)
        self._entries = queue.entries  # with deliver_entries instead of messages
        # Run on each message before it is handed over, when its schema must be fetched first
        # (AutoConsumeSchema): called with the message's schema version.
        self.prepare: Callable[[bytes], Awaitable[None]] | None = None

    async def receive(self, timeout_millis: int | None = None) -> Message[ValueT]:
        """The next message; waits for one (at most ``timeout_millis``, then ``Timeout``)."""
        if self._conf.deliver_entries:
            raise TypeError("this consumer delivers entries: use receive_entries()")
        try:
            msg = self._queue.popleft()
        except IndexError:
            await self._receive_queue.wait(timeout_millis)
            msg = self._queue.popleft()
        child = msg._entry.consumer
        if child is not None:
            permits = child.permits + 1
            if permits >= child.refill:
                child.taken(1)
            else:
                child.permits = permits
        if self.prepare is not None:
            await self.prepare(msg._entry.metadata.schema_version)
        return msg

    async def batch_receive(self, max_messages: int = 1000,
                            timeout_millis: int | None = None) -> list[Message[ValueT]]:
        """The messages already received, ``max_messages`` at most, waiting for at least one.

        For readers that handle messages in bulk: one call instead of one ``receive`` per
        message. Waits as ``receive`` does when nothing is queued.
        """
        if max_messages < 1:
            raise ValueError("max_messages must be at least 1")
        if self._conf.deliver_entries:
            raise TypeError("this consumer delivers entries: use receive_entries()")
        if not self._queue:
            await self._receive_queue.wait(timeout_millis)
        queue = self._queue
        if len(queue) <= max_messages:
            msgs = list(queue)
            queue.clear()
        else:
            msgs = [queue.popleft() for _ in range(max_messages)]
        if len(self._children) == 1:
            self._children[0].taken(len(msgs))
        else:
            _release((m._entry.consumer, 1) for m in msgs)
        if self.prepare is not None:
            for version in {m._entry.metadata.schema_version for m in msgs}:
                await self.prepare(version)
        return msgs

    async def receive_entries(self, max_entries: int = 100,
                              timeout_millis: int | None = None) -> list[ReceivedEntry]:
        """For a consumer subscribed with ``deliver_entries=True``: the entries received so
        far, whole and not yet split into messages, ``max_entries`` at most, waiting for at
        least one as ``receive`` waits for a message.

        For bulk readers that do not acknowledge (the Spark data source): a batch entry costs
        one object instead of one per message. ``entry_messages`` splits one when needed.
        Entries are delivered as the broker sent them: an ack set on a batch (what a durable
        subscription's partial acknowledgements leave) is not applied.
        """
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if not self._conf.deliver_entries:
            raise TypeError("this consumer delivers messages: subscribe with "
                            "deliver_entries=True to receive entries")
        if not self._entries:
            await self._receive_queue.wait(timeout_millis)
        entries = self._entries
        taken = [entries.popleft() for _ in range(min(max_entries, len(entries)))]
        _release((e.info.consumer, e.info.batch_size or 1) for e in taken)
        return taken

    def __aiter__(self) -> Consumer[ValueT]:
        return self

    async def __anext__(self) -> Message[ValueT]:
        try:
            return await self.receive()
        except errors.AlreadyClosed:
            raise StopAsyncIteration from None

    # ---- acknowledging ----------------------------------------------------------------------

    def _child_of(self, mid: MessageId) -> TopicConsumer:
        child = self._by_partition.get(mid.partition())
        if child is None:
            if len(self._children) == 1:
                return self._children[0]
            raise errors.InvalidConfiguration(f"{mid} is not from this consumer's partitions")
        return child

    async def acknowledge(self, message: Message[Any] | MessageId) -> None:
        """Acknowledge one message (sent grouped: within 100 ms or per 1000)."""
        # The hot path has one copy, in ``acknowledge_nowait``; calling it costs this coroutine
        # about 55 ns a message (9% of an awaited acknowledge alone, 1-2% of a receive and
        # acknowledge in bench/bench_client.py's consume phase, ``ours`` against ``ours-nowait``).
        self.acknowledge_nowait(message)

    def acknowledge_nowait(self, message: Message[Any] | MessageId) -> None:
        """``acknowledge`` without the coroutine (for synchronous callers and hot loops)."""
        # The hot path of bench/bench_client.py's consume phase (``ours`` through
        # ``acknowledge``, ``ours-nowait`` directly): a message of a batch only marks its flag
        # until the last one of its entry is acknowledged, then one position goes to the
        # grouping tracker; no MessageId is made.
        if type(message) is Message:
            info = message._entry
            child = info.consumer
            if child is None:
                return
            size = info.batch_size
            if size:
                acked = info.acked
                if acked is None:
                    acked = info.acked = bytearray(size)
                index = message._index
                if acked[index]:
                    return
                acked[index] = 1
                unacked = info.unacked - 1
                info.unacked = unacked
                if unacked > 0:
                    if child.index_acks:
                        child.tracker.add_partial(info.ledger_id, info.entry_id, acked, size)
                    return
            child.tracker.add(info.ledger_id, info.entry_id)
            return
        if isinstance(message, MessageId):
            self._child_of(message).ack_id(message)
            return
        raise TypeError(f"cannot acknowledge {message!r}")

    async def acknowledge_cumulative(self, message: Message[Any] | MessageId) -> None:
        """Acknowledge every message up to and including this one (not on Shared types)."""
        if isinstance(message, Message):
            info = message._entry
            child = info.consumer
            if child is not None:
                child.ack_cumulative(info.ledger_id, info.entry_id, message._index,
                                     info.batch_size, info)
            return
        child = self._child_of(message)
        child.ack_cumulative(message.ledger_id(), message.entry_id(), message.batch_index(),
                             message.batch_size(), None)

    def negative_acknowledge(self, message: Message[Any] | MessageId) -> None:
        """Ask for this message again after ``negative_ack_redelivery_delay_ms``."""
        if isinstance(message, Message):
            info = message._entry
            if info.consumer is not None:
                info.consumer.negative_ack(info.ledger_id, info.entry_id)
            return
        self._child_of(message).negative_ack(message.ledger_id(), message.entry_id())

    def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to send again every message not acknowledged yet."""
        for child in self._children:
            child.redeliver_all()

    # ---- control ----------------------------------------------------------------------------

    async def seek(self, message_id: MessageId | int) -> None:
        """Move the subscription to a message id, or to a publish time (ms since the epoch)."""
        if isinstance(message_id, MessageId):
            if len(self._children) > 1 and message_id.partition() >= 0:
                await self._child_of(message_id).seek(message_id, None)
            else:
                await asyncio.gather(*(c.seek(message_id, None) for c in self._children))
        elif isinstance(message_id, int):
            await asyncio.gather(*(c.seek(None, message_id) for c in self._children))
        else:
            raise TypeError(f"cannot seek to {message_id!r}")

    async def get_last_message_id(self) -> MessageId:
        """The id of the last message stored in the topic (GET_LAST_MESSAGE_ID).

        Its entry id is -1 while the topic is empty. A partitioned topic has one last
        message per partition: use ``get_last_message_ids``.
        """
        if len(self._children) != 1:
            raise ValueError(f"{self._topic} has {len(self._children)} partitions: "
                             "use get_last_message_ids()")
        return await self._children[0].get_last_message_id()

    async def get_last_message_ids(self) -> list[MessageId]:
        """The last message id of every partition, in partition order."""
        return list(await asyncio.gather(*(c.get_last_message_id() for c in self._children)))

    async def unsubscribe(self) -> None:
        """Delete the subscription (and close this consumer)."""
        await asyncio.gather(*(c.unsubscribe() for c in self._children))
        self._close_queue()

    async def close(self) -> None:
        """Send pending acknowledgements and close; ``receive`` raises ``AlreadyClosed``."""
        await asyncio.gather(*(c.close() for c in self._children))
        self._close_queue()

    def _close_queue(self) -> None:
        self._receive_queue.close()
        self._session.forget(self)

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._children[0].consumer_name if self._children else ""

    def is_connected(self) -> bool:
        return all(c.is_connected() for c in self._children)

    def has_reached_end_of_topic(self) -> bool:
        return bool(self._children) and all(c.reached_end for c in self._children)

    def is_active(self) -> bool:
        """For Failover: whether this consumer is the one the broker delivers to."""
        return any(c.active for c in self._children)

    def flush_acknowledgements(self) -> None:
        """Send grouped acknowledgements now instead of at the next 100 ms tick."""
        for child in self._children:
            child.tracker.flush()

    def queued(self) -> int:
        """Messages received and not yet taken by ``receive``."""
        return len(self._queue)

    async def __aenter__(self) -> Consumer[ValueT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<Consumer {self._topic} / {self._subscription}>"

