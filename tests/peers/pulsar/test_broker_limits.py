"""Commands over the broker's limits are refused when they arrive, and leave nothing behind.

Regression tests for issue 18, failures 1 and 2: one SUBSCRIBE with a 70,000-byte subscription
name stopped every durable write; a name over 65,535 bytes, a publish_time or a sequence_id of
2**63 or more left a data directory the broker could not start from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
    ServerError,
)
from tests.support.pulsar_raw import RawClient, refused, run, subscribe_raw

Type = BaseCommand.Type
SubType = CommandSubscribe.SubType
LONG = "n" * 70_000  # over the log's u16 name length


@run
async def test_a_long_subscription_name_is_refused_and_writes_go_on(tmp_path: Path) -> None:
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        refused(await subscribe_raw(client, "victim", LONG), ServerError.NotAllowedError,
                "subscription name", "70000", "--max-name-length")
        # Every topic keeps taking durable writes.
        await client.producer("other-topic", producer_id=2, request_id=2)
        for seq in range(3):
            await client.publish(2, seq, f"m{seq}".encode())
            await client.receipt()
        await client.close()
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.subscribe("other-topic", "sub", permits=10)
        assert [(await client.message())[1] for _ in range(3)] == [b"m0", b"m1", b"m2"]
        await client.close()


def _send(sequence_id: int = 5, publish_time: int = 1, highest: int | None = None,
          batch: int | None = None) -> tuple[BaseCommand, frames.Payload]:
    send = CommandSend(producer_id=1, sequence_id=sequence_id, num_messages=batch or 1)
    if highest is not None:
        send.highest_sequence_id = highest
    metadata = MessageMetadata(producer_name="p", sequence_id=sequence_id,
                               publish_time=publish_time)
    if batch is not None:
        metadata.num_messages_in_batch = batch
    return (BaseCommand(type_=Type.SEND, send=send),
            frames.Payload(metadata=metadata, data=b"bad"))


BAD_SENDS = {
    "publish_time": (_send(publish_time=1 << 63), "publish_time"),
    "sequence_id": (_send(sequence_id=1 << 63), "sequence_id"),
    "highest_sequence_id": (_send(highest=(1 << 64) - 1), "highest_sequence_id"),
    "empty batch": (_send(batch=0), "--max-messages-per-batch"),
    "huge batch": (_send(batch=(1 << 31) - 1), "--max-messages-per-batch"),
}


@pytest.mark.parametrize("case", list(BAD_SENDS))
@run
async def test_out_of_range_integers_get_a_send_error_and_are_not_stored(
        case: str, tmp_path: Path) -> None:
    (command, payload), words = BAD_SENDS[case]
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.producer("ints", name="p")
        await client.publish(1, 0, b"before", producer_name="p")
        await client.receipt()
        await client.send(command, payload)
        error = (await client.expect(Type.SEND_ERROR)).command.send_error
        assert error is not None and error.error == ServerError.MetadataError
        assert words in error.message
        await client.publish(1, 1, b"after", producer_name="p")
        assert (await client.receipt())[1] == 1  # the refused one took no entry id
        await client.close()
    # The data directory starts, twice (the second start reads the compacted log).
    for _ in range(2):
        async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
            client = await RawClient.connect(url)
            await client.subscribe("ints", "sub", permits=10)
            assert [(await client.message())[1] for _ in range(2)] == [b"before", b"after"]
            await client.nothing()
            answer = (await client.producer("ints", producer_id=2, request_id=2, name="p"))
            assert answer.command.producer_success is not None
            assert answer.command.producer_success.last_sequence_id == 1
            await client.close()


@run
async def test_long_producer_and_topic_names_are_refused_and_leave_no_trace(
        tmp_path: Path) -> None:
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        refused(await client.producer("names", name=LONG), ServerError.NotAllowedError,
                "producer name", "--max-name-length")
        refused(await client.producer(LONG, producer_id=2, request_id=2),
                ServerError.InvalidTopicName, "--max-name-length")
        refused(await subscribe_raw(client, "x" * 2000, "sub"), ServerError.InvalidTopicName)
        await client.producer("names", producer_id=3, request_id=3, name="short")
        await client.publish(3, 0, b"kept", producer_name="short")
        await client.receipt()
        await client.close()
    broker = EmbeddedBroker(port=0, data_dir=tmp_path)
    async with broker as url:
        assert sorted(broker.state.topics) == ["persistent://public/default/names"]
        client = await RawClient.connect(url)
        await client.subscribe("names", "sub", permits=10)
        assert (await client.message())[1] == b"kept"
        await client.close()
