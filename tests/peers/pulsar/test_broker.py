"""The embedded broker at the frame level: a raw client built on the generated codecs sends
exactly the bytes a test needs (including broken ones) and reads what comes back."""

from __future__ import annotations

import logging
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.commands import MAX_PROTOCOL_VERSION
from protoframe.clients.pulsar.broker.storage import FileStorage
from protoframe.clients.pulsar.broker.topics import InvalidTopicName, normalize_topic
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.commands import PROTOCOL_VERSION
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandCloseConsumer,
    CommandConnect,
    CommandGetLastMessageId,
    CommandLookupTopic,
    CommandLookupTopicResponse,
    CommandPartitionedTopicMetadata,
    CommandPing,
    CommandPong,
    CommandRedeliverUnacknowledgedMessages,
    CommandSend,
    CommandSubscribe,
    MessageIdData,
    MessageMetadata,
    ProtocolVersion,
    ServerError,
    SingleMessageMetadata,
)
from protoframe.runtime.codec.protowire import varint_bytes
from tests.support.pulsar_raw import RawClient, run

Type = BaseCommand.Type
SubType = CommandSubscribe.SubType
# --- handshake, keepalive, lookups -----------------------------------------------------------


@pytest.mark.parametrize(("offered", "agreed"), [(20, 20), (21, 21), (30, 21)])
@run
async def test_connect_negotiates_the_protocol_version(offered: int, agreed: int) -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url, handshake=False)
        await client.send(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
            client_version="raw-test", protocol_version=offered)))
        connected = (await client.expect(Type.CONNECTED)).command.connected
        assert connected is not None
        assert connected.protocol_version == agreed
        assert connected.max_message_size == 5 * 1024 * 1024
        await client.close()


@run
async def test_ping_pong_both_ways_and_silent_clients_are_dropped() -> None:
    async with EmbeddedBroker(port=0, keepalive_interval=0.2) as url:
        client = await RawClient.connect(url)
        await client.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await client.expect(Type.PONG)
        # Quiet for a while: the broker probes with PING; answering keeps the connection.
        await client.expect(Type.PING, timeout=2)
        await client.send(BaseCommand(type_=Type.PONG, pong=CommandPong()))
        await client.expect(Type.PING, timeout=2)
        # Not answering gets the connection closed.
        assert await client.closed_by_broker(timeout=3)


@run
async def test_lookups_answer_with_the_broker_and_request_ids_may_repeat() -> None:
    broker = EmbeddedBroker(port=0)
    async with broker as url:
        topic = broker.create_partitioned_topic("parts", 3)
        client = await RawClient.connect(url)
        # The official client numbers lookups separately, so ids repeat across kinds.
        for name in ("parts", "parts", "other"):
            await client.send(BaseCommand(
                type_=Type.PARTITIONED_METADATA, partitionMetadata=CommandPartitionedTopicMetadata(
                    topic=name, request_id=7)))
        answers = [(await client.expect(Type.PARTITIONED_METADATA_RESPONSE)).command
                   .partitionMetadataResponse for _ in range(3)]
        assert [(a.request_id, a.partitions) for a in answers if a] == [(7, 3), (7, 3), (7, 0)]
        for _ in range(2):
            await client.send(BaseCommand(type_=Type.LOOKUP, lookupTopic=CommandLookupTopic(
                topic=f"{topic}-partition-1", request_id=7)))
            lookup = (await client.expect(Type.LOOKUP_RESPONSE)).command.lookupTopicResponse
            assert lookup is not None and lookup.request_id == 7
            assert lookup.response == CommandLookupTopicResponse.LookupType.Connect
            assert lookup.brokerServiceUrl == url and lookup.authoritative
        answer = await client.producer("other", producer_id=0, request_id=7)
        assert answer.command.type_ == Type.PRODUCER_SUCCESS
        await client.send(BaseCommand(type_=Type.LOOKUP, lookupTopic=CommandLookupTopic(
            topic="a/b", request_id=8)))  # neither short nor qualified
        lookup = (await client.expect(Type.LOOKUP_RESPONSE)).command.lookupTopicResponse
        assert lookup is not None
        assert lookup.response == CommandLookupTopicResponse.LookupType.Failed
        assert lookup.error == ServerError.InvalidTopicName
        await client.close()


def test_topic_names_are_normalised() -> None:
    assert normalize_topic("t") == "persistent://public/default/t"
    assert normalize_topic("ten/ns/t") == "persistent://ten/ns/t"
    assert normalize_topic("persistent://ten/ns/t") == "persistent://ten/ns/t"
    assert normalize_topic("non-persistent://ten/ns/t") == "non-persistent://ten/ns/t"
    for bad in ("a/b", "", "x://a/b/c", "persistent://a/b", "a//b/c"):
        with pytest.raises(InvalidTopicName):
            normalize_topic(bad)


# --- bad input closes one connection ---------------------------------------------------------


@run
async def test_malformed_frame_closes_only_that_connection(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="protoframe.clients.pulsar.broker")
    async with EmbeddedBroker(port=0) as url:
        good = await RawClient.connect(url)
        bad = await RawClient.connect(url)
        garbage = b"\xff\xfe\xfd not protobuf"
        await bad.send_bytes(struct.pack(">II", len(garbage) + 4, len(garbage)) + garbage)
        assert await bad.closed_by_broker()
        # The other connection is untouched.
        await good.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await good.expect(Type.PONG)
        assert (await good.producer("still-works")).command.type_ == Type.PRODUCER_SUCCESS
        await good.publish(1, 0, b"hello")
        await good.receipt()
        await good.close()
    assert any("closing connection" in r.getMessage() for r in caplog.records)


@run
async def test_oversize_frame_closes_the_connection(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="protoframe.clients.pulsar.broker")
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        other = await RawClient.connect(url)
        await client.send_bytes(struct.pack(">II", 64 * 1024 * 1024, 10))  # 64 MiB announced
        assert await client.closed_by_broker()
        await other.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await other.expect(Type.PONG)
        await other.close()
    assert any("FrameTooLargeError" in r.getMessage() for r in caplog.records)


@run
async def test_protocol_violation_closes_the_connection(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="protoframe.clients.pulsar.broker")
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        other = await RawClient.connect(url)
        await client.publish(5, 0, b"from a producer that was never created")
        assert await client.closed_by_broker()
        await other.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await other.expect(Type.PONG)
        await other.close()
    assert any("ProtocolViolation" in r.getMessage() for r in caplog.records)


@run
async def test_an_unknown_command_type_closes_the_connection_unanswered(caplog: Any) -> None:
    # As Pulsar's broker: ServerCnx cannot parse a BaseCommand whose type its enum lacks, and
    # its exceptionCaught logs a warning and closes the connection without an answer.
    caplog.set_level(logging.WARNING, logger="protoframe.clients.pulsar.broker")
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        other = await RawClient.connect(url)
        ping = BaseCommand(type_=Type.PING, ping=CommandPing()).encode()[2:]
        command = b"\x08" + varint_bytes(1000) + ping  # type 1000, with a PING body
        await client.send_bytes(struct.pack(">II", len(command) + 4, len(command)) + command)
        with pytest.raises(ConnectionError):
            frame = await client.recv()
            raise AssertionError(f"answered with {frame.command!r}")
        await other.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await other.expect(Type.PONG)
        await other.close()
    warnings = [r.getMessage() for r in caplog.records]
    assert any("UnknownCommandTypeError: BaseCommand.type is 1000" in w for w in warnings), \
        warnings


def test_the_broker_accepts_up_to_the_specs_newest_protocol_version() -> None:
    assert MAX_PROTOCOL_VERSION == PROTOCOL_VERSION == max(v.value for v in ProtocolVersion)


@run
async def test_corrupt_message_gets_a_checksum_error_and_is_not_stored() -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        await client.producer("crc")
        await client.publish(1, 0, b"first")
        await client.receipt()
        metadata = MessageMetadata(producer_name="raw", sequence_id=1, publish_time=1)
        good = frames.Frame(command=BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=1, sequence_id=1)), payload=frames.Payload(
                metadata=metadata, data=b"corrupted in transit")).encode()
        corrupt = good[:-1] + bytes([good[-1] ^ 0x40])
        await client.send_bytes(corrupt)
        error = (await client.expect(Type.SEND_ERROR)).command.send_error
        assert error is not None
        assert (error.sequence_id, error.error) == (1, ServerError.ChecksumError)
        await client.publish(1, 2, b"third")  # the connection goes on
        await client.receipt()
        await client.subscribe("crc", "sub", consumer_id=3, permits=10)
        assert (await client.message())[1] == b"first"
        assert (await client.message())[1] == b"third"
        await client.nothing()
        await client.close()


# --- publishing and de-duplication -----------------------------------------------------------


@run
async def test_resends_are_acknowledged_with_the_original_id_and_stored_once() -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        answer = (await client.producer("dedup", name="p1")).command.producer_success
        assert answer is not None and answer.last_sequence_id == -1
        ids = []
        for seq in range(3):
            await client.publish(1, seq, f"m{seq}".encode(), producer_name="p1")
            ids.append(await client.receipt())
        await client.publish(1, 1, b"m1 again", producer_name="p1")
        assert await client.receipt() == ids[1]
        await client.close()
        # Another connection, same producer name: the broker remembers its sequence.
        client = await RawClient.connect(url)
        answer = (await client.producer("dedup", name="p1")).command.producer_success
        assert answer is not None and answer.last_sequence_id == 2
        await client.publish(1, 0, b"m0 again", producer_name="p1")
        assert await client.receipt() == ids[0]
        await client.publish(1, 3, b"m3", producer_name="p1")
        assert (await client.receipt())[1] == ids[2][1] + 1
        await client.subscribe("dedup", "sub", consumer_id=1, permits=10)
        got = [(await client.message())[1] for _ in range(4)]
        assert got == [b"m0", b"m1", b"m2", b"m3"]
        await client.nothing()
        await client.close()


@run
async def test_a_second_producer_with_the_same_name_is_refused() -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        first = await client.producer("names", producer_id=1, request_id=1, name="same")
        assert first.command.type_ == Type.PRODUCER_SUCCESS
        second = await client.producer("names", producer_id=2, request_id=2, name="same")
        assert second.command.error is not None
        assert second.command.error.error == ServerError.ProducerBusy
        generated = [await client.producer("names", producer_id=i, request_id=i)
                     for i in (3, 4)]
        names = {f.command.producer_success.producer_name for f in generated
                 if f.command.producer_success}
        assert len(names) == 2
        await client.close()


# --- dispatch, permits, acks -----------------------------------------------------------------


@run
async def test_a_batch_uses_one_permit_per_message() -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        await client.producer("permits")
        for seq in range(0, 12, 3):
            await client.publish(1, seq, b"batch of three", batch=3)
            await client.receipt()
        await client.subscribe("permits", "sub", consumer_id=9, permits=4)
        # 4 permits: the first batch (3), then the second while one permit is left (Pulsar
        # dispatches while permits are positive), leaving -2.
        assert [(await client.message())[0] for _ in range(2)] == [0, 1]
        await client.nothing()
        await client.flow(9, 2)  # back to 0: still nothing
        await client.nothing()
        await client.flow(9, 1)
        assert (await client.message())[0] == 2
        await client.nothing()
        await client.close()


@run
async def test_batch_index_acks_and_redelivery_with_ack_set() -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        await client.producer("ackset")
        await client.publish(1, 0, b"four messages", batch=4)
        ledger, entry = await client.receipt()
        await client.subscribe("ackset", "sub", consumer_id=1, permits=100)
        assert (await client.message())[0] == entry
        # Messages 0 and 2 acknowledged: the bits still set (1 and 3) are those left to ack.
        await client.send(BaseCommand(type_=Type.ACK, ack=CommandAck(
            consumer_id=1, ack_type=CommandAck.AckType.Individual,
            message_id=[MessageIdData(ledgerId=ledger, entryId=entry, ack_set=[0b1010])])))
        await client.send(BaseCommand(
            type_=Type.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            redeliverUnacknowledgedMessages=CommandRedeliverUnacknowledgedMessages(
                consumer_id=1)))
        _, _, frame = await client.message()
        assert frame.command.message is not None
        assert frame.command.message.ack_set == [0b1010]
        assert frame.command.message.redelivery_count == 1
        # Acknowledging the rest completes the entry.
        await client.send(BaseCommand(type_=Type.ACK, ack=CommandAck(
            consumer_id=1, ack_type=CommandAck.AckType.Individual,
            message_id=[MessageIdData(ledgerId=ledger, entryId=entry, ack_set=[0b0010])])))
        await client.send(BaseCommand(type_=Type.ACK, ack=CommandAck(
            consumer_id=1, ack_type=CommandAck.AckType.Individual,
            message_id=[MessageIdData(ledgerId=ledger, entryId=entry, ack_set=[0b1000])])))
        await client.send(BaseCommand(type_=Type.GET_LAST_MESSAGE_ID,
                                      getLastMessageId=CommandGetLastMessageId(
                                          consumer_id=1, request_id=5)))
        last = (await client.expect(Type.GET_LAST_MESSAGE_ID_RESPONSE)).command
        answer = last.getLastMessageIdResponse
        assert answer is not None
        assert (answer.last_message_id.entryId, answer.last_message_id.batch_index) == (entry, 3)
        assert answer.consumer_mark_delete_position is not None
        assert answer.consumer_mark_delete_position.entryId == entry
        await client.close()


@run
async def test_shared_consumer_dropping_its_connection_hands_messages_over() -> None:
    async with EmbeddedBroker(port=0) as url:
        producer = await RawClient.connect(url)
        await producer.producer("handover")
        for seq in range(3):
            await producer.publish(1, seq, f"m{seq}".encode())
            await producer.receipt()
        first = await RawClient.connect(url)
        await first.subscribe("handover", "sub", sub_type=SubType.Shared, permits=10)
        assert [(await first.message())[1] for _ in range(3)] == [b"m0", b"m1", b"m2"]
        second = await RawClient.connect(url)
        await second.subscribe("handover", "sub", sub_type=SubType.Shared, permits=10)
        await second.nothing()
        await first.close()  # no CLOSE_CONSUMER, no acks: the connection just goes away
        got = []
        for _ in range(3):
            _, data, frame = await second.message()
            assert frame.command.message is not None
            assert frame.command.message.redelivery_count == 1
            got.append(data)
        assert got == [b"m0", b"m1", b"m2"]
        await second.send(BaseCommand(type_=Type.CLOSE_CONSUMER, close_consumer=(
            CommandCloseConsumer(consumer_id=1, request_id=2))))
        await second.expect(Type.SUCCESS)
        await second.close()
        await producer.close()


# --- persistence -----------------------------------------------------------------------------


@run
async def test_receipts_wait_for_the_log_to_be_on_disk(tmp_path: Path,
                                                       monkeypatch: Any) -> None:
    synced: list[float] = []
    real_write = FileStorage._write

    def slow_write(self: FileStorage, chunks: list[bytes]) -> None:
        time.sleep(0.3)
        real_write(self, chunks)
        synced.append(time.monotonic())

    monkeypatch.setattr(FileStorage, "_write", slow_write)
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.producer("slow-disk")
        await client.publish(1, 0, b"m0")
        await client.receipt()
        received = time.monotonic()
        assert synced and synced[0] <= received
        await client.close()


@run
async def test_restart_with_data_dir_keeps_messages_cursor_and_dedup(tmp_path: Path) -> None:
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.producer("durable", name="writer")
        ids = []
        for seq in range(6):
            await client.publish(1, seq, f"m{seq}".encode(), producer_name="writer")
            ids.append(await client.receipt())
        await client.subscribe("durable", "sub", consumer_id=1, permits=100)
        for _ in range(6):
            await client.message()
        ledger = ids[0][0]
        # Cumulative up to m1, and m3 individually.
        await client.send(BaseCommand(type_=Type.ACK, ack=CommandAck(
            consumer_id=1, ack_type=CommandAck.AckType.Cumulative,
            message_id=[MessageIdData(ledgerId=ledger, entryId=ids[1][1])])))
        await client.send(BaseCommand(type_=Type.ACK, ack=CommandAck(
            consumer_id=1, ack_type=CommandAck.AckType.Individual,
            message_id=[MessageIdData(ledgerId=ledger, entryId=ids[3][1])], request_id=1)))
        await client.expect(Type.ACK_RESPONSE)  # answered once the cursor is on disk
        await client.close()
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        answer = (await client.producer("durable", name="writer")).command.producer_success
        assert answer is not None and answer.last_sequence_id == 5
        await client.publish(1, 4, b"m4 again", producer_name="writer")
        assert await client.receipt() == ids[4]
        await client.publish(1, 6, b"m6", producer_name="writer")
        assert await client.receipt() == (ledger, ids[5][1] + 1)
        await client.subscribe("durable", "sub", consumer_id=1, permits=100)
        got = [(await client.message())[1] for _ in range(4)]
        assert got == [b"m2", b"m4", b"m5", b"m6"]
        await client.nothing()
        await client.close()
    # A third start reads the compacted log the second one wrote.
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.subscribe("durable", "sub", consumer_id=1, permits=100)
        got = [(await client.message())[1] for _ in range(4)]
        assert got == [b"m2", b"m4", b"m5", b"m6"]
        await client.close()


@run
async def test_a_torn_log_tail_is_cut_off(tmp_path: Path, caplog: Any) -> None:
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.producer("torn")
        for seq in range(3):
            await client.publish(1, seq, f"m{seq}".encode())
            await client.receipt()
        await client.close()
    log_file = tmp_path / "broker.log"
    with open(log_file, "ab") as f:
        f.write(struct.pack(">II", 1000, 0) + b"half a record")  # a crash mid-write
    caplog.set_level(logging.WARNING, logger="protoframe.clients.pulsar.broker")
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        await client.subscribe("torn", "sub", permits=10)
        assert [(await client.message())[1] for _ in range(3)] == [b"m0", b"m1", b"m2"]
        await client.producer("torn", producer_id=2, request_id=2)
        await client.publish(2, 0, b"m3")
        await client.receipt()
        await client.close()
    assert any("torn or corrupt tail" in r.getMessage() for r in caplog.records)


# --- throughput ------------------------------------------------------------------------------


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "data-dir"])
@run
async def test_batched_publish_and_dispatch_cost_no_per_message_work(durable: bool,
                                                                   tmp_path: Path) -> None:
    """500 batches of 1000 100-byte messages in and out; the broker only looks at each entry's
    metadata, so this runs far above the ~200k msg/s a benchmark needs (the bound is loose)."""
    batch = frames.Batch(entries=[
        frames.BatchEntry(metadata=SingleMessageMetadata(payload_size=100), data=b"x" * 100)
        for _ in range(1000)]).encode()
    entries = 500
    sends = b"".join(
        frames.Frame(command=BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=1, sequence_id=seq * 1000, num_messages=1000)),
            payload=frames.Payload(metadata=MessageMetadata(
                producer_name="bench", sequence_id=seq * 1000, publish_time=1,
                num_messages_in_batch=1000), data=batch)).encode()
        for seq in range(entries))
    async with EmbeddedBroker(port=0, data_dir=tmp_path if durable else None) as url:
        producer = await RawClient.connect(url)
        consumer = await RawClient.connect(url)
        await producer.producer("throughput", name="bench")
        await consumer.subscribe("throughput", "sub", permits=entries * 1000)
        # CPU time rather than wall time, so that a busy machine does not fail the test; it
        # includes the test client's own decoding of every frame.
        start = time.process_time()
        await producer.send_bytes(sends)
        for _ in range(entries):
            await producer.expect(Type.SEND_RECEIPT)
        for _ in range(entries):
            await consumer.expect(Type.MESSAGE)
        rate = entries * 1000 / (time.process_time() - start)
        logging.getLogger(__name__).info("batched publish + dispatch (%s): %.0f msg/s of CPU",
                                         "data dir" if durable else "memory", rate)
        assert rate > 200_000, f"{rate:.0f} msg/s"
        await producer.close()
        await consumer.close()
