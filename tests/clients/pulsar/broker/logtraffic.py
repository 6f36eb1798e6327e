"""Produce traffic for the log tests: a raw client's messages, with what was acknowledged."""

from __future__ import annotations

import time
from pathlib import Path

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
)
from tests.support.pulsar_raw import RawClient

Type = BaseCommand.Type

# (topic, entry id) -> payload data of every acknowledged message
Acked = dict[tuple[str, int], bytes]


def send_command(producer_id: int, sequence_id: int, data: bytes, *, publish_time: int = 0,
                 producer_name: str = "raw") -> bytes:
    """One SEND frame, as the raw client would send it, with a chosen publish time."""
    metadata = MessageMetadata(producer_name=producer_name, sequence_id=sequence_id,
                               publish_time=publish_time or int(time.time() * 1000))
    return frames.Frame(
        command=BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=producer_id, sequence_id=sequence_id, num_messages=1)),
        payload=frames.Payload(metadata=metadata, data=data)).encode()


async def produce(url: str, topics: list[str], count: int, size: int = 100) -> Acked:
    """``count`` messages to each topic, pipelined; what the broker acknowledged."""
    acked: Acked = {}
    for index, topic in enumerate(topics):
        client = await RawClient.connect(url)
        await client.producer(topic, name=f"log-test-{index}")
        sent = [f"{topic}:{seq}:".encode().ljust(size, b"x") for seq in range(count)]
        await client.send_bytes(b"".join(send_command(1, seq, data)
                                         for seq, data in enumerate(sent)))
        for seq in range(count):
            _, entry_id = await client.receipt()
            acked[(topic, entry_id)] = sent[seq]
        await client.close()
    return acked


async def consume_all(url: str, topic: str, subscription: str, *, quiet: float = 1.0,
                      expect: int | None = None) -> dict[int, bytes]:
    """Everything a new Earliest subscription gets from ``topic`` until it is quiet for
    ``quiet`` seconds (or once it has ``expect`` messages)."""
    client = await RawClient.connect(url)
    await client.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
        topic=topic, subscription=subscription, subType=CommandSubscribe.SubType.Exclusive,
        consumer_id=1, request_id=1, initialPosition=CommandSubscribe.InitialPosition.Earliest)))
    await client.expect(Type.SUCCESS)
    await client.flow(1, 1_000_000)
    got: dict[int, bytes] = {}
    try:
        while expect is None or len(got) < expect:
            entry_id, data = await _next(client, quiet)
            assert entry_id not in got, f"entry {entry_id} delivered twice"
            got[entry_id] = data
    except TimeoutError:
        pass
    await client.close()
    return got


async def _next(client: RawClient, quiet: float) -> tuple[int, bytes]:
    # The raw client's decoder checks each message's CRC32C: a failing one raises here.
    frame = await client.recv(quiet)
    assert frame.command.type_ == Type.MESSAGE, f"unexpected {frame.command!r}"
    assert frame.command.message is not None and frame.payload is not None
    return frame.command.message.message_id.entryId, frame.payload.data


async def write_log(data_dir: Path, topics: list[str], count: int, size: int = 100) -> Acked:
    """A data directory whose log holds ``count`` acknowledged messages per topic and a
    cursor per topic (one message acknowledged)."""
    async with EmbeddedBroker(port=0, data_dir=data_dir) as url:
        acked = await produce(url, topics, count, size)
        for topic in topics:
            client = await RawClient.connect(url)
            await client.subscribe(topic, "cursor", permits=1)
            await client.message()
            await client.close()
    return acked
