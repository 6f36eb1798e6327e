"""Must pass mypy --strict: typed producers and consumers, and the untyped (bytes) defaults."""

from __future__ import annotations

from typing import assert_type

from protoframe.clients.pulsar import Message, Producer, PulsarClient, sync
from protoframe.clients.pulsar.schema import JsonSchema, ProtobufNativeSchema, StringSchema
from protoframe.generated.demo.events import OrderPlaced


async def typed(client: PulsarClient) -> int:
    producer = await client.create_producer("orders", schema=ProtobufNativeSchema(OrderPlaced))
    assert_type(producer, Producer[OrderPlaced])
    await producer.send(OrderPlaced(order_id="o-1", customer="c", amount_cents=5,
                                    currency="EUR", items=[], placed_at_ms=0))
    consumer = await client.subscribe("orders", "s", schema=JsonSchema(OrderPlaced))
    msg = await consumer.receive()
    assert_type(msg, Message[OrderPlaced])
    await consumer.acknowledge(msg)
    texts = await client.subscribe("texts", "s", schema=StringSchema())
    text: str = (await texts.receive()).value()
    return msg.value().amount_cents + len(text)


async def untyped(client: PulsarClient) -> bytes:
    producer: Producer = await client.create_producer("raw")
    assert_type(producer, Producer[bytes])
    await producer.send(b"payload")
    consumer = await client.subscribe("raw", "s")
    msg: Message = await consumer.receive()
    await consumer.acknowledge(msg)
    return msg.value() + msg.data()


def synchronous(client: sync.Client) -> str:
    producer = client.create_producer("orders", schema=JsonSchema(OrderPlaced))
    assert_type(producer, sync.Producer[OrderPlaced])
    consumer = client.subscribe("orders", "s", schema=JsonSchema(OrderPlaced))
    return consumer.receive().value().currency
