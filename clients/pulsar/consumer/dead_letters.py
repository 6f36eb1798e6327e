"""Dead and retry letters: where a consumer sends the messages it gives up on or retries later.

A message whose redelivery count (the broker's, in CommandMessage) has reached the policy's
``max_redeliver_count`` goes, when it would be redelivered once more (negative
acknowledgement, ack timeout), to the dead-letter topic instead, then is acknowledged on its
own topic. ``reconsume_later`` publishes a message to the retry topic, delayed, counting its
retries in its properties; past ``max_redeliver_count`` retries it goes to the dead-letter
topic instead. Topic names and properties are those of Pulsar's clients
(``RetryMessageUtil`` of the Java client 4.0): ``<topic>-<subscription>-DLQ`` and
``-RETRY``; REAL_TOPIC and ORIGIN_MESSAGE_ID on a dead letter (the message's own properties
kept), RECONSUMETIMES and DELAY_TIME added on a retry letter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from protoframe.clients.pulsar.consumer.policies import ConsumerDeadLetterPolicy
from protoframe.clients.pulsar.message import Message, MessageId

__all__ = ["DELAY_TIME", "DLQ_SUFFIX", "MAX_RECONSUMETIMES", "ORIGIN_MESSAGE_ID",
           "RECONSUMETIMES", "REAL_TOPIC", "RETRY_SUFFIX", "Letters", "LetterProducer",
           "dead_letter_properties", "dead_letter_topic", "retry_letter_properties",
           "retry_letter_topic"]

log = logging.getLogger(__name__)

REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUMETIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"
DLQ_SUFFIX = "-DLQ"
RETRY_SUFFIX = "-RETRY"
#: The Java client's retry limit when retry letters are on without a dead-letter policy.
MAX_RECONSUMETIMES = 16


def dead_letter_topic(topic: str, subscription: str) -> str:
    return f"{topic}-{subscription}{DLQ_SUFFIX}"


def retry_letter_topic(topic: str, subscription: str) -> str:
    return f"{topic}-{subscription}{RETRY_SUFFIX}"


def origin_id(msg: Message) -> str:
    """The message id as the official Python client writes it in ORIGIN_MESSAGE_ID:
    ``(ledger,entry,partition,batch_index)``."""
    mid = msg.message_id()
    return str(MessageId(mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()))


def dead_letter_properties(msg: Message) -> dict[str, str]:
    """The message's own properties, plus where it came from unless a retry already said."""
    props = msg.properties()
    props.setdefault(REAL_TOPIC, msg.topic_name())
    props.setdefault(ORIGIN_MESSAGE_ID, origin_id(msg))
    return props


def retry_letter_properties(msg: Message, delay_ms: int,
                            extra: dict[str, str] | None = None) -> tuple[dict[str, str], int]:
    """The properties of ``msg``'s next retry letter, and its retry number (1 the first)."""
    props = msg.properties()
    if extra:
        props.update(extra)
    if RECONSUMETIMES in props:
        times = int(props[RECONSUMETIMES]) + 1
    else:
        times = 1
        props[REAL_TOPIC] = msg.topic_name()
        props[ORIGIN_MESSAGE_ID] = origin_id(msg)
    props[RECONSUMETIMES] = str(times)
    props[DELAY_TIME] = str(delay_ms)
    return props, times


class LetterProducer(Protocol):
    """What letters need of a producer (a ``producer.Producer``)."""

    async def send(self, content: bytes, properties: dict[str, str] | None = ...,
                   partition_key: str | None = ..., ordering_key: bytes | str | None = ...,
                   event_timestamp: int | None = ..., sequence_id: int | None = ...,
                   deliver_at: int | None = ..., deliver_after_ms: int | None = ...,
                   ) -> MessageId: ...

    async def close(self) -> None: ...


OpenProducer = Callable[[str], Awaitable[LetterProducer]]
CreateSubscription = Callable[[str, str], Awaitable[None]]


class Letters:
    """One consumer's dead-letter and retry-letter producers, opened on first use."""

    def __init__(self, policy: ConsumerDeadLetterPolicy, topic: str, subscription: str,
                 open_producer: OpenProducer, create_subscription: CreateSubscription) -> None:
        self.max_redeliver_count = policy.max_redeliver_count
        self.dead_topic = policy.dead_letter_topic or dead_letter_topic(topic, subscription)
        self.retry_topic = policy.retry_letter_topic or retry_letter_topic(topic, subscription)
        self._initial_subscription = policy.initial_subscription_name
        self._open = open_producer
        self._create_subscription = create_subscription
        self._producers: dict[str, asyncio.Task[LetterProducer]] = {}

    def is_dead(self, msg: Message) -> bool:
        """Whether asking for ``msg`` again should send it to the dead-letter topic."""
        return msg.redelivery_count() >= self.max_redeliver_count

    async def _producer(self, topic: str) -> LetterProducer:
        task = self._producers.get(topic)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._producers[topic] = asyncio.ensure_future(self._start(topic))
        return await asyncio.shield(task)

    async def _start(self, topic: str) -> LetterProducer:
        if topic == self.dead_topic and self._initial_subscription:
            # Before the first letter: what is sent before anyone subscribes must stay.
            await self._create_subscription(topic, self._initial_subscription)
        return await self._open(topic)

    async def send_dead(self, msg: Message, properties: dict[str, str] | None = None) -> None:
        producer = await self._producer(self.dead_topic)
        await producer.send(
            msg.data(), properties=properties if properties is not None
            else dead_letter_properties(msg),
            partition_key=msg.partition_key() if msg.has_partition_key() else None,
            ordering_key=msg.ordering_key() or None)

    async def send_retry(self, msg: Message, delay_ms: int,
                         extra: dict[str, str] | None = None) -> bool:
        """Send ``msg`` to the retry topic (or, past the limit, the dead-letter topic); True if
        it went to the dead-letter topic."""
        props, times = retry_letter_properties(msg, delay_ms, extra)
        if times > self.max_redeliver_count:
            await self.send_dead(msg, props)
            return True
        producer = await self._producer(self.retry_topic)
        await producer.send(
            msg.data(), properties=props,
            partition_key=msg.partition_key() if msg.has_partition_key() else None,
            ordering_key=msg.ordering_key() or None,
            deliver_after_ms=delay_ms if delay_ms > 0 else None)
        return False

    async def close(self) -> None:
        tasks, self._producers = list(self._producers.values()), {}
        for task in tasks:
            if not task.done():
                task.cancel()
                continue
            if task.cancelled() or task.exception() is not None:
                continue
            try:
                await task.result().close()
            except Exception as exc:
                log.debug("closing a letter producer failed: %s", exc)
