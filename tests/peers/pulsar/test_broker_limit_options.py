"""The broker's limits are options, and each one holds for the commands it covers."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from protoframe.clients.pulsar.broker import BrokerProcess, EmbeddedBroker
from protoframe.clients.pulsar.broker.cli import limits_of, register
from protoframe.clients.pulsar.broker.limits import Limits
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandConnect,
    CommandProducer,
    CommandSubscribe,
    IntRange,
    KeySharedMeta,
    KeySharedMode,
    KeyValue,
    ServerError,
)
from tests.support.pulsar_raw import RawClient, refused, run, subscribe_raw

Type = BaseCommand.Type


@run
async def test_metadata_properties_and_hash_ranges_have_limits() -> None:
    limits = Limits(max_name_length=40, max_metadata_entries=2, max_metadata_size=20,
                    max_hash_ranges=2)
    broker = EmbeddedBroker(port=0, limits=limits)
    async with broker as url:
        client = await RawClient.connect(url)
        assert (await client.producer("t", name="x" * 40)).command.producer_success is not None
        refused(await client.producer("t", producer_id=2, request_id=2, name="x" * 41),
                ServerError.NotAllowedError, "41 bytes", "limit of 40")
        three = [KeyValue(key=f"k{i}", value="v") for i in range(3)]
        await client.send(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
            topic="t", producer_id=3, request_id=3, metadata=three)))
        refused(await client.recv(), ServerError.NotAllowedError, "3 entries",
                "--max-metadata-entries")
        big = [KeyValue(key="k", value="v" * 20)]
        refused(await subscribe_raw(client, "t", "s", metadata=big),
                ServerError.NotAllowedError, "consumer metadata", "--max-metadata-size")
        refused(await subscribe_raw(client, "t", "s", subscription_properties=big),
                ServerError.NotAllowedError, "subscription properties")
        refused(await subscribe_raw(client, "t", "s" * 41), ServerError.NotAllowedError,
                "subscription name")
        refused(await subscribe_raw(client, "t", "s", consumer_name="c" * 41),
                ServerError.NotAllowedError, "consumer name")
        sticky = [IntRange(start=0, end=9), IntRange(start=10, end=19),
                  IntRange(start=20, end=29)]
        refused(await subscribe_raw(client, "t", "s", subType=CommandSubscribe.SubType.Key_Shared,
                                    keySharedMeta=KeySharedMeta(
                                        keySharedMode=KeySharedMode.STICKY, hashRanges=sticky)),
                ServerError.NotAllowedError, "3 hash ranges", "--max-hash-ranges")
        outside = [IntRange(start=0, end=65536)]
        refused(await subscribe_raw(client, "t", "s", subType=CommandSubscribe.SubType.Key_Shared,
                                    keySharedMeta=KeySharedMeta(
                                        keySharedMode=KeySharedMode.STICKY, hashRanges=outside)),
                ServerError.NotAllowedError, "outside 0..65535")
        # Topic names count in their fully qualified form (28 bytes before "t" * 20).
        refused(await client.producer("t" * 20, producer_id=4, request_id=4),
                ServerError.InvalidTopicName)
        # Nothing refused created a subscription.
        topic = broker.state.topics["persistent://public/default/t"]
        assert topic.subscriptions == {}
        await client.close()


def test_every_limit_is_a_broker_option() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args([
        "broker", "--max-message-size", "1000", "--max-name-length", "64",
        "--max-metadata-entries", "3", "--max-metadata-size", "100",
        "--max-messages-per-batch", "10", "--max-hash-ranges", "4",
        "--broker-deduplication-producer-inactivity-timeout-minutes", "0.5"])
    assert limits_of(args) == Limits(
        max_message_size=1000, max_name_length=64, max_metadata_entries=3,
        max_metadata_size=100, max_messages_per_batch=10, max_hash_ranges=4,
        dedup_inactivity_minutes=0.5)
    assert limits_of(parser.parse_args(["broker"])) == Limits()
    # Names longer than the log can hold cannot be allowed.
    with pytest.raises(SystemExit, match="65535"):
        limits_of(parser.parse_args(["broker", "--max-name-length", "70000"]))
    with pytest.raises(SystemExit, match="positive"):
        limits_of(parser.parse_args(["broker", "--max-hash-ranges", "0"]))


@run
async def test_the_message_size_limit_is_what_connected_announces() -> None:
    async with EmbeddedBroker(port=0, limits=Limits(max_message_size=2048)) as url:
        client = await RawClient.connect(url, handshake=False)
        await client.send(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
            client_version="t", protocol_version=20)))
        connected = (await client.expect(Type.CONNECTED)).command.connected
        assert connected is not None and connected.max_message_size == 2048
        await client.producer("size")
        await client.publish(1, 0, b"x" * 100_000)  # far over the frame limit
        assert await client.closed_by_broker()


@run
async def test_the_command_line_options_reach_the_broker() -> None:
    process = BrokerProcess(extra_args=("--max-name-length", "40",
                                        "--max-message-size", "4096"))
    url = await asyncio.to_thread(process.start, 60.0)
    try:
        client = await RawClient.connect(url, handshake=False)
        await client.send(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
            client_version="t", protocol_version=20)))
        connected = (await client.expect(Type.CONNECTED)).command.connected
        assert connected is not None and connected.max_message_size == 4096
        refused(await client.producer("t", name="x" * 41), ServerError.NotAllowedError,
                "limit of 40")
        await client.close()
    finally:
        await asyncio.to_thread(process.stop)
