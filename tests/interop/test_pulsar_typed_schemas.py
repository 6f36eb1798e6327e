"""Typed schemas between the official client (pulsar-client) and ours, both directions, on
Apache Pulsar: the official producer's JSON, Avro, String and ProtobufNative values read as
typed values by our consumer, and ours read by the official consumer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pulsar
import pytest
from pulsar import schema as official_schema

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.schema import (
    AvroSchema,
    JsonSchema,
    ProtobufNativeSchema,
    Schema,
    StringSchema,
)
from protoframe.generated.demo import events
from protoframe.generated.demo.events import OrderPlaced
from tests.interop.official_records import Reading as OfficialReading
from tests.support.real_pulsar import RealPulsar

LOGGER = logging.getLogger("pulsar.official")
LOGGER.setLevel(logging.ERROR)


@dataclass
class Reading:
    sensor: str
    value: float
    tags: list[str]


def official_order_class() -> Any:
    """A google.protobuf class of demo.events.OrderPlaced built from the descriptors the
    generator embedded: what an application using protoc's Python output would hold."""
    import base64

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(
        base64.b64decode("".join(events.FILE_DESCRIPTOR_SET)))
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("demo.events.OrderPlaced"))


@pytest.fixture(scope="module")
def official(real_pulsar: RealPulsar) -> Iterator[Any]:
    client = pulsar.Client(real_pulsar.url, logger=LOGGER, operation_timeout_seconds=60)
    yield client
    client.close()


def run(coro: Callable[[], Any], timeout: float = 120) -> Any:
    async def main() -> Any:
        return await asyncio.wait_for(coro(), timeout)

    return asyncio.run(main())


def order(i: int) -> OrderPlaced:
    return OrderPlaced(order_id=f"o-{i}", customer="c", amount_cents=100 * i, currency="EUR",
                       items=[f"sku-{i}"], placed_at_ms=1_700_000_000_000 + i)


# (name, our schema, official schema, our value of i, official value of i, official -> plain)
Case = tuple[Callable[[], Schema[Any]], Callable[[], Any], Callable[[int], Any],
             Callable[[int], Any], Callable[[Any], Any]]


def _cases() -> dict[str, Case]:
    proto = official_order_class()

    def official_order(i: int) -> Any:
        o = order(i)
        return proto(order_id=o.order_id, customer=o.customer, amount_cents=o.amount_cents,
                     currency=o.currency, items=o.items, placed_at_ms=o.placed_at_ms)

    return {
        "string": (StringSchema, official_schema.StringSchema, lambda i: f"t{i}",
                   lambda i: f"t{i}", lambda v: v),
        "json": (lambda: JsonSchema(Reading), lambda: official_schema.JsonSchema(OfficialReading),
                 lambda i: Reading(f"s{i}", i / 4, ["x"]),
                 lambda i: OfficialReading(sensor=f"s{i}", value=i / 4, tags=["x"]),
                 lambda v: Reading(v.sensor, v.value, list(v.tags))),
        "avro": (lambda: AvroSchema(Reading), lambda: official_schema.AvroSchema(OfficialReading),
                 lambda i: Reading(f"s{i}", i / 4, ["x"]),
                 lambda i: OfficialReading(sensor=f"s{i}", value=i / 4, tags=["x"]),
                 lambda v: Reading(v.sensor, v.value, list(v.tags))),
        "protobuf-native": (lambda: ProtobufNativeSchema(OrderPlaced),
                            lambda: official_schema.ProtobufNativeSchema(proto), order,
                            official_order,
                            lambda v: OrderPlaced.decode(v.SerializeToString())),
    }


CASE_NAMES = ["string", "json", "avro", "protobuf-native"]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_we_read_the_official_producers_values(real_pulsar: RealPulsar, official: Any,
                                               case: str) -> None:
    ours, theirs, mine, their_value, _ = _cases()[case]
    topic = f"official-schema-{case}"
    producer = official.create_producer(topic, schema=theirs())

    async def consume() -> list[Any]:
        async with PulsarClient(real_pulsar.url) as client:
            consumer = await client.subscribe(topic, "s", schema=ours(),
                                              initial_position="earliest")
            await asyncio.to_thread(lambda: [producer.send(their_value(i)) for i in range(3)])
            msgs = [await consumer.receive(timeout_millis=30000) for _ in range(3)]
            return [m.value() for m in msgs]

    try:
        assert run(consume) == [mine(i) for i in range(3)]
    finally:
        producer.close()


@pytest.mark.parametrize("case", CASE_NAMES)
def test_the_official_consumer_reads_our_values(real_pulsar: RealPulsar, official: Any,
                                                case: str) -> None:
    ours, theirs, mine, _, plain = _cases()[case]
    topic = f"to-official-schema-{case}"
    consumer = official.subscribe(topic, "s", schema=theirs(),
                                  initial_position=pulsar.InitialPosition.Earliest)

    async def produce() -> None:
        async with PulsarClient(real_pulsar.url) as client:
            producer = await client.create_producer(topic, schema=ours())
            for i in range(3):
                await producer.send(mine(i))

    try:
        run(produce)
        got = []
        for _ in range(3):
            msg = consumer.receive(timeout_millis=30000)
            got.append(plain(msg.value()))
            consumer.acknowledge(msg)
        assert got == [mine(i) for i in range(3)]
    finally:
        consumer.close()
