"""Chunking (messages over the broker's size limit) and the client's memory limit, on both
brokers: our producer and consumer, and the official client on the other side (interop)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from protoframe.clients.pulsar import MemoryBufferIsFull, MessageTooBig, PulsarClient
from protoframe.clients.pulsar.chunked import ChunkedMessage, ChunkMessageId
from protoframe.clients.pulsar.consumer import Consumer
from protoframe.clients.pulsar.errors import InvalidConfiguration
from protoframe.clients.pulsar.producer import Producer
from protoframe.clients.pulsar.producer.chunks import chunk_payloads
from protoframe.clients.pulsar.producer.future import SendOp
from protoframe.generated.pulsar import pulsar_api as pb
from tests.clients.pulsar.scenarios import Broker, Target

MIB = 1024 * 1024
BROKER_LIMIT = 5 * MIB  # what both the embedded broker and the standalone announce
# Not compressible, so compression cannot bring it under the limit; made once per session.
BIG = os.urandom(10 * MIB)


def official_client(url: str) -> Any:
    import pulsar

    quiet = logging.getLogger("pulsar.official")
    quiet.setLevel(logging.ERROR)
    return pulsar.Client(url, logger=quiet, operation_timeout_seconds=30)


def assert_chunked_id(mid: object, chunks: int) -> ChunkMessageId:
    assert isinstance(mid, ChunkMessageId)
    assert len(mid.chunk_message_ids()) == chunks
    first, last = mid.chunk_message_ids()[0], mid.chunk_message_ids()[-1]
    assert mid.first_chunk_message_id() == first
    assert (mid.ledger_id(), mid.entry_id()) == (last.ledger_id(), last.entry_id())
    assert str(mid) == f"{first};{last}"  # as the official client prints it
    return mid


# ---- our producer and consumer ----------------------------------------------------------------


def test_ten_mib_message_is_chunked_and_reassembled(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("chunk-10m", "s", initial_position="earliest")
            producer = await client.create_producer("chunk-10m", chunking_enabled=True,
                                                    batching_enabled=False)
            assert producer._producers[0].max_message_size == BROKER_LIMIT
            sent = await producer.send(BIG, properties={"k": "v"}, partition_key="key")
            sent_id = assert_chunked_id(sent, 3)
            small = await producer.send(b"small")
            assert not isinstance(small, ChunkMessageId)
            msg = await consumer.receive(timeout_millis=60_000)
            assert isinstance(msg, ChunkedMessage)
            assert msg.data() == BIG
            assert msg.properties() == {"k": "v"} and msg.partition_key() == "key"
            assert msg.message_id() == sent
            assert msg.message_id().chunk_message_ids() == sent_id.chunk_message_ids()
            assert (await consumer.receive(timeout_millis=30_000)).data() == b"small"
            await consumer.acknowledge(msg)
            await consumer.close()
            # Acknowledging the message acknowledged every chunk: nothing comes again.
            again = await client.subscribe("chunk-10m", "s")
            follow = await producer.send(b"after")
            got = await again.receive(timeout_millis=30_000)
            assert got.data() == b"small"
            await again.acknowledge(got)
            got = await again.receive(timeout_millis=30_000)
            assert got.message_id() == follow

    target.run(scenario, timeout=90)


def test_compressed_chunks_with_a_small_chunk_size(target: Target) -> None:
    data = b"".join(os.urandom(16) * 40 for _ in range(4000))  # 2.5 MB, compresses ~40x
    big = os.urandom(300_000)

    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("chunk-zlib", "s", initial_position="earliest")
            producer = await client.create_producer(
                "chunk-zlib", chunking_enabled=True, batching_enabled=False,
                compression_type="ZLIB", chunk_max_message_size=20_000)
            first = await producer.send(data)
            second = await producer.send(big)
            assert isinstance(first, ChunkMessageId) and isinstance(second, ChunkMessageId)
            assert len(second.chunk_message_ids()) == 16  # 300 kB in chunks of < 20 kB
            for sent, payload in ((first, data), (second, big)):
                msg = await consumer.receive(timeout_millis=30_000)
                assert msg.data() == payload and msg.message_id() == sent
                await consumer.acknowledge(msg)

    target.run(scenario, timeout=60)


def test_without_chunking_a_big_message_is_too_big(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("chunk-off", batching_enabled=False)
            with pytest.raises(MessageTooBig):
                await producer.send(BIG[:6 * MIB])

    target.run(scenario)


def test_chunking_needs_batching_off() -> None:
    async def scenario() -> None:
        client = PulsarClient("pulsar://127.0.0.1:1")
        with pytest.raises(InvalidConfiguration, match="Batching and chunking"):
            await client.create_producer("t", chunking_enabled=True)
        with pytest.raises(ValueError):
            await client.create_producer("t", chunking_enabled=True, batching_enabled=True)
        await client.close()

    asyncio.run(scenario())


# ---- the unusual cases: interleaved, incomplete, stray chunks ---------------------------------


async def send_chunks(producer: Producer, plan: list[tuple[int, int]], messages: list[bytes],
                      chunk_size: int = 2000) -> None:
    """Send chunks out of their usual order: ``plan`` lists (message, chunk) pairs; message
    ``i`` is ``messages[i]`` with sequence id ``i``, cut into chunks of ``chunk_size``.

    The last chunks must come in sequence-id order: a broker that de-duplicates takes a last
    chunk after a higher sequence id's as a resend."""
    handle = producer._producers[0]
    chunks = []
    for seq, data in enumerate(messages):
        meta = pb.MessageMetadata(producer_name=handle.producer_name, sequence_id=seq,
                                  publish_time=int(time.time() * 1000))
        chunks.append(chunk_payloads(meta, data, chunk_size))
    handle.next_sequence_id = len(messages)
    loop = asyncio.get_running_loop()
    for seq, chunk_id in plan:
        op = SendOp(handle.partition, loop, time.monotonic())
        op.sequence_id = op.highest_sequence_id = seq
        op.num_messages = 1
        op.chunk = True
        op.payload = chunks[seq][chunk_id]
        handle.pending_messages += 1
        handle._enqueue(op)
    await handle.flush()


async def next_data(consumer: Consumer) -> bytes:
    msg = await consumer.receive(timeout_millis=30_000)
    await consumer.acknowledge(msg)
    return msg.data()


async def redeliver_and_mark(consumer: Consumer, producer: Producer) -> None:
    """Send pending acks, ask for everything unacknowledged again, then send a marker."""
    consumer.flush_acknowledgements()
    await asyncio.sleep(0.2)  # the ACKs go before the redelivery request on one connection
    consumer.redeliver_unacknowledged_messages()
    await producer.send(b"marker")


async def poll(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("auto_ack", [False, True], ids=["redeliver", "auto-ack"])
def test_oldest_pending_message_dropped_when_too_many(target: Target, auto_ack: bool) -> None:
    a, b = os.urandom(5000), os.urandom(5000)

    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                "chunk-full", "s", initial_position="earliest", max_pending_chunked_message=1,
                auto_ack_oldest_chunked_message_on_queue_full=auto_ack)
            producer = await client.create_producer("chunk-full", chunking_enabled=True,
                                                    batching_enabled=False)
            # b's first chunk pushes a out; a's other chunks are then strays.
            await send_chunks(producer, [(1, 0), (0, 0), (0, 1), (0, 2), (1, 1), (1, 2)],
                              [b, a])
            assert await next_data(consumer) == b
            await redeliver_and_mark(consumer, producer)
            # Unacknowledged, a's three chunks come again and make a whole message; acked,
            # only the two strays come, and are dropped.
            expected = [b"marker"] if auto_ack else [a, b"marker"]
            assert [await next_data(consumer) for _ in expected] == expected

    target.run(scenario, timeout=60)


def test_incomplete_message_expires_and_is_acknowledged(target: Target) -> None:
    a, b = os.urandom(5000), os.urandom(5000)

    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe(
                "chunk-expiry", "s", initial_position="earliest",
                expire_time_of_incomplete_chunked_message_ms=300)
            producer = await client.create_producer("chunk-expiry", chunking_enabled=True,
                                                    batching_enabled=False)
            await send_chunks(producer, [(1, 0), (1, 1), (0, 0), (0, 1), (0, 2)], [b, a])
            assert await next_data(consumer) == b
            assembler = consumer._children[0]._chunks
            assert assembler is not None
            await poll(lambda: len(assembler) == 0)
            # a's last chunk now is a stray: dropped, and (recent) left unacknowledged; a's
            # first two were acknowledged when a expired, so the redelivery cannot rebuild a.
            await send_chunks(producer, [(1, 2)], [b, a])
            await redeliver_and_mark(consumer, producer)
            assert await next_data(consumer) == b"marker"

    target.run(scenario, timeout=60)


def test_out_of_order_chunks_are_dropped(target: Target) -> None:
    a, b = os.urandom(5000), os.urandom(5000)

    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("chunk-order", "s", initial_position="earliest")
            producer = await client.create_producer("chunk-order", chunking_enabled=True,
                                                    batching_enabled=False)
            await send_chunks(producer, [(0, 0), (0, 2), (0, 1), (1, 0), (1, 1), (1, 2)],
                              [a, b])
            assert await next_data(consumer) == b
            # Dropped, not acknowledged: a redelivery brings a's chunks again, still out of
            # order, so a is dropped again and the marker is next.
            await redeliver_and_mark(consumer, producer)
            assert await next_data(consumer) == b"marker"

    target.run(scenario, timeout=60)


# ---- the official client on the other side -----------------------------------------------------


@pytest.mark.interop
def test_official_consumer_reassembles_ours(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        official = official_client(url)
        try:
            theirs = await asyncio.to_thread(
                official.subscribe, "chunk-to-official", "s",
                initial_position=__import__("pulsar").InitialPosition.Earliest)
            async with PulsarClient(url) as client:
                producer = await client.create_producer(
                    "chunk-to-official", chunking_enabled=True, batching_enabled=False)
                sent = await producer.send(BIG, properties={"k": "v"})
            msg = await asyncio.to_thread(theirs.receive, 60_000)
            assert msg.data() == BIG and msg.properties() == {"k": "v"}
            assert str(msg.message_id()) == str(sent)
            await asyncio.to_thread(theirs.acknowledge, msg)
        finally:
            await asyncio.to_thread(official.close)

    target.run(scenario, timeout=120)


@pytest.mark.interop
def test_we_reassemble_the_official_producers_message(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        official = official_client(url)
        try:
            async with PulsarClient(url) as client:
                consumer = await client.subscribe("chunk-from-official", "s",
                                                  initial_position="earliest")
                producer = await asyncio.to_thread(
                    official.create_producer, "chunk-from-official", chunking_enabled=True,
                    batching_enabled=False)
                sent = await asyncio.to_thread(producer.send, BIG, {"k": "v"})
                msg = await consumer.receive(timeout_millis=60_000)
                assert msg.data() == BIG and msg.properties() == {"k": "v"}
                assert str(msg.message_id()) == str(sent)
                assert_chunked_id(msg.message_id(), 3)
                await consumer.acknowledge(msg)
                await consumer.close()
                again = await client.subscribe("chunk-from-official", "s")
                await asyncio.to_thread(producer.send, b"after")
                assert (await again.receive(timeout_millis=30_000)).data() == b"after"
        finally:
            await asyncio.to_thread(official.close)

    target.run(scenario, timeout=120)


# ---- memory limit ------------------------------------------------------------------------------


def test_memory_limit_across_producers(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url, memory_limit_bytes=1000) as client:
            memory = client.memory_limit
            assert memory is not None
            first = await client.create_producer("mem-a", batching_enabled=False)
            second = await client.create_producer("mem-b")
            pending = first.send_async(b"x" * 600)
            assert memory.used == 600
            with pytest.raises(MemoryBufferIsFull):
                second.send_async(b"y" * 600)
            with pytest.raises(MemoryBufferIsFull):
                await first.send(b"z" * 600)
            small = second.send_async(b"s" * 300)  # fits beside the first
            await pending
            await small
            assert memory.used == 0
            # Alone, a message over the whole limit still goes.
            await first.send(b"w" * 5000)
            assert memory.used == 0

            blocking = await client.create_producer("mem-c", batching_enabled=False,
                                                    block_if_queue_full=True)
            held = blocking.send_async(b"x" * 600)
            waiting = asyncio.ensure_future(blocking.send(b"y" * 600))
            await asyncio.sleep(0)
            assert not waiting.done() and memory.used == 600
            await held
            await asyncio.wait_for(waiting, 30)
            assert memory.used == 0

    target.run(scenario)


def test_memory_limit_counts_a_chunked_message_once(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url, memory_limit_bytes=2 * MIB) as client:
            memory = client.memory_limit
            assert memory is not None
            producer = await client.create_producer("mem-chunks", chunking_enabled=True,
                                                    batching_enabled=False,
                                                    chunk_max_message_size=MIB)
            data = BIG[:3 * MIB]
            pending = producer.send_async(data)
            assert memory.used == len(data)
            with pytest.raises(MemoryBufferIsFull):
                producer.send_async(b"x")
            assert isinstance(await pending, ChunkMessageId)
            assert memory.used == 0

    target.run(scenario)


def test_no_memory_limit_by_default() -> None:
    client = PulsarClient("pulsar://127.0.0.1:1")
    assert client.memory_limit is None
    with pytest.raises(InvalidConfiguration):
        PulsarClient("pulsar://127.0.0.1:1", memory_limit_bytes=-1)


def test_chunks_fit_the_limit_with_their_metadata() -> None:
    meta = pb.MessageMetadata(producer_name="p" * 40, sequence_id=(1 << 40) + 3,
                              publish_time=int(time.time() * 1000),
                              properties=[pb.KeyValue(key="k" * 100, value="v" * 100)])
    data = os.urandom(100_003)
    chunks = chunk_payloads(meta, data, 10_000)
    assert len(chunks) == 11
    assert b"".join(c.data for c in chunks) == data
    for index, chunk in enumerate(chunks):
        assert len(chunk.metadata.encode()) + len(chunk.data) <= 10_000
        assert chunk.metadata.chunk_id == index and chunk.metadata.num_chunks_from_msg == 11
        assert chunk.metadata.total_chunk_msg_size == len(data)
        assert chunk.metadata.uuid == f"{'p' * 40}-{(1 << 40) + 3}"
        assert chunk.metadata.properties == meta.properties
