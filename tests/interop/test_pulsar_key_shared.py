"""Key_Shared as Pulsar 4 assigns it, on the embedded broker and on Apache Pulsar: the same
consumer names and keys give the same key -> consumer mapping (AUTO_SPLIT: consistent hashing
over Murmur3_32), and overlapping STICKY ranges are refused on both."""

from __future__ import annotations

import asyncio
import time

import pulsar
import pytest

from protoframe.clients.pulsar import PulsarClient, Timeout
from protoframe.clients.pulsar.broker import BrokerThread
from protoframe.clients.pulsar.errors import ConsumerAssignError
from protoframe.generated.pulsar import pulsar_api as pb
from tests.support.real_pulsar import RealPulsar

pytestmark = pytest.mark.interop

NAMES = ["ks-alpha", "ks-beta", "ks-gamma"]
KEYS = [f"order-{i}" for i in range(30)]
LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def ring_ours(url: str) -> dict[str, str]:
    async def run() -> dict[str, str]:
        async with PulsarClient(url, operation_timeout_seconds=30) as client:
            consumers = {name: await client.subscribe(
                "ks-ring", "k", subscription_type="Key_Shared", consumer_name=name)
                for name in NAMES}
            producer = await client.create_producer("ks-ring", batching_enabled=False)
            for key in KEYS:
                for _ in range(2):  # twice: a key stays with its consumer
                    await producer.send(key.encode(), partition_key=key)
            owner: dict[str, str] = {}
            got = 0
            deadline = time.monotonic() + 60
            while got < 2 * len(KEYS) and time.monotonic() < deadline:
                for name, consumer in consumers.items():
                    try:
                        msg = await consumer.receive(timeout_millis=100)
                    except Timeout:
                        continue
                    got += 1
                    key = msg.partition_key()
                    assert owner.setdefault(key, name) == name, f"{key} went to two consumers"
                    await consumer.acknowledge(msg)
            assert got == 2 * len(KEYS)
            return owner

    return asyncio.run(asyncio.wait_for(run(), 120))


def ring_official(url: str) -> dict[str, str]:
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    try:
        consumers = {name: client.subscribe(
            "ks-ring", "k", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name)
            for name in NAMES}
        producer = client.create_producer("ks-ring", batching_enabled=False)
        for key in KEYS:
            for _ in range(2):
                producer.send(key.encode(), partition_key=key)
        owner: dict[str, str] = {}
        got = 0
        deadline = time.monotonic() + 60
        while got < 2 * len(KEYS) and time.monotonic() < deadline:
            for name, consumer in consumers.items():
                try:
                    msg = consumer.receive(100)
                except pulsar.Timeout:
                    continue
                got += 1
                key = msg.partition_key()
                assert owner.setdefault(key, name) == name, f"{key} went to two consumers"
                consumer.acknowledge(msg)
        assert got == 2 * len(KEYS)
        return owner
    finally:
        client.close()


@pytest.mark.parametrize("client", ["ours", "official"])
def test_auto_split_maps_keys_to_the_consumers_pulsar_picks(client: str,
                                                             real_pulsar: RealPulsar) -> None:
    observe = {"ours": ring_ours, "official": ring_official}[client]
    with BrokerThread(port=0) as broker:
        embedded = observe(broker.url)
    real_pulsar.delete_all_topics()
    actual = observe(real_pulsar.url)
    assert set(actual) == set(KEYS) and len(set(actual.values())) > 1
    assert embedded == actual


def sticky_overlap_ours(url: str) -> str:
    async def run() -> str:
        async with PulsarClient(url, operation_timeout_seconds=30) as client:
            await client.subscribe("ks-sticky", "k", subscription_type="Key_Shared",
                                   key_shared_mode=pb.KeySharedMode.STICKY,
                                   key_shared_ranges=[(0, 1000)])
            try:
                await client.subscribe("ks-sticky", "k", subscription_type="Key_Shared",
                                       key_shared_mode=pb.KeySharedMode.STICKY,
                                       key_shared_ranges=[(500, 2000)])
            except ConsumerAssignError as exc:
                return "refused: " + str(exc).split(" consumer ")[0]
            return "accepted"

    return asyncio.run(asyncio.wait_for(run(), 120))


def sticky_overlap_official(url: str) -> str:
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    try:
        def sticky(span: tuple[int, int]) -> pulsar.ConsumerKeySharedPolicy:
            return pulsar.ConsumerKeySharedPolicy(key_shared_mode=pulsar.KeySharedMode.Sticky,
                                                  sticky_ranges=[span])

        client.subscribe("ks-sticky", "k", consumer_type=pulsar.ConsumerType.KeyShared,
                         key_shared_policy=sticky((0, 1000)))
        try:
            client.subscribe("ks-sticky", "k", consumer_type=pulsar.ConsumerType.KeyShared,
                             key_shared_policy=sticky((500, 2000)))
        except pulsar.PulsarException as exc:
            return f"refused: {type(exc).__name__}"
        return "accepted"
    finally:
        client.close()


def test_overlapping_sticky_ranges_are_refused_with_pulsars_error(
        real_pulsar: RealPulsar) -> None:
    with BrokerThread(port=0) as broker:
        embedded = sticky_overlap_ours(broker.url)
    real_pulsar.delete_all_topics()
    actual = sticky_overlap_ours(real_pulsar.url)
    assert actual.startswith("refused: Range conflict with")
    assert embedded == actual
    with BrokerThread(port=0) as broker:
        embedded = sticky_overlap_official(broker.url)
    real_pulsar.delete_all_topics()
    assert embedded == sticky_overlap_official(real_pulsar.url) == "refused: ConsumerAssignError"
