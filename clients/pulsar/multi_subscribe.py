"""``PulsarClient.subscribe`` to one topic, a list of topics or a pattern, as the official client.

A ``str`` is one topic, a ``list`` several (each may be partitioned), a compiled ``re.Pattern``
every topic of its namespace whose name matches it entirely, now and later
(``topic_discovery``). All give one ``Consumer`` whose topic consumers share its receive queue;
a message's ``topic_name()`` says where it came from and its id routes acknowledgements back.
A partitioned topic's partitions are asked for again every ``partitions_update_interval``
seconds (``consumer.topic_set``), and producers do the same (``producer.partition_updates``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.consumer import Consumer, ConsumerConfig, ReceiveQueue
from protoframe.clients.pulsar.consumer.dead_letters import Letters
from protoframe.clients.pulsar.consumer.handle import TopicConsumer
from protoframe.clients.pulsar.consumer.topic_set import ConsumerTopics, PartitionsOf
from protoframe.clients.pulsar.handle import start_all
from protoframe.clients.pulsar.producer import Producer, TopicProducer
from protoframe.clients.pulsar.producer.partition_updates import follow_partitions
from protoframe.clients.pulsar.session import Session
from protoframe.clients.pulsar.topic_discovery import Mode, TopicDiscovery

__all__ = ["TopicsArgument", "subscribe_topics", "follow_producer_partitions"]

TopicsArgument = str | list[str] | re.Pattern[str]
LettersFor = Callable[[str, ReceiveQueue],
                      Awaitable[tuple[Letters | None, list[TopicConsumer]]]]


async def subscribe_topics(
        session: Session, topic: TopicsArgument, subscription_name: str, conf: ConsumerConfig,
        *, partitions_of: PartitionsOf,
        list_namespace: Callable[[str, Mode], Awaitable[list[str]]],
        connect: Callable[[], Awaitable[ClientConnection]], operation_timeout: float,
        pattern_auto_discovery_period: float, partitions_update_interval: float | None,
        next_id: Callable[[], int], letters_for: LettersFor | None = None) -> Consumer:
    """The ``Consumer`` of ``topic`` (see the module), started. ``partitions_of``,
    ``list_namespace`` and ``connect`` are the client's (this module does not know it);
    ``letters_for(topic's name, queue)`` gives its dead and retry letters and its consumers of
    the retry topic, when it has a dead-letter policy."""
    discovery: TopicDiscovery | None = None
    if isinstance(topic, re.Pattern):
        if pattern_auto_discovery_period <= 0:
            raise errors.InvalidConfiguration("pattern_auto_discovery_period must be positive")
        discovery = TopicDiscovery(
            topic.pattern, list_namespace=list_namespace, connect=connect,
            period=float(pattern_auto_discovery_period),
            operation_timeout=operation_timeout, on_change=_unset)
        topics = sorted(await discovery.list_now())
        discovery.known = set(topics)
        label = discovery.pattern
    elif isinstance(topic, list):
        if not topic or not all(isinstance(t, str) for t in topic):
            raise errors.InvalidTopicName(f"a list of topics needs topic names: {topic!r}")
        topics = list(topic)
        label = ",".join(topic)
    elif isinstance(topic, str):
        topics = [topic]
        label = topic
    else:
        raise TypeError(f"topic must be a str, a list of str or a re.Pattern: {topic!r}")

    queue = ReceiveQueue()
    shared_name: list[str] = []

    def make_child(part: str, index: int) -> TopicConsumer:
        child = TopicConsumer(session, queue, part, index, subscription_name, conf, next_id())
        # Every topic consumer of one Consumer carries one name, as the official clients.
        if conf.consumer_name is None:
            if shared_name:
                child.consumer_name = shared_name[0]
            else:
                shared_name.append(child.consumer_name)
        return child

    counts, children = await ConsumerTopics.children_for(partitions_of, make_child,
                                                         topics)
    if isinstance(topic, str):
        label = next(iter(counts))
    letters: Letters | None = None
    retry_children: list[TopicConsumer] = []
    if letters_for is not None:
        letters, retry_children = await letters_for(label, queue)
    consumer = Consumer(session, label, subscription_name, conf, queue, children,
                        retry_children=retry_children, letters=letters)
    await start_all(children + retry_children)
    tracked = ConsumerTopics(consumer, partitions_of, make_child)
    tracked.partitions.update(counts)
    if discovery is not None:
        discovery._on_change = tracked.changed
        consumer._background.append(asyncio.create_task(discovery.run()))
        consumer._discovery = discovery
    # Only a partitioned topic can grow; a pattern may match one later.
    if partitions_update_interval and (discovery is not None or any(counts.values())):
        consumer._background.append(
            asyncio.create_task(tracked.follow_partitions(partitions_update_interval)))
    return consumer


async def _unset(added: set[str], removed: set[str]) -> None:
    raise AssertionError("the discovery reports changes before its consumer exists")


def follow_producer_partitions(
        producer: Producer[Any], partitions_of: PartitionsOf,
        make_child: Callable[[str, int], TopicProducer], interval: float | None) -> None:
    """Start asking for ``producer``'s partitions every ``interval`` seconds (when set)."""
    if interval and producer.partitions() > 0:
        producer._background = asyncio.create_task(
            follow_partitions(producer, partitions_of, make_child, interval))
