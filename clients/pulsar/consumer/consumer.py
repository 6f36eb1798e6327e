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
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, cast

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.acks import Position
from protoframe.clients.pulsar.chunked import ChunkedMessage, ChunkMessageId
from protoframe.clients.pulsar.consumer.dead_letters import Letters
from protoframe.clients.pulsar.consumer.handle import TopicConsumer
from protoframe.clients.pulsar.consumer.listener import start_listener
from protoframe.clients.pulsar.consumer.options import ConsumerConfig
from protoframe.clients.pulsar.consumer.queue import ReceiveQueue
from protoframe.clients.pulsar.consumer.redelivery import Expired, UnackedTracker
from protoframe.clients.pulsar.message import EntryOwner, Message, MessageId, ReceivedEntry
from protoframe.clients.pulsar.schema.base import ValueT
from protoframe.clients.pulsar.session import Session

__all__ = ["Consumer", "MessageListener"]

log = logging.getLogger(__name__)


def _release(taken: Iterable[tuple[EntryOwner | None, int]]) -> None:
    """Tell each topic consumer how many of its messages the application took (flow control)."""
    counts: dict[EntryOwner, int] = {}
    for owner, n in taken:
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + n
    for owner, n in counts.items():
        owner.taken(n)


#: ``listener(consumer, message)``: a function, or a coroutine function (awaited).
MessageListener = Callable[["Consumer[Any]", Message[Any]], object]


class Consumer(Generic[ValueT]):
    """A subscription's consumer on a topic (all of its partitions, if it has several); its
    messages' values are of type ``ValueT`` (bytes without a schema)."""

    def __init__(self, session: Session, topic: str, subscription: str, conf: ConsumerConfig,
                 queue: ReceiveQueue, children: list[TopicConsumer], *,
                 retry_children: list[TopicConsumer] | None = None,
                 letters: Letters | None = None) -> None:
        self._session = session
        self._topic = topic
        self._subscription = subscription
        self._conf = conf
        self._children = children
        # On the retry topic (``retry_enable``): same queue, not part of the topic's partitions.
        self._retry_children = retry_children or []
        self._by_partition = {c.partition: c for c in children}
        self._by_topic = {c.topic: c for c in children}
        self._receive_queue = queue
        queue.single_source = len(self._all_children) <= 1
        self._letters = letters
        self._letter_tasks: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._listening.set()
        self._unacked: UnackedTracker | None = None
        if conf.unacked_messages_timeout_ms:
            self._unacked = UnackedTracker(conf.unacked_messages_timeout_ms / 1000.0,
                                           conf.tick_duration_ms / 1000.0, self._ack_timed_out)
            for child in self._all_children:
                child.unacked = self._unacked
        # Pattern discovery and partition updates (consumer/topic_set.py), ended by close.
        self._background: list[asyncio.Task[None]] = []
        self._discovery: object | None = None  # a pattern consumer's TopicDiscovery
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
        if self._unacked is not None:
            self._unacked.add(msg)
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
        if len(self._all_children) == 1:
            self._children[0].taken(len(msgs))
        else:
            _release((m._entry.consumer, 1) for m in msgs)
        if self.prepare is not None:
            for version in {m._entry.metadata.schema_version for m in msgs}:
                await self.prepare(version)
        if self._unacked is not None:
            for msg in msgs:
                self._unacked.add(msg)
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
        if mid._topic:
            by_topic = self._by_topic.get(mid._topic)
            if by_topic is not None:
                return by_topic
        if len(self._by_topic) != len(self._by_partition):
            # Several topics share partition numbers: only the topic can tell.
            raise errors.InvalidConfiguration(f"{mid} names no topic of this consumer")
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
        if isinstance(message, ChunkedMessage):
            self._child_of(message.message_id()).ack_id(message.message_id())
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
        """Ask for this message again after ``negative_ack_redelivery_delay_ms`` (or the
        delay ``negative_ack_redelivery_backoff`` gives for its redelivery count).

        With a dead-letter policy, a message already redelivered ``max_redeliver_count``
        times goes to the dead-letter topic instead, and is acknowledged.
        """
        if isinstance(message, ChunkedMessage):
            message = message.message_id()
        if isinstance(message, ChunkMessageId):
            child = self._child_of(message)
            for chunk in message.chunk_message_ids():
                child.negative_ack(chunk.ledger_id(), chunk.entry_id())
            return
        if isinstance(message, Message):
            info = message._entry
            if info.consumer is None:
                return
            if self._unacked is not None:
                # Its redelivery is the negative ack's now, not the ack timeout's as well.
                self._unacked.acked(info.consumer, [(info.ledger_id, info.entry_id)])
            letters = self._letters
            if letters is not None and letters.is_dead(message):
                self._spawn(self._dead_letter([message]))
                return
            backoff = self._conf.negative_ack_redelivery_backoff
            delay = None if backoff is None else backoff.next(info.redelivery_count) / 1000.0
            info.consumer.negative_ack(info.ledger_id, info.entry_id, delay)
            return
        backoff = self._conf.negative_ack_redelivery_backoff
        self._child_of(message).negative_ack(
            message.ledger_id(), message.entry_id(),
            None if backoff is None else backoff.next(0) / 1000.0)

    def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to send again every message not acknowledged yet."""
        if self._unacked is not None:
            self._unacked.clear()
        for child in self._all_children:
            child.redeliver_all()

    # ---- dead and retry letters, ack timeout --------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._letter_tasks.add(task)
        task.add_done_callback(self._letter_done)

    def _letter_done(self, task: asyncio.Task[None]) -> None:
        self._letter_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%r: a dead or retry letter failed: %s", self, task.exception())

    async def _dead_letter(self, messages: list[Message]) -> None:
        """Send to the dead-letter topic, then acknowledge (at once: a redelivery asked for
        meanwhile must not bring them back)."""
        assert self._letters is not None
        await asyncio.gather(*(self._letters.send_dead(m) for m in messages))
        for msg in messages:
            self.acknowledge_nowait(msg)
        self.flush_acknowledgements()

    def _ack_timed_out(self, expired: Expired) -> None:
        letters = self._letters
        for owner, entries in expired.items():
            if not isinstance(owner, TopicConsumer):
                continue
            dead: list[Message] = []
            again = []
            for pos, msgs in entries.items():
                doomed = [m for m in msgs if letters is not None and letters.is_dead(m)]
                dead.extend(doomed)
                if len(doomed) < len(msgs):
                    again.append(pos)
            log.debug("%r: %d entries not acknowledged in time", owner, len(entries))
            if dead:
                self._spawn(self._dead_letter_then_redeliver(owner, dead, again))
            elif again:
                owner.redeliver(again)

    async def _dead_letter_then_redeliver(self, owner: TopicConsumer, dead: list[Message],
                                          again: list[Position]) -> None:
        await self._dead_letter(dead)
        if again:
            owner.redeliver(again)

    async def reconsume_later(self, message: Message, delay_ms: int = 0,
                              properties: dict[str, str] | None = None) -> None:
        """Publish ``message`` again on the retry topic, delivered after ``delay_ms``, and
        acknowledge it here (the Java client's ``reconsumeLater``; needs ``retry_enable``).

        ``properties`` are added to the retry letter's. After ``max_redeliver_count`` retries
        it goes to the dead-letter topic instead.
        """
        if self._letters is None or not self._conf.retry_enable:
            raise errors.InvalidConfiguration(
                "reconsume_later needs a consumer subscribed with retry_enable=True")
        if delay_ms < 0:
            raise ValueError("delay_ms must not be negative")
        await self._letters.send_retry(message, delay_ms, properties)
        self.acknowledge_nowait(message)

    # ---- control ----------------------------------------------------------------------------

    async def seek(self, message_id: MessageId | int) -> None:
        """Move the subscription to a message id, or to a publish time (ms since the epoch)."""
        if isinstance(message_id, MessageId):
            if len(self._children) > 1 and (message_id.partition() >= 0 or message_id._topic):
                await self._child_of(message_id).seek(message_id, None)
            else:
                await asyncio.gather(*(c.seek(message_id, None) for c in self._children))
        elif isinstance(message_id, int):
            await asyncio.gather(*(c.seek(None, message_id) for c in self._children))
        else:
            raise TypeError(f"cannot seek to {message_id!r}")
        if self._unacked is not None:
            self._unacked.clear()

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
        await self._stop_background()
        await asyncio.gather(*(c.unsubscribe() for c in self._all_children))
        await self._close_queue()

    async def close(self) -> None:
        """Send pending acknowledgements and close; ``receive`` raises ``AlreadyClosed``."""
        await self._stop_background()
        if self._letter_tasks:
            # Letters on their way: let them land (and be acknowledged) rather than be sent
            # again after a redelivery.
            await asyncio.wait(list(self._letter_tasks),
                               timeout=self._session.operation_timeout)
        await asyncio.gather(*(c.close() for c in self._all_children))
        await self._close_queue()

    async def _stop_background(self) -> None:
        tasks, self._background = self._background, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _add_children(self, children: list[TopicConsumer]) -> None:
        """Topic consumers started for a topic or partition found after subscribing."""
        self._children.extend(children)
        for child in children:
            self._by_partition[child.partition] = child
            self._by_topic[child.topic] = child
            child.unacked = self._unacked
        self._receive_queue.single_source = len(self._all_children) <= 1

    def _remove_children(self, children: list[TopicConsumer]) -> None:
        """Forget the topic consumers of a topic gone from the pattern's matches."""
        for child in children:
            self._children.remove(child)
            self._by_topic.pop(child.topic, None)
        self._by_partition = {c.partition: c for c in self._children}

    def _children_of(self, topic: str) -> list[TopicConsumer]:
        """The topic consumers of ``topic``, a topic or a partitioned topic's base name."""
        prefix = f"{topic}-partition-"
        return [c for c in self._children if c.topic == topic or c.topic.startswith(prefix)]

    async def _close_queue(self) -> None:
        self._receive_queue.close()
        self._session.forget(self)
        if self._unacked is not None:
            self._unacked.clear()
        listener, self._listener = self._listener, None
        if listener is not None and listener is not asyncio.current_task():
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        for task in list(self._letter_tasks):
            task.cancel()
        if self._letters is not None:
            await self._letters.close()

    @property
    def _all_children(self) -> list[TopicConsumer]:
        """The topic consumers of the topics subscribed to and of the retry topic."""
        return self._children + self._retry_children

    def start_listener(self, listener: MessageListener) -> None:
        """Call ``listener(consumer, message)`` for every message, until closed (what
        ``subscribe(message_listener=...)`` starts)."""
        if self._listener is not None:
            raise errors.InvalidConfiguration("this consumer already has a message listener")
        self._listener = start_listener(self, listener, self._listening)

    def pause_message_listener(self) -> None:
        """Stop handing messages to the listener (the one it is handling finishes)."""
        self._listening.clear()

    def resume_message_listener(self) -> None:
        self._listening.set()

    def topic(self) -> str:
        return self._topic

    def topics(self) -> list[str]:
        """The topics (partitions, for a partitioned topic) this consumer receives from now."""
        return sorted(c.topic for c in self._children)

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._children[0].consumer_name if self._children else ""

    def is_connected(self) -> bool:
        return all(c.is_connected() for c in self._all_children)

    def has_reached_end_of_topic(self) -> bool:
        return bool(self._children) and all(c.reached_end for c in self._children)

    def is_active(self) -> bool:
        """For Failover: whether this consumer is the one the broker delivers to."""
        return any(c.active for c in self._children)

    def flush_acknowledgements(self) -> None:
        """Send grouped acknowledgements now instead of at the next 100 ms tick."""
        for child in self._all_children:
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

