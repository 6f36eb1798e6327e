"""Must fail mypy: a producer of OrderPlaced is given text."""

from __future__ import annotations

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.schema import ProtobufNativeSchema
from protoframe.generated.demo.events import OrderPlaced


async def main(client: PulsarClient) -> None:
    producer = await client.create_producer("orders", schema=ProtobufNativeSchema(OrderPlaced))
    await producer.send("text")
