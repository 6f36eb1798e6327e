"""Ack timeout, dead and retry letters, negative-ack backoff, message listeners and
subscription properties, with our client on both brokers (``target``)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from protoframe.clients.pulsar import (
    ConsumerDeadLetterPolicy,
    Message,
    MultiplierRedeliveryBackoff,
    PulsarClient,
)
from protoframe.clients.pulsar.broker import BrokerThread, EmbeddedBroker
from protoframe.clients.pulsar.consumer import Consumer
from protoframe.clients.pulsar.consumer.dead_letters import (
    DELAY_TIME,
    ORIGIN_MESSAGE_ID,
    REAL_TOPIC,
    RECONSUMETIMES,
    dead_letter_topic,
    retry_letter_topic,
)
from protoframe.clients.pulsar.errors import InvalidConfiguration
from protoframe.clients.pulsar.sync import Client as SyncClient
from protoframe.clients.pulsar.sync import Consumer as SyncConsumer
from tests.clients.pulsar.scenarios import Broker, Target, run
from tests.clients.pulsar.test_client import nothing_more, receive_n, until
from tests.support.real_pulsar import RealPulsar

FULL = "persistent://public/default/"


def test_ack_timeout_redelivers_what_was_not_acknowledged(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("ack-timeout", "s", "Shared",
                                              unacked_messages_timeout_ms=200,
                                              tick_duration_ms=50)
            producer = await client.create_producer("ack-timeout", batching_enabled=False)
            for i in range(3):
                await producer.send(f"m{i}".encode())
            first = await receive_n(consumer, 3, ack=False)
            # Two are acknowledged: only the third comes back, once the timeout has passed.
            await consumer.acknowledge(first[0])
            await consumer.acknowledge(first[1])
            started = time.monotonic()
            (again,) = await receive_n(consumer, 1, timeout=10, ack=False)
            assert time.monotonic() - started >= 0.15
            assert again.data() == b"m2" and again.message_id() == first[2].message_id()
            assert again.redelivery_count() == 1
            await consumer.acknowledge(again)
            # Acknowledged: it stays away past several timeouts.
            assert await nothing_more(consumer, 500)

    target.run(scenario)


def test_ack_timeout_on_exclusive_redelivers_everything() -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("ack-timeout-x", "s",
                                              unacked_messages_timeout_ms=200,
                                              tick_duration_ms=50)
            producer = await client.create_producer("ack-timeout-x")
            for i in range(4):
                producer.send_async(f"m{i}".encode())
            await producer.flush()
            await receive_n(consumer, 4, ack=False)
            again = await receive_n(consumer, 4, timeout=10)
            assert [m.data() for m in again] == [f"m{i}".encode() for i in range(4)]
            assert await nothing_more(consumer, 300)

    run(scenario)


def test_a_negative_ack_takes_the_message_out_of_the_ack_timeout() -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("nack-timeout", "s", "Shared",
                                              unacked_messages_timeout_ms=1000,
                                              tick_duration_ms=50,
                                              negative_ack_redelivery_delay_ms=1500)
            producer = await client.create_producer("nack-timeout")
            await producer.send(b"x")
            (msg,) = await receive_n(consumer, 1, ack=False)
            nacked = time.monotonic()
            consumer.negative_acknowledge(msg)
            # Redelivered by the negative ack (1.5 s), not by the ack timeout (1 s). The ack
            # timeout is long enough that a loaded machine's stall between taking the message
            # and nacking it cannot let the timeout fire first.
            (again,) = await receive_n(consumer, 1, timeout=10)
            assert time.monotonic() - nacked >= 1.4
            assert again.redelivery_count() == 1
            assert await nothing_more(consumer, 200)

    run(scenario)


def test_nacked_past_the_limit_goes_to_the_dead_letter_topic(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                "dlq", "s", "Shared", negative_ack_redelivery_delay_ms=50,
                dead_letter_policy=ConsumerDeadLetterPolicy(max_redeliver_count=2,
                                                            initial_subscription_name="init"))
            producer = await client.create_producer("dlq", batching_enabled=False)
            sent = await producer.send(b"poison", properties={"k": "v"}, partition_key="key")
            await producer.send(b"fine")
            counts = []
            while True:
                msg = (await receive_n(consumer, 1, timeout=10, ack=False))[0]
                if msg.data() == b"fine":
                    await consumer.acknowledge(msg)
                    continue
                counts.append(msg.redelivery_count())
                consumer.negative_acknowledge(msg)
                if len(counts) == 3:
                    break
            assert counts == [0, 1, 2]
            # Sent before anyone subscribed to the DLQ: the initial subscription kept it.
            dead = await client.subscribe(dead_letter_topic(FULL + "dlq", "s"), "init",
                                          "Shared")
            (letter,) = await receive_n(dead, 1, timeout=10)
            assert letter.data() == b"poison" and letter.partition_key() == "key"
            assert letter.properties() == {
                "k": "v", REAL_TOPIC: FULL + "dlq",
                ORIGIN_MESSAGE_ID: f"({sent.ledger_id()},{sent.entry_id()},-1,-1)"}
            # Acknowledged on its own topic: never delivered again.
            assert await nothing_more(consumer, 300)

    target.run(scenario)


def test_ack_timeout_past_the_limit_goes_to_the_dead_letter_topic() -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                "dlq-timeout", "s", "Shared", unacked_messages_timeout_ms=100,
                tick_duration_ms=50,
                dead_letter_policy=ConsumerDeadLetterPolicy(1, dead_letter_topic="graveyard"))
            dead = await client.subscribe("graveyard", "d")
            producer = await client.create_producer("dlq-timeout")
            await producer.send(b"stuck")
            seen = await receive_n(consumer, 2, timeout=10, ack=False)
            assert [m.redelivery_count() for m in seen] == [0, 1]
            (letter,) = await receive_n(dead, 1, timeout=10)
            assert letter.data() == b"stuck"
            assert letter.properties()[REAL_TOPIC] == FULL + "dlq-timeout"
            assert await nothing_more(consumer, 300)

    run(scenario)


def test_reconsume_later_goes_through_the_retry_topic_then_the_dead_letter_topic(
        target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                "retry", "s", "Shared", retry_enable=True,
                dead_letter_policy=ConsumerDeadLetterPolicy(2))
            dead = await client.subscribe(dead_letter_topic(FULL + "retry", "s"), "d")
            producer = await client.create_producer("retry")
            sent = await producer.send(b"later", properties={"a": "1"})
            seen: list[Message] = []
            for _ in range(3):
                (msg,) = await receive_n(consumer, 1, timeout=15, ack=False)
                seen.append(msg)
                await consumer.reconsume_later(msg, 100 if seen[1:] else 0)
            assert [m.data() for m in seen] == [b"later"] * 3
            assert seen[0].topic_name() == FULL + "retry"
            assert seen[1].topic_name() == retry_letter_topic(FULL + "retry", "s")
            first = seen[0].message_id()
            assert (first.ledger_id(), first.entry_id()) == (sent.ledger_id(), sent.entry_id())
            origin = f"({first.ledger_id()},{first.entry_id()},-1,{first.batch_index()})"
            assert seen[1].properties() == {"a": "1", REAL_TOPIC: FULL + "retry",
                                            ORIGIN_MESSAGE_ID: origin, RECONSUMETIMES: "1",
                                            DELAY_TIME: "0"}
            assert seen[2].properties()[RECONSUMETIMES] == "2"
            # The third retry is past the limit: the dead-letter topic instead.
            (letter,) = await receive_n(dead, 1, timeout=10)
            assert letter.properties() == {"a": "1", REAL_TOPIC: FULL + "retry",
                                           ORIGIN_MESSAGE_ID: origin, RECONSUMETIMES: "3",
                                           DELAY_TIME: "100"}
            assert await nothing_more(consumer, 300)

    target.run(scenario)


def test_reconsume_later_needs_retry_enable() -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("no-retry", "s")
            producer = await client.create_producer("no-retry")
            await producer.send(b"x")
            (msg,) = await receive_n(consumer, 1, ack=False)
            with pytest.raises(InvalidConfiguration):
                await consumer.reconsume_later(msg, 10)

    run(scenario)


def test_negative_ack_backoff_grows_with_the_redelivery_count(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                "backoff", "s", "Shared",
                negative_ack_redelivery_backoff=MultiplierRedeliveryBackoff(
                    min_delay_ms=20, max_delay_ms=160, multiplier=2))
            producer = await client.create_producer("backoff")
            await producer.send(b"again")
            gaps = []
            (msg,) = await receive_n(consumer, 1, ack=False)
            for _ in range(4):
                nacked = time.monotonic()
                consumer.negative_acknowledge(msg)
                (msg,) = await receive_n(consumer, 1, timeout=10, ack=False)
                gaps.append(time.monotonic() - nacked)
            assert msg.redelivery_count() == 4
            # 20, 40, 80, 160 ms asked: each wait is at least its own delay (timers never
            # fire early), however loaded the machine.
            assert all(gap >= delay * 0.9 for gap, delay in zip(gaps, [0.02, 0.04, 0.08, 0.16],
                                                                 strict=True))
            await consumer.acknowledge(msg)

    target.run(scenario)


def test_backoff_delays() -> None:
    backoff = MultiplierRedeliveryBackoff(min_delay_ms=100, max_delay_ms=1000, multiplier=3)
    assert [backoff.next(n) for n in range(5)] == [100, 300, 900, 1000, 1000]
    assert MultiplierRedeliveryBackoff().next(10_000) == 60000
    with pytest.raises(ValueError):
        MultiplierRedeliveryBackoff(min_delay_ms=10, max_delay_ms=5)
    with pytest.raises(ValueError):
        ConsumerDeadLetterPolicy(0)


def test_message_listener_gets_every_message_and_survives_its_errors(
        target: Target, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        got: list[bytes] = []
        got_async: list[bytes] = []

        def listener(consumer: Consumer, msg: Message) -> None:
            got.append(msg.data())
            consumer.acknowledge_nowait(msg)
            if msg.data() == b"m3":
                raise RuntimeError("listener bug")

        async def async_listener(consumer: Consumer, msg: Message) -> None:
            await asyncio.sleep(0)
            got_async.append(msg.data())
            await consumer.acknowledge(msg)

        async with PulsarClient(url) as client:
            consumer = await client.subscribe("listen", "s", message_listener=listener)
            other = await client.subscribe("listen", "s2", message_listener=async_listener)
            producer = await client.create_producer("listen")
            for i in range(10):
                producer.send_async(f"m{i}".encode())
            await producer.flush()
            expected = [f"m{i}".encode() for i in range(10)]
            await until(lambda: len(got) == 10 and len(got_async) == 10, timeout=10)
            assert got == expected and got_async == expected
            other.pause_message_listener()
            await consumer.close()
            await producer.send(b"after close")
            # Arrived (queued, or held by the paused listener), whatever the listener was doing
            # when paused.
            (child,) = other._children
            await until(lambda: child.received == 11, timeout=10)
            await asyncio.sleep(0.1)
            assert len(got) == 10 and len(got_async) == 10  # closed, paused
            other.resume_message_listener()
            await until(lambda: len(got_async) == 11, timeout=10)
            assert got_async[-1] == b"after close"
            await other.close()

    with caplog.at_level(logging.ERROR, logger="protoframe.clients.pulsar.consumer.listener"):
        target.run(scenario)
    assert "listener bug" in caplog.text


def test_subscription_properties_reach_the_broker(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            await client.subscribe("sub-props", "s",
                                   subscription_properties={"team": "orders", "v": "2"})
            if isinstance(broker, EmbeddedBroker):
                topic = broker.state.topics[FULL + "sub-props"]
                assert topic.subscriptions["s"].properties == {"team": "orders", "v": "2"}
            else:
                assert isinstance(broker, RealPulsar)
                stats = broker.admin("GET", "persistent/public/default/sub-props/stats")
                assert isinstance(stats, dict)
                assert stats["subscriptions"]["s"]["subscriptionProperties"] == \
                    {"team": "orders", "v": "2"}

    target.run(scenario)


def test_sync_client_listener_gets_the_sync_consumer_on_a_worker_thread() -> None:
    got: list[bytes] = []
    threads: set[str] = set()
    done = threading.Event()

    def listener(consumer: SyncConsumer, msg: Message) -> None:
        threads.add(threading.current_thread().name)
        consumer.acknowledge(msg)  # a blocking call: not on the client's loop thread
        got.append(msg.data())
        if len(got) == 5:
            done.set()

    with BrokerThread(port=0) as broker, SyncClient(broker.url) as client:
        consumer = client.subscribe("sync-listen", "s", message_listener=listener)
        producer = client.create_producer("sync-listen")
        for i in range(5):
            producer.send(f"m{i}".encode())
        assert done.wait(10)
        assert got == [f"m{i}".encode() for i in range(5)]
        assert not any(name.startswith("pulsar-client") for name in threads)
        consumer.close()
