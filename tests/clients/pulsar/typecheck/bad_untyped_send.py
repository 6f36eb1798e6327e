"""Must fail mypy: a producer without a schema sends bytes, not text."""

from __future__ import annotations

from protoframe.clients.pulsar import PulsarClient


async def main(client: PulsarClient) -> None:
    producer = await client.create_producer("raw")
    await producer.send("text")
