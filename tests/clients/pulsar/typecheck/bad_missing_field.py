"""Must fail mypy: a received OrderPlaced has no field "missing_field"."""

from __future__ import annotations

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.schema import ProtobufNativeSchema
from protoframe.generated.demo.events import OrderPlaced


async def main(client: PulsarClient) -> object:
    consumer = await client.subscribe("orders", "s", schema=ProtobufNativeSchema(OrderPlaced))
    msg = await consumer.receive()
    return msg.value().missing_field
