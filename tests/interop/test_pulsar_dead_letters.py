"""Dead letters and listeners against the official client (pulsar-client, C++ core), on the
embedded broker and on Apache Pulsar: our dead-letter topic read by the official consumer, the
official consumer's dead letters compared with ours, message for message, and listeners fed by
the other client's producer."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar import (
    Consumer,
    ConsumerDeadLetterPolicy,
    Message,
    MessageId,
    PulsarClient,
)
from protoframe.clients.pulsar.broker import BrokerThread
from protoframe.clients.pulsar.consumer.dead_letters import (
    ORIGIN_MESSAGE_ID,
    REAL_TOPIC,
    dead_letter_topic,
)
from tests.support.real_pulsar import RealPulsar

FULL = "persistent://public/default/"
QUIET = logging.getLogger("pulsar.official")
QUIET.setLevel(logging.ERROR)


@pytest.fixture(scope="module")
def embedded() -> Iterator[BrokerThread]:
    with BrokerThread(port=0) as running:
        yield running


@pytest.fixture(params=["embedded", "pulsar"])
def service(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """The broker's URL and a prefix that keeps each run's topics apart."""
    if request.param == "embedded":
        broker: BrokerThread = request.getfixturevalue("embedded")
        yield broker.url, "emb"
        return
    real: RealPulsar = request.getfixturevalue("real_pulsar")
    real.delete_all_topics()
    yield real.url, "real"


def origin(mid: MessageId) -> str:
    return f"({mid.ledger_id()},{mid.entry_id()},-1,-1)"


def nack_until_dead_ours(url: str, topic: str, payloads: list[tuple[bytes, dict[str, str]]],
                         max_redeliver: int) -> list[MessageId]:
    """Send with our producer; our consumer nacks everything until it is dead-lettered."""

    async def main() -> list[MessageId]:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                topic, "s", "Shared", negative_ack_redelivery_delay_ms=50,
                dead_letter_policy=ConsumerDeadLetterPolicy(
                    max_redeliver, initial_subscription_name="keep"))
            producer = await client.create_producer(topic, batching_enabled=False)
            ids = [await producer.send(data, properties=props) for data, props in payloads]
            for _ in range(len(payloads) * (max_redeliver + 1)):
                msg = await asyncio.wait_for(consumer.receive(), 20)
                consumer.negative_acknowledge(msg)
            await consumer.close()  # waits for the letters on their way
            return ids

    return asyncio.run(main())


def nack_until_dead_official(url: str, topic: str,
                             payloads: list[tuple[bytes, dict[str, str]]],
                             max_redeliver: int) -> list[MessageId]:
    """Send with our producer; the official consumer nacks everything until it is
    dead-lettered by the official client."""
    client = pulsar.Client(url, logger=QUIET, operation_timeout_seconds=20)
    try:
        consumer = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=50,
            dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
                max_redeliver_count=max_redeliver, initial_subscription_name="keep"))
        watcher = client.subscribe(dead_letter_topic(FULL + topic, "s"), "watch",
                                   consumer_type=pulsar.ConsumerType.Shared)

        async def produce() -> list[MessageId]:
            async with PulsarClient(url) as ours:
                producer = await ours.create_producer(topic, batching_enabled=False)
                return [await producer.send(data, properties=props)
                        for data, props in payloads]

        ids = asyncio.run(produce())
        for _ in range(len(payloads) * (max_redeliver + 1)):
            consumer.negative_acknowledge(consumer.receive(timeout_millis=20000))
        # The last nacks' letters go when the official client asks for redelivery: wait for
        # them on the dead-letter topic before closing.
        for _ in payloads:
            watcher.acknowledge(watcher.receive(timeout_millis=20000))
        consumer.close()
    finally:
        client.close()
    return ids


def read_dead_letters(url: str, topic: str, count: int) -> list[tuple[bytes, dict[str, str]]]:
    """The dead-letter topic's messages, read by the official client from the subscription
    made before the first letter."""
    client = pulsar.Client(url, logger=QUIET, operation_timeout_seconds=20)
    try:
        consumer = client.subscribe(dead_letter_topic(FULL + topic, "s"), "keep",
                                    consumer_type=pulsar.ConsumerType.Shared)
        out = []
        for _ in range(count):
            msg = consumer.receive(timeout_millis=20000)
            out.append((msg.data(), dict(msg.properties())))
            consumer.acknowledge(msg)
        return out
    finally:
        client.close()


PAYLOADS = [(b"poison-1", {"k": "v"}), (b"poison-2", {})]


def test_official_consumer_reads_our_dead_letters(service: tuple[str, str]) -> None:
    url, prefix = service
    topic = f"{prefix}-our-dlq"
    ids = nack_until_dead_ours(url, topic, PAYLOADS, 2)
    letters = sorted(read_dead_letters(url, topic, 2))
    assert letters == [
        (data, {**props, REAL_TOPIC: FULL + topic, ORIGIN_MESSAGE_ID: origin(mid)})
        for (data, props), mid in zip(PAYLOADS, ids, strict=True)]


def test_our_dead_letters_are_the_official_clients(service: tuple[str, str]) -> None:
    url, prefix = service
    ours, theirs = f"{prefix}-dlq-ours", f"{prefix}-dlq-theirs"
    our_ids = nack_until_dead_ours(url, ours, PAYLOADS, 1)
    their_ids = nack_until_dead_official(url, theirs, PAYLOADS, 1)
    our_letters = sorted(read_dead_letters(url, ours, 2))
    their_letters = sorted(read_dead_letters(url, theirs, 2))

    def normalized(letters: list[tuple[bytes, dict[str, str]]], topic: str,
                   ids: list[MessageId]) -> list[tuple[bytes, dict[str, str]]]:
        # The topic and the ids differ by construction: each must name its own.
        by_origin = {origin(mid): i for i, mid in enumerate(ids)}
        out = []
        for data, props in letters:
            assert props.pop(REAL_TOPIC) == FULL + topic
            assert PAYLOADS[by_origin[props.pop(ORIGIN_MESSAGE_ID)]][0] == data
            out.append((data, props))
        return out

    assert normalized(our_letters, ours, our_ids) == \
        normalized(their_letters, theirs, their_ids) == sorted(PAYLOADS)


def test_official_producer_messages_reach_our_dead_letter_topic(
        service: tuple[str, str]) -> None:
    url, prefix = service
    topic = f"{prefix}-from-official"
    client = pulsar.Client(url, logger=QUIET, operation_timeout_seconds=20)
    try:
        producer = client.create_producer(topic, batching_enabled=False)

        async def consume() -> None:
            async with PulsarClient(url) as ours:
                consumer = await ours.subscribe(
                    topic, "s", "Shared", negative_ack_redelivery_delay_ms=50,
                    initial_position="earliest",
                    dead_letter_policy=ConsumerDeadLetterPolicy(
                        1, initial_subscription_name="keep"))
                producer.send(b"official", properties={"from": "official"})
                for _ in range(2):
                    consumer.negative_acknowledge(
                        await asyncio.wait_for(consumer.receive(), 20))
                await consumer.close()

        asyncio.run(consume())
    finally:
        client.close()
    ((data, props),) = read_dead_letters(url, topic, 1)
    assert data == b"official" and props["from"] == "official"
    assert props[REAL_TOPIC] == FULL + topic


def test_listeners_both_ways(service: tuple[str, str]) -> None:
    """The official producer to our listener, and ours to the official client's listener."""
    url, prefix = service
    to_ours, to_theirs = f"{prefix}-listen-ours", f"{prefix}-listen-theirs"
    theirs_got: list[bytes] = []
    theirs_done = threading.Event()

    def their_listener(consumer: Any, msg: Any) -> None:
        theirs_got.append(msg.data())
        consumer.acknowledge(msg)
        if len(theirs_got) == 5:
            theirs_done.set()

    client = pulsar.Client(url, logger=QUIET, operation_timeout_seconds=20)
    try:
        client.subscribe(to_theirs, "s", message_listener=their_listener)
        official_producer = client.create_producer(to_ours, batching_enabled=True,
                                                   batching_max_publish_delay_ms=20)

        async def main() -> list[bytes]:
            got: list[bytes] = []
            done = asyncio.Event()

            async def listener(consumer: Consumer, msg: Message) -> None:
                got.append(msg.data())
                await consumer.acknowledge(msg)
                if len(got) == 5:
                    done.set()

            async with PulsarClient(url) as ours:
                await ours.subscribe(to_ours, "s", message_listener=listener)
                producer = await ours.create_producer(to_theirs)
                for i in range(5):
                    official_producer.send_async(f"o{i}".encode(), None)
                    await producer.send(f"p{i}".encode())
                official_producer.flush()
                await asyncio.wait_for(done.wait(), 20)
            return got

        got = asyncio.run(main())
        assert theirs_done.wait(20)
    finally:
        client.close()
    assert got == [f"o{i}".encode() for i in range(5)]
    assert theirs_got == [f"p{i}".encode() for i in range(5)]
