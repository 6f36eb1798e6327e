"""Producer access modes (Exclusive, WaitForExclusive, ExclusiveWithFencing) on the embedded
broker and on Apache Pulsar, with our client and with the official one."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.errors import ProducerBusy, ProducerFenced
from protoframe.generated.pulsar import pulsar_api as pb
from tests.clients.pulsar.scenarios import Broker, Target

Mode = pb.ProducerAccessMode
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def test_exclusive_producer_keeps_others_out_until_it_leaves(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url, operation_timeout_seconds=30) as client:
            first = await client.create_producer("excl", access_mode=Mode.Exclusive)
            with pytest.raises(ProducerFenced, match="existing exclusive producer"):
                await client.create_producer("excl", access_mode=Mode.Exclusive)
            with pytest.raises(ProducerBusy, match="existing exclusive producer"):
                await client.create_producer("excl")
            await first.send(b"one")
            await first.close()
            second = await client.create_producer("excl", access_mode=Mode.Exclusive)
            await second.send(b"two")
            await second.close()
            shared = await client.create_producer("excl")
            with pytest.raises(ProducerFenced, match="existing shared producers"):
                await client.create_producer("excl", access_mode=Mode.Exclusive)
            await shared.close()

    target.run(scenario)


def test_wait_for_exclusive_is_created_when_the_holder_leaves(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url, operation_timeout_seconds=30) as client:
            consumer = await client.subscribe("waitx", "s")
            first = await client.create_producer("waitx", access_mode=Mode.Exclusive)
            waiting = asyncio.ensure_future(
                client.create_producer("waitx", access_mode=Mode.WaitForExclusive))
            done, _ = await asyncio.wait([waiting], timeout=0.3)
            assert not done, "the waiting producer was created while another held the topic"
            await first.send(b"first")
            await first.close()
            second = await asyncio.wait_for(waiting, 60)
            await second.send(b"second")
            got = [(await consumer.receive(timeout_millis=30_000)).data() for _ in range(2)]
            assert got == [b"first", b"second"]

    target.run(scenario)


def test_exclusive_with_fencing_takes_the_topic_and_fences_the_holder(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url, operation_timeout_seconds=30) as client:
            first = await client.create_producer("fence", access_mode=Mode.Exclusive)
            await first.send(b"before")
            fencer = await client.create_producer("fence",
                                                  access_mode=Mode.ExclusiveWithFencing)
            await fencer.send(b"after")
            # The broker closed the first producer; it reconnects with its old topic epoch and
            # is refused: its sends fail, now and later.
            with pytest.raises(ProducerFenced):
                for _ in range(600):
                    await asyncio.wait_for(first.send(b"late"), 30)
                    await asyncio.sleep(0.05)
            with pytest.raises(ProducerFenced):
                await first.send(b"later")

    target.run(scenario)


def official_modes(url: str) -> list[str]:
    """The official client: Exclusive refuses a second, WaitForExclusive gets the topic when the
    holder closes, ExclusiveWithFencing takes it from the holder."""
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    seen: list[str] = []
    try:
        first = client.create_producer("official-modes",
                                       access_mode=pulsar.ProducerAccessMode.Exclusive)
        try:
            client.create_producer("official-modes",
                                   access_mode=pulsar.ProducerAccessMode.Exclusive)
            seen.append("second exclusive accepted")
        except pulsar.ProducerFenced:
            seen.append("second exclusive fenced")
        first.close()
        holder = client.create_producer("official-modes",
                                        access_mode=pulsar.ProducerAccessMode.Exclusive)
        fencer = client.create_producer("official-modes",
                                        access_mode=pulsar.ProducerAccessMode.ExclusiveWithFencing)
        fencer.send(b"fencer")
        seen.append("fencer sent")
        try:
            for _ in range(600):
                holder.send(b"late")
            seen.append("holder still sends")
        except pulsar.PulsarException as exc:
            seen.append(f"holder {type(exc).__name__}")
        return seen
    finally:
        # Closing the fenced holder may fail (AlreadyClosed): the official client says so
        # from close() at times, after the outcomes were recorded.
        with contextlib.suppress(pulsar.AlreadyClosed):
            client.close()


@pytest.mark.interop  # the official client: not in make test-fast
def test_official_client_access_modes(target: Target) -> None:
    async def scenario(url: str, broker: Any) -> None:
        seen = await asyncio.to_thread(official_modes, url)
        assert seen == ["second exclusive fenced", "fencer sent", "holder ProducerFenced"]

    target.run(scenario, timeout=60)
