"""Delayed delivery (``deliver_after`` / ``deliver_at``) on the embedded broker and on Apache
Pulsar, with our client and the official one on either side."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar import PulsarClient, Timeout
from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.delayed import DelayedIndex, deliver_at_of
from protoframe.clients.pulsar.broker.entries import Entry
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import MessageMetadata
from tests.clients.pulsar.scenarios import Broker, Target

LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def _now_ms() -> int:
    return int(time.time() * 1000)


def early_allowance(target: Target) -> int:
    """How early a message may come: Pulsar (not ``isDelayedDeliveryDeliverAtTimeStrict``)
    releases what falls due within its tick (100 ms in our standalone.conf); ours never early."""
    return 0 if target.real is None else 150


def test_delayed_messages_come_when_due_and_in_due_order(target: Target) -> None:
    early = early_allowance(target)

    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url, operation_timeout_seconds=30) as client:
            consumer = await client.subscribe("delayed", "s", subscription_type="Shared")
            producer = await client.create_producer("delayed", batching_enabled=False)
            sent = _now_ms()
            await producer.send(b"two", deliver_after=timedelta(milliseconds=1200))
            await producer.send(b"one", deliver_at=sent + 600)
            await producer.send(b"now")
            due = {b"two": sent + 1200, b"one": sent + 600, b"now": sent}
            got: list[bytes] = []
            for _ in range(3):
                msg = await consumer.receive(timeout_millis=30_000)
                assert _now_ms() >= due[msg.data()] - early, f"{msg.data()!r} came early"
                got.append(msg.data())
                await consumer.acknowledge(msg)
            assert got == [b"now", b"one", b"two"]

    target.run(scenario)


def test_exclusive_subscriptions_ignore_the_delay(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url, operation_timeout_seconds=30) as client:
            consumer = await client.subscribe("undelayed", "x", subscription_type="Exclusive")
            producer = await client.create_producer("undelayed", batching_enabled=False)
            await producer.send(b"at once", deliver_after=timedelta(minutes=10))
            msg = await consumer.receive(timeout_millis=30_000)
            assert msg.data() == b"at once"

    target.run(scenario)


def official_delays(url: str, official_produces: bool) -> list[tuple[bytes, int]]:
    """One side official, the other ours: (data, ms early or late against its due time)."""
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)

    async def ours_consume() -> list[tuple[bytes, int]]:
        async with PulsarClient(url, operation_timeout_seconds=30) as ours:
            consumer = await ours.subscribe("official-delay", "s", subscription_type="Shared")
            producer = client.create_producer("official-delay", batching_enabled=False)
            sent = _now_ms()
            producer.send(b"later", deliver_after=timedelta(milliseconds=1500))
            producer.send(b"sooner", deliver_at=sent + 500)
            out = []
            for due in (sent + 500, sent + 1500):
                msg = await consumer.receive(timeout_millis=30_000)
                out.append((msg.data(), _now_ms() - due))
            return out

    async def ours_produce() -> list[tuple[bytes, int]]:
        consumer = client.subscribe("official-delay", "s",
                                    consumer_type=pulsar.ConsumerType.Shared)
        async with PulsarClient(url, operation_timeout_seconds=30) as ours:
            producer = await ours.create_producer("official-delay", batching_enabled=False)
            sent = _now_ms()
            await producer.send(b"later", deliver_after_ms=1500)
            await producer.send(b"sooner", deliver_at=sent + 500)
        out = []
        for due in (sent + 500, sent + 1500):
            msg = consumer.receive(30_000)
            out.append((msg.data(), _now_ms() - due))
        return out

    try:
        return asyncio.run(ours_consume() if official_produces else ours_produce())
    finally:
        client.close()


@pytest.mark.interop  # the official client: not in make test-fast
@pytest.mark.parametrize("official_produces", [True, False], ids=["official-to-ours",
                                                                   "ours-to-official"])
def test_delays_across_clients(target: Target, official_produces: bool) -> None:
    early = early_allowance(target)

    async def scenario(url: str, broker: Any) -> None:
        got = await asyncio.to_thread(official_delays, url, official_produces)
        assert [data for data, _ in got] == [b"sooner", b"later"]
        assert all(lateness >= -early for _, lateness in got), got

    target.run(scenario, timeout=60)


def test_a_delayed_message_is_still_held_after_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        broker = EmbeddedBroker(port=0, data_dir=tmp_path, fsync=False)
        url = await broker.start()
        try:
            async with PulsarClient(url) as client:
                consumer = await client.subscribe("kept", "s", subscription_type="Shared")
                producer = await client.create_producer("kept", batching_enabled=False)
                due = _now_ms() + 1000
                await producer.send(b"held", deliver_at=due)
                await consumer.close()
        finally:
            await broker.stop()
        broker = EmbeddedBroker(port=0, data_dir=tmp_path, fsync=False)
        url = await broker.start()
        try:
            async with PulsarClient(url) as client:
                consumer = await client.subscribe("kept", "s", subscription_type="Shared")
                if _now_ms() < due - 300:
                    with pytest.raises(Timeout):
                        await consumer.receive(timeout_millis=100)
                msg = await consumer.receive(timeout_millis=30_000)
                assert msg.data() == b"held" and _now_ms() >= due
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_the_index_is_bounded_and_gives_entries_back_in_due_order() -> None:
    index = DelayedIndex(limit=2)
    assert index.hold(5, 2000) and index.hold(6, 1000)
    assert not index.hold(7, 500)  # full: the subscription stops reading until one is due
    assert index.next_due == 1000 and index.due(999) == []
    assert index.due(2000) == [6, 5] and len(index) == 0


def test_the_delay_is_read_from_the_entrys_metadata() -> None:
    def entry(metadata: MessageMetadata) -> Entry:
        return Entry(0, frames.Payload(metadata=metadata, data=b"x").encode(), 1, False, 0, b"")

    def metadata(**fields: Any) -> MessageMetadata:
        return MessageMetadata(producer_name="p", sequence_id=1,
                               publish_time=1_700_000_000_000, **fields)

    assert deliver_at_of(entry(metadata())) == 0
    assert deliver_at_of(entry(metadata(deliver_at_time=1_800_000_000_000))) \
        == 1_800_000_000_000
    # The field's key bytes (98 01) inside a string (U+0618 is d8 98) are not a delay.
    inside = metadata(partition_key="\u0618\x01")
    assert b"\x98\x01" in frames.Payload(metadata=inside, data=b"x").encode()
    assert deliver_at_of(entry(inside)) == 0
    assert deliver_at_of(Entry(0, b"not a payload", 1, False, 0, b"")) == 0
