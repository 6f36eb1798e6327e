"""One consumer over several topics, a pattern with discovery of new topics, growing partitions.

Each scenario runs on the embedded broker and on Apache Pulsar (``target``). Waits are bounded
polls: a discovery or a partition update is waited for, never slept through.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from typing import cast

import pytest

from protoframe.clients.pulsar import PulsarClient, errors
from protoframe.clients.pulsar.broker import BrokerThread, EmbeddedBroker
from protoframe.clients.pulsar.broker.topic_watchers import topics_hash
from protoframe.clients.pulsar.consumer import Consumer
from protoframe.clients.pulsar.message import Message
from protoframe.clients.pulsar.sync import Client
from protoframe.clients.pulsar.topic_discovery import TopicDiscovery
from tests.clients.pulsar.scenarios import Broker, Target, run


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def _receive(consumer: Consumer, count: int, timeout_ms: int = 30000) -> list[Message]:
    return [await consumer.receive(timeout_millis=timeout_ms) for _ in range(count)]


def _quiet_ms(broker: Broker) -> int:
    """How long a receive waits to show nothing comes: the standalone is slower to deliver."""
    return 300 if isinstance(broker, EmbeddedBroker) else 1500


def _discovery(consumer: Consumer) -> TopicDiscovery:
    return cast(TopicDiscovery, consumer._discovery)


def test_list_subscription_receives_from_every_topic_and_acks_each(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        plain = f"persistent://public/default/{_unique('multi-plain')}"
        parted = broker.create_partitioned_topic(_unique("multi-parted"), 2)
        async with PulsarClient(url) as client:
            # Shared: Pulsar counts redeliveries only there.
            consumer = await client.subscribe([plain, parted], "s", "Shared",
                                              initial_position="earliest",
                                              negative_ack_redelivery_delay_ms=100)
            assert consumer.topics() == sorted([plain, f"{parted}-partition-0",
                                                f"{parted}-partition-1"])
            for topic in (plain, parted):
                producer = await client.create_producer(topic, batching_enabled=False)
                for i in range(4):
                    await producer.send(f"{topic}:{i}".encode())
                await producer.close()
            got = await _receive(consumer, 8)
            assert sorted(m.data() for m in got) == sorted(
                f"{t}:{i}".encode() for t in (plain, parted) for i in range(4))
            for msg in got:
                base = msg.topic_name().rpartition("-partition-")[0] or msg.topic_name()
                assert msg.data().decode().rpartition(":")[0] == base
            # Partition numbers repeat across topics: the id's topic routes the ack.
            assert {m.message_id().partition() for m in got} == {-1, 0, 1}
            nacked = next(m for m in got if m.topic_name() != plain)
            for msg in got:
                if msg is nacked:
                    consumer.negative_acknowledge(msg.message_id())
                else:
                    await consumer.acknowledge(msg.message_id())
            again = await consumer.receive(timeout_millis=30000)
            assert again.data() == nacked.data() and again.topic_name() == nacked.topic_name()
            assert again.redelivery_count() >= 1
            await consumer.acknowledge(again)
            await consumer.close()
            # Everything was acknowledged on its own topic: nothing comes back.
            consumer = await client.subscribe([plain, parted], "s", "Shared",
                                              initial_position="earliest")
            with pytest.raises(errors.Timeout):
                await consumer.receive(timeout_millis=_quiet_ms(broker))
            await consumer.unsubscribe()

    target.run(scenario)


def test_a_message_id_without_its_topic_is_refused_by_a_multi_topic_consumer() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(["a", "b"], "s", initial_position="earliest")
            producer = await client.create_producer("a")
            await producer.send(b"x")
            msg = await consumer.receive(timeout_millis=10000)
            bare = type(msg.message_id()).deserialize(msg.message_id().serialize())
            with pytest.raises(errors.InvalidConfiguration):
                await consumer.acknowledge(bare)
            with pytest.raises(TypeError):
                await client.subscribe(cast(list[str], ("a", "b")), "s")

    run(scenario)


def test_pattern_consumer_picks_up_a_topic_created_after_it_subscribed(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        prefix = _unique("pattern")
        async with PulsarClient(url) as client:
            first = await client.create_producer(f"{prefix}-one", batching_enabled=False)
            await first.send(b"before")
            consumer = await client.subscribe(
                re.compile(f"persistent://public/default/{prefix}-.*"), "s",
                initial_position="earliest", pattern_auto_discovery_period=60)
            assert consumer.topics() == [f"persistent://public/default/{prefix}-one"]
            assert (await consumer.receive(timeout_millis=30000)).data() == b"before"
            # Both brokers watch topic lists: the new topic arrives without the 60 s poll.
            await _until(lambda: _discovery(consumer).watching, "the topic-list watch")
            second = await client.create_producer(f"{prefix}-two", batching_enabled=False)
            await second.send(b"after")
            msg = await consumer.receive(timeout_millis=30000)
            assert msg.data() == b"after"
            assert msg.topic_name() == f"persistent://public/default/{prefix}-two"
            await consumer.acknowledge(msg)
            # The list's hash as Pulsar computes it (CRC32C, Guava's hex), equal on both brokers.
            assert _discovery(consumer).topics_hash == topics_hash(
                f"persistent://public/default/{prefix}-{n}" for n in ("one", "two"))
            # A topic outside the pattern is not subscribed to.
            other = await client.create_producer(_unique("elsewhere"))
            await other.send(b"no")
            with pytest.raises(errors.Timeout):
                await consumer.receive(timeout_millis=_quiet_ms(broker))
            assert len(consumer.topics()) == 2

    target.run(scenario, timeout=60)


def test_pattern_consumer_polls_a_broker_without_topic_watchers() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url) as client:
            cnx = await client.get_connection(client.service_url)
            cnx.supports_topic_watchers = False  # as a broker older than Pulsar 2.11
            consumer = await client.subscribe(
                re.compile("persistent://public/default/polled-.*"), "s",
                initial_position="earliest", pattern_auto_discovery_period=0.1)
            assert consumer.topics() == []
            producer = await client.create_producer("polled-a")
            await producer.send(b"found")
            assert (await consumer.receive(timeout_millis=10000)).data() == b"found"
            assert not _discovery(consumer).watching

    run(scenario)


def test_a_topic_gone_from_the_listing_is_unsubscribed_from() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("gone-a")
            await producer.send(b"x")
            cnx = await client.get_connection(client.service_url)
            cnx.supports_topic_watchers = False
            consumer = await client.subscribe(
                re.compile("persistent://public/default/gone-.*"), "s",
                initial_position="earliest", pattern_auto_discovery_period=0.1)
            (child,) = consumer._children
            listed = client.get_topics_of_namespace

            async def without_it(namespace: str, **kwargs: object) -> list[str]:
                return [t for t in await listed(namespace) if not t.endswith("gone-a")]

            # The embedded broker deletes no topics: the listing stands for Pulsar's deletion.
            client.get_topics_of_namespace = without_it  # type: ignore[method-assign]
            await _until(lambda: consumer.topics() == [], "the topic's removal")
            # It leaves the consumer first, then closes on the broker.
            await _until(lambda: child.state.name == "CLOSED", "its topic consumer's close")
            assert _discovery(consumer).known == set()

    run(scenario)


def test_the_broker_pushes_matching_topics_and_a_partitioned_topic_folds_into_one() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                re.compile("public/default/w-.*"), "s", initial_position="earliest")
            await _until(lambda: _discovery(consumer).watching, "the topic-list watch")
            broker.create_partitioned_topic("w-parted", 2)
            await _until(lambda: len(consumer.topics()) == 2, "both partitions")
            assert _discovery(consumer).known == {"persistent://public/default/w-parted"}
            await consumer.close()
            # Closing the consumer closed its watch on the broker.
            await _until(lambda: not broker.state.topic_listeners, "the watch's end")

    run(scenario)


def test_the_watch_opens_again_after_the_connection_drops() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                re.compile("public/default/cut-.*"), "s", initial_position="earliest")
            await _until(lambda: _discovery(consumer).watching, "the topic-list watch")
            listeners = broker.state.topic_listeners
            (old,) = listeners
            for session in list(broker.sessions):
                session.transport.abort()
            # The old connection's watch ends with it; the client opens a new one.
            await _until(lambda: len(listeners) == 1 and listeners[0] != old, "the new watch")
            producer = await client.create_producer("cut-late")
            await producer.send(b"after the cut")
            assert (await consumer.receive(timeout_millis=10000)).data() == b"after the cut"

    run(scenario)


def test_producer_and_consumer_follow_added_partitions(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        topic = broker.create_partitioned_topic(_unique("growing"), 1)
        async with PulsarClient(url, partitions_update_interval_ms=200) as client:
            consumer = await client.subscribe(topic, "s", initial_position="earliest")
            producer = await client.create_producer(topic, batching_enabled=False)
            assert producer.partitions() == 1
            broker.update_partitioned_topic(topic, 3)
            await _until(lambda: producer.partitions() == 3, "the producer's new partitions")
            await _until(lambda: len(consumer.topics()) == 3, "the consumer's new partitions")
            for i in range(9):
                await producer.send(str(i).encode())
            got = await _receive(consumer, 9)
            assert sorted(int(m.data()) for m in got) == list(range(9))
            # Round robin reached the new partitions, and the consumer read from them.
            assert {m.topic_name() for m in got} == {f"{topic}-partition-{i}" for i in range(3)}
            for msg in got:
                await consumer.acknowledge(msg)

    target.run(scenario, timeout=60)


def test_partitions_cannot_shrink_and_only_partitioned_topics_grow() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        broker.create_partitioned_topic("fixed", 2)
        with pytest.raises(ValueError):
            broker.update_partitioned_topic("fixed", 1)
        with pytest.raises(ValueError):
            broker.update_partitioned_topic("never-partitioned", 2)
        assert broker.state.partitions_of("persistent://public/default/fixed") == 2

    run(scenario)


def test_the_blocking_client_takes_a_list_and_a_pattern() -> None:
    with BrokerThread(port=0) as broker:
        client = Client(broker.url)
        try:
            for name in ("sync-a", "sync-b"):
                client.create_producer(name).send(name.encode())
            listed = client.subscribe(["sync-a", "sync-b"], "l", initial_position="earliest")
            matched = client.subscribe(re.compile("public/default/sync-.*"), "p",
                                       initial_position="earliest")
            for consumer in (listed, matched):
                got = {consumer.receive(10000).data() for _ in range(2)}
                assert got == {b"sync-a", b"sync-b"}
        finally:
            client.close()
