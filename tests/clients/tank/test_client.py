"""The TANK client against the embedded TANK broker over real TCP on 127.0.0.1.

Every scenario runs under ``asyncio.wait_for``, and every wait inside one has its own timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from protoframe.clients.tank import (
    FIRST_AVAILABLE,
    TAIL,
    BoundaryCheckError,
    ConsumedMessage,
    FetchTooSmallError,
    InvalidSeqNumError,
    Message,
    TankClient,
    UnknownPartitionError,
    UnknownTopicError,
)
from protoframe.clients.tank.broker import EmbeddedTankBroker
from protoframe.clients.tank.bundles import split_chunk
from protoframe.generated.tank import frames
from protoframe.runtime.errors import ConnectionClosed

Scenario = Callable[[TankClient, EmbeddedTankBroker], Awaitable[None]]
WAIT = 5.0


def run(scenario: Scenario, *, timeout: float = 15.0, client: dict[str, Any] | None = None,
        **broker_options: Any) -> None:
    broker_options.setdefault("topics", {"events": 2})

    async def main() -> None:
        broker = EmbeddedTankBroker(**broker_options)
        host, port = await broker.start()
        try:
            options: dict[str, Any] = {"operation_timeout": WAIT, "connect_timeout": WAIT}
            options.update(client or {})
            async with TankClient(host, port, **options) as tank:
                await scenario(tank, broker)
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(main(), timeout))


def stored_codecs(broker: EmbeddedTankBroker, topic: str, partition: int) -> list[int]:
    """The codec of every bundle the broker holds for a partition."""
    log = broker.state.topics[topic][partition]
    return [b.codec for b in split_chunk(b"".join(s.entry for s in log.bundles)).bundles]


def record_consume_frames(client: TankClient) -> tuple[list[frames.ConsumeRequest],
                                                       list[frames.ConsumeResponse]]:
    """Spy on the consume requests the client sends and the responses it gets."""
    sent: list[frames.ConsumeRequest] = []
    got: list[frames.ConsumeResponse] = []
    send, handle = client.conn.send_frame, client.requests.handle_frame

    async def send_frame(frame: frames.Frame) -> None:
        if isinstance(frame.body, frames.ConsumeRequest):
            sent.append(frame.body)
        await send(frame)

    def handle_frame(frame: frames.Frame, command: tuple[str, Any] | None = None) -> bool:
        if isinstance(frame.body, frames.ConsumeResponse):
            got.append(frame.body)
        return handle(frame, command)

    client.conn.send_frame = send_frame  # type: ignore[method-assign]
    client.requests.handle_frame = handle_frame  # type: ignore[method-assign]
    return sent, got


KEYED = [Message(b"first", key=b"user-1", timestamp=1_700_000_000_000),
         Message(b"second", timestamp=1_700_000_000_000),
         Message(b"third", key=b"user-2", timestamp=1_700_000_000_005)]


def expected(messages: list[Message], first_seq: int) -> list[ConsumedMessage]:
    return [ConsumedMessage(first_seq + i, m.timestamp or 0, m.key, m.value)
            for i, m in enumerate(messages)]


def test_produce_with_keys_and_timestamps_then_consume_from_a_seq_num() -> None:
    more = [Message(b"fourth", key=b"k", timestamp=1), Message(b"fifth", timestamp=2)]

    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.produce("events", 1, KEYED)
        await client.produce("events", 1, more)
        everything = await client.consume("events", 1, FIRST_AVAILABLE)
        assert everything.messages == expected(KEYED + more, 1)
        assert everything.next_seq_num == 6 and everything.highwater_mark == 5
        # From the middle of the first bundle: the broker sends all of it, the client drops
        # what comes before the seq num asked for.
        middle = await client.consume("events", 1, 2)
        assert middle.messages == expected(KEYED + more, 1)[1:]
        assert (await client.consume("events", 1, 5)).messages == expected(more, 4)[1:]
        # The other partition stays empty; reading at its tail returns nothing at once.
        empty = await client.consume("events", 0, FIRST_AVAILABLE)
        assert empty.messages == [] and empty.next_seq_num == 1 and empty.highwater_mark == 0

    run(scenario)


def test_snappy_from_the_client_and_from_the_broker() -> None:
    payload = [Message(b"value %d " % i * 20, key=b"%d" % i, timestamp=10 + i // 3)
               for i in range(30)]

    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.produce("events", 0, payload[:10], compression=True)
        await client.produce("events", 0, payload[10:20], compression=False)
        await client.produce("events", 0, payload[20:])  # over 1 KiB: compressed by default
        assert stored_codecs(broker, "events", 0) == [1, 0, 1]
        result = await client.consume("events", 0, FIRST_AVAILABLE, max_bytes=1 << 20)
        assert result.messages == expected(payload, 1)

    run(scenario)

    async def broker_compresses(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.produce("events", 1, KEYED, compression=False)
        assert stored_codecs(broker, "events", 1) == [1]
        assert (await client.consume("events", 1, 0)).messages == expected(KEYED, 1)

    run(broker_compresses, compress=True)


def test_a_cut_last_bundle_is_read_again_from_its_start() -> None:
    bundles = [[Message(b"%d-%d" % (b, i) * 10, timestamp=b) for i in range(4)]
               for b in range(3)]

    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        for messages in bundles:
            await client.produce("events", 0, messages, compression=False)
        sizes = [len(s.entry) for s in broker.state.topics["events"][0].bundles]
        sent, got = record_consume_frames(client)
        # Room for the first bundle and half of the second.
        first = await client.consume("events", 0, 1, max_bytes=sizes[0] + sizes[1] // 2)
        assert len(got[-1].chunks) == sizes[0] + sizes[1] // 2  # the broker did cut it
        assert first.messages == expected(bundles[0], 1)
        assert first.next_seq_num == 5
        rest = await client.consume("events", 0, first.next_seq_num, max_bytes=1 << 16)
        assert rest.messages == expected(bundles[1] + bundles[2], 5)
        assert [r.topics[0].partitions[0].fetch_size for r in sent] == [
            sizes[0] + sizes[1] // 2, 1 << 16]

    run(scenario)


def test_a_bundle_larger_than_max_bytes_grows_the_fetch() -> None:
    big = [Message(bytes(range(256)) * 40, timestamp=1)]  # one 10 KiB message

    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.produce("events", 0, big, compression=False)
        sent, _ = record_consume_frames(client)
        result = await client.consume("events", 0, FIRST_AVAILABLE, max_bytes=100)
        assert result.messages == expected(big, 1)
        sizes = [r.topics[0].partitions[0].fetch_size for r in sent]
        assert sizes[0] == 100 and len(sizes) == 2 and sizes[1] >= 10 * 1024

    run(scenario)

    async def capped(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.produce("events", 0, big, compression=False)
        with pytest.raises(FetchTooSmallError):
            await client.consume("events", 0, FIRST_AVAILABLE, max_bytes=100)

    run(capped, client={"max_fetch_size": 1000})


def test_many_messages_in_many_bundles() -> None:
    count, per_bundle = 5000, 125
    messages = [Message(b"message %05d" % i, key=b"k%d" % (i % 7) if i % 3 else None,
                        timestamp=1_000 + i // 10) for i in range(count)]

    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        for start in range(0, count, per_bundle):
            await client.produce("events", 1, messages[start:start + per_bundle])
        got: list[ConsumedMessage] = []
        seq = FIRST_AVAILABLE
        for _ in range(1000):  # bounded: 4 KiB fetches need far fewer rounds
            result = await client.consume("events", 1, seq, max_bytes=4096)
            got += result.messages
            seq = result.next_seq_num
            if seq > result.highwater_mark:
                break
        assert got == expected(messages, 1)

    run(scenario, timeout=30)


def test_unknown_topic_and_partition() -> None:
    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        with pytest.raises(UnknownTopicError) as topic:
            await client.produce("missing", 0, KEYED)
        assert topic.value.topic == "missing" and topic.value.code == 0xFF
        with pytest.raises(UnknownTopicError):
            await client.consume("missing", 0, FIRST_AVAILABLE)
        with pytest.raises(UnknownPartitionError) as partition:
            await client.produce("events", 7, KEYED)
        assert partition.value.partition == 7
        with pytest.raises(UnknownPartitionError):
            await client.consume("events", 7, FIRST_AVAILABLE)
        broker.create_topic("missing", 1)
        await client.produce("missing", 0, KEYED)  # the connection is still fine
        assert len((await client.consume("missing", 0, 0)).messages) == 3

    run(scenario)


def test_produce_with_seqnum_boundaries_and_invalid_seq_nums() -> None:
    sequenced = [Message(b"a", timestamp=5, seq_num=1000), Message(b"b", timestamp=5, seq_num=1001),
                 Message(b"c", timestamp=6, seq_num=1010), Message(b"d", timestamp=6, seq_num=1020)]

    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.produce_with_seqnum("events", 0, sequenced)
        await client.produce("events", 0, [Message(b"e", timestamp=7)])  # numbered 1021
        result = await client.consume("events", 0, FIRST_AVAILABLE)
        assert [(m.seq_num, m.value, m.timestamp) for m in result.messages] == [
            (1000, b"a", 5), (1001, b"b", 5), (1010, b"c", 6), (1020, b"d", 6), (1021, b"e", 7)]
        assert (await client.consume("events", 0, 1010)).messages[0].seq_num == 1010
        with pytest.raises(BoundaryCheckError) as before:
            await client.consume("events", 0, 5)
        assert before.value.first_available_seqnum == 1000
        assert before.value.highwater_mark == 1021
        with pytest.raises(BoundaryCheckError):
            await client.consume("events", 0, 5000)
        with pytest.raises(InvalidSeqNumError):
            await client.produce_with_seqnum("events", 0, [Message(b"x", seq_num=1021)])
        # A plain bundle after a gap is stored with its seq nums spelled out (sparse).
        await client.produce_with_seqnum("events", 0, [Message(b"f", timestamp=8, seq_num=2000)])
        tail = await client.consume("events", 0, 1021)
        assert [(m.seq_num, m.value) for m in tail.messages] == [(1021, b"e"), (2000, b"f")]

    run(scenario)


def test_consume_waits_for_data_up_to_max_wait() -> None:
    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        started = time.monotonic()
        nothing = await client.consume("events", 0, TAIL, max_wait=0.2)
        assert nothing.messages == [] and time.monotonic() - started >= 0.15
        assert nothing.next_seq_num == 1
        waiting = asyncio.ensure_future(client.consume("events", 0, TAIL, max_wait=WAIT))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        # The same connection keeps serving while the consume waits.
        async with TankClient(client.host, client.port, connect_timeout=WAIT) as other:
            await other.produce("events", 0, KEYED)
        woke = await asyncio.wait_for(waiting, WAIT)
        assert woke.messages == expected(KEYED, 1)
        # min_bytes not reached: the broker answers with what it has when max_wait ends.
        started = time.monotonic()
        partial = await client.consume("events", 0, 1, min_bytes=1 << 20, max_wait=0.2)
        assert partial.messages == expected(KEYED, 1) and time.monotonic() - started >= 0.15

    run(scenario)


def test_ping_and_keepalive() -> None:
    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.ping()
        before = client.conn.bytes_sent
        await asyncio.sleep(0.25)  # idle: keepalive pings (5 bytes each) go out
        assert client.conn.bytes_sent - before >= 10
        assert (client.conn.bytes_sent - before) % 5 == 0
        await client.produce("events", 0, KEYED)  # and the broker ignored them
        assert client.is_connected

    run(scenario, client={"keepalive_interval": 0.05})


def test_a_bad_frame_closes_only_that_connection() -> None:
    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        await client.produce("events", 0, KEYED)
        for junk in (bytes.fromhex("09 00000000"),          # no such message id
                     bytes.fromhex("03 01000000 00"),       # a ping with a body
                     bytes.fromhex("02 02000000 0200"),     # a consume cut short
                     bytes.fromhex("01 ffffffff")):         # over the frame size limit
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(client.host, client.port), WAIT)
            greeting = await asyncio.wait_for(reader.readexactly(5), WAIT)
            assert greeting == bytes.fromhex("03 00000000")
            writer.write(junk)
            assert await asyncio.wait_for(reader.read(), WAIT) == b""  # closed by the broker
            writer.close()
        # The client's own connection, and new ones, are untouched.
        assert (await client.consume("events", 0, 0)).messages == expected(KEYED, 1)
        async with TankClient(client.host, client.port, connect_timeout=WAIT) as other:
            assert len((await other.consume("events", 0, 0)).messages) == 3

    run(scenario, max_frame_size=1 << 20)


def test_an_unreadable_bundle_closes_the_connection() -> None:
    async def scenario(client: TankClient, broker: EmbeddedTankBroker) -> None:
        corrupt = frames.Bundle(codec=1, sparse=False, msg_count=1, compressed=b"\xff\xff\xff")
        topics = [frames.ProduceTopic(name="events", partitions=[
            frames.ProducePartition(partition=0, bundle=corrupt)])]
        with pytest.raises(ConnectionClosed):
            await client.requests.produce(2, "test", 0, 0, topics)
        assert not client.is_connected
        assert broker.state.topics["events"][0].highwater_mark == 0
        async with TankClient(client.host, client.port, connect_timeout=WAIT) as other:
            await other.produce("events", 0, KEYED)

    run(scenario)


def test_request_ids_wrap_at_the_range_of_the_u32_field() -> None:
    """The generated requests number TANK's u32 request_id body field modulo 2**32."""
    assert TankClient("127.0.0.1", 1).requests.next_id._limit == 2**32


def test_connect_failures_are_connection_closed() -> None:
    async def main() -> None:
        # The server keeps each writer: from Python 3.13 on, asyncio closes a connection whose
        # writer is garbage-collected, so one it dropped would close rather than stay silent.
        held: list[asyncio.StreamWriter] = []
        silent = await asyncio.start_server(lambda r, w: held.append(w), "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        try:
            with pytest.raises(ConnectionClosed, match="greeting"):
                await TankClient("127.0.0.1", port, connect_timeout=0.2).connect()
        finally:
            for writer in held:
                writer.close()
            silent.close()
            await silent.wait_closed()
        with pytest.raises(ConnectionClosed):
            await TankClient("127.0.0.1", port, connect_timeout=WAIT).connect()

    asyncio.run(asyncio.wait_for(main(), 10))
