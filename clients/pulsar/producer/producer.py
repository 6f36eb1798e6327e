"""``Producer``, what applications hold: one ``TopicProducer`` per partition, and routing.

For a partitioned topic each message goes to a partition by its key's hash, else round-robin
(``routing``), or by the user's ``message_router``; a topic without partitions has one
``TopicProducer`` and no routing.
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import timedelta
from typing import Generic

from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.producer.future import SendFuture
from protoframe.clients.pulsar.producer.handle import TopicProducer
from protoframe.clients.pulsar.producer.options import (
    PartitionsRoutingMode,
    ProducerConfig,
    SendCallback,
)
from protoframe.clients.pulsar.routing import RoundRobinRouter, SinglePartitionRouter
from protoframe.clients.pulsar.schema.base import Schema, ValueT
from protoframe.clients.pulsar.schema.primitive import BytesSchema
from protoframe.clients.pulsar.session import Session

__all__ = ["Producer"]


class Producer(Generic[ValueT]):
    """A producer on a topic (all of its partitions, if it has several), of values of type
    ``ValueT``: bytes without a schema, else what the schema encodes."""

    def __init__(self, session: Session, topic: str, producers: list[TopicProducer],
                 conf: ProducerConfig, schema: Schema[ValueT] | None = None) -> None:
        self._session = session
        self._schema = schema
        # None: values are the payloads (no schema, or BytesSchema), the hot path.
        self._encode = schema.encode if schema is not None and \
            not isinstance(schema, BytesSchema) else None
        self._topic = topic
        self._producers = producers
        self._single = producers[0] if len(producers) == 1 and producers[0].partition < 0 \
            else None
        self._partitions = len(producers)
        self._conf = conf
        router: RoundRobinRouter | SinglePartitionRouter
        if conf.routing_mode is PartitionsRoutingMode.UseSinglePartition:
            router = SinglePartitionRouter(random.randrange(max(self._partitions, 1)),
                                           conf.hashing_scheme)
        else:
            router = RoundRobinRouter(conf.hashing_scheme)
        self._router = router
        self._custom = conf.message_router
        # The partition update (producer/partition_updates.py), ended by close.
        self._background: asyncio.Task[None] | None = None

    def _add_partitions(self, producers: list[TopicProducer]) -> None:
        """Started producers of partitions added to the topic since this one was created."""
        self._producers.extend(producers)
        self._partitions = len(self._producers)

    def partitions(self) -> int:
        """The partitions this producer writes to (0 for a topic without partitions)."""
        return 0 if self._single is not None else self._partitions

    def _choose(self, partition_key: str | None) -> TopicProducer:
        single = self._single
        if single is not None:
            return single
        n = self._partitions
        if self._custom is not None:
            index = self._custom(partition_key, n)
        else:
            index = self._router.choose(partition_key, n)
        return self._producers[index % n]

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._producers[0].producer_name

    def last_sequence_id(self) -> int:
        return max(p.last_sequence_id_published for p in self._producers)

    def is_connected(self) -> bool:
        return all(p.is_connected() for p in self._producers)

    def schema(self) -> Schema[ValueT] | None:
        return self._schema

    def send_async(
        self,
        content: ValueT,
        callback: SendCallback | None = None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,
        deliver_after_ms: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        deliver_after: timedelta | None = None,
    ) -> SendFuture:
        """Queue a message; return at once with a ``SendFuture`` for its ``MessageId``.

        Raises ``ProducerQueueIsFull`` when ``max_pending_messages`` are waiting and the
        producer does not block. With ``block_if_queue_full`` the message is queued anyway
        (this method cannot wait); ``send`` is the call that waits for room.
        ``callback(error, message_id)`` runs when the broker has answered.
        """
        encode = self._encode
        # Without a schema ValueT is bytes; no cast() call on the hot path.
        data: bytes = content if encode is None else encode(content)  # type: ignore[assignment]
        # The hot path of bench/bench_client.py's produce phase: plain data on a topic without
        # partitions goes straight to the batch, with no routing and no keyword handling.
        single = self._single
        if single is not None and callback is None and properties is None and \
                partition_key is None and ordering_key is None and event_timestamp is None and \
                sequence_id is None and deliver_at is None and deliver_after_ms is None and \
                replication_clusters is None and not disable_replication and \
                deliver_after is None:
            return single.send_simple(data)
        if deliver_after is not None:
            deliver_after_ms = _millis(deliver_after)
        producer = single if single is not None else self._choose(partition_key)
        future = _queue(producer, data, properties, partition_key, ordering_key,
                        event_timestamp, sequence_id, deliver_at, deliver_after_ms,
                        replication_clusters, disable_replication)
        if callback is not None:
            def done(f: SendFuture) -> None:
                error = f.exception()
                callback(error, None if error is not None else f.result())
            future.add_done_callback(done)
        return future

    async def send(
        self,
        content: ValueT,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,
        deliver_after_ms: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        deliver_after: timedelta | None = None,
    ) -> MessageId:
        """Send a message and return its ``MessageId`` once the broker has stored it.

        ``deliver_at`` (ms since the epoch) or ``deliver_after`` (or ``deliver_after_ms``)
        delay its delivery on Shared and Key_Shared subscriptions, as the official client's.
        """
        if deliver_after is not None:
            deliver_after_ms = _millis(deliver_after)
        encode = self._encode
        data: bytes = content if encode is None else encode(content)  # type: ignore[assignment]
        producer = self._single if self._single is not None else self._choose(partition_key)
        if self._conf.block_if_queue_full and not producer.has_room():
            await producer.wait_for_room()
        memory = self._conf.memory_limit
        if memory is not None and self._conf.block_if_queue_full:
            await memory.wait_for_room(len(data))
        return await _queue(producer, data, properties, partition_key, ordering_key,
                            event_timestamp, sequence_id, deliver_at, deliver_after_ms,
                            replication_clusters, disable_replication)

    async def flush(self) -> None:
        """Send every open batch and wait for the receipts of everything sent so far."""
        await asyncio.gather(*(p.flush() for p in self._producers))

    async def close(self) -> None:
        """Flush, then close on the broker. Later sends raise ``AlreadyClosed``."""
        task, self._background = self._background, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await asyncio.gather(*(p.close() for p in self._producers))
        self._session.forget(self)

    async def __aenter__(self) -> Producer[ValueT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<Producer {self._topic} ({self._partitions} partition(s))>"


def _millis(delay: timedelta) -> int:
    return int(delay.total_seconds() * 1000)


def _queue(producer: TopicProducer, content: bytes, properties: dict[str, str] | None,
           partition_key: str | None, ordering_key: bytes | str | None,
           event_timestamp: int | None, sequence_id: int | None, deliver_at: int | None,
           deliver_after_ms: int | None, replication_clusters: list[str] | None,
           disable_replication: bool) -> SendFuture:
    """``producer.send_async`` with the public API's conveniences turned into message fields."""
    if deliver_after_ms is not None:
        deliver_at = int(time.time() * 1000) + deliver_after_ms
    if isinstance(ordering_key, str):
        ordering_key = ordering_key.encode()
    return producer.send_async(content, properties, partition_key, ordering_key,
                               event_timestamp, sequence_id, deliver_at, replication_clusters,
                               disable_replication)
