"""Our Pravega writer and reader against the embedded segment store, over TCP on 127.0.0.1.

Covers HELLO negotiation (and its failure as a typed error), KEEP_ALIVE, appends in both
shapes the block rules allow, per-event acknowledgements, conditional appends, reads from an
offset to the end of a sealed segment, failure replies as typed errors, and a store restart
on its directory.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pravega import (
    ConditionalCheckFailed,
    EmbeddedSegmentStore,
    IncompatibleVersion,
    NoSuchSegment,
    PravegaConnection,
    SegmentAlreadyExists,
    SegmentIsSealed,
    SegmentReader,
    SegmentWriter,
    ServerError,
)
from protoframe.clients.pravega.errors import reply_error
from protoframe.clients.pravega.versions import HIGH_VERSION, LOW_VERSION
from protoframe.generated.pravega import frames
from protoframe.runtime.errors import ConnectionClosed, RequestFailed
from tests.support.pravega_store import Scenario, run_in_store

SEGMENT = "scope/stream/0.#epoch.0"
def run(scenario: Scenario, timeout: float = 10.0, **options: Any) -> None:
    run_in_store(scenario, timeout, **options)


async def connect(store: EmbeddedSegmentStore, **options: Any) -> PravegaConnection:
    return await PravegaConnection.connect(*store.address, request_timeout=5.0, **options)


async def create(connection: PravegaConnection, segment: str = SEGMENT) -> None:
    await connection.requests.create_segment(segment, 0, 0, "")


# -- connection ---------------------------------------------------------------------------------


def test_hello_negotiates_the_common_versions() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store, versions=(5, 15)) as connection:
            assert connection.server_versions == (LOW_VERSION, HIGH_VERSION)
        assert store.received["HELLO"] == 1

    run(scenario)


def test_hello_without_a_common_version_is_a_typed_error_and_closes() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        with pytest.raises(IncompatibleVersion) as info:
            await connect(store, versions=(1, 4))
        assert info.value.theirs == (LOW_VERSION, HIGH_VERSION)
        # The store answered with its HELLO and closed that connection, not itself.
        for _ in range(100):
            if not store.connections:
                break
            await asyncio.sleep(0.01)
        assert not store.connections
        async with await connect(store) as connection:
            assert connection.is_open

    run(scenario)


def test_a_server_speaking_only_newer_versions_is_refused() -> None:
    """Our client side of the check, against a peer that answers HELLO(100, 90)."""

    async def scenario(store: EmbeddedSegmentStore) -> None:
        async def fake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(16)
            writer.write(struct.pack(">iiii", -127, 8, 100, 90))
            await writer.drain()
            await reader.read()  # until the client closes
            writer.close()

        server = await asyncio.start_server(fake, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(IncompatibleVersion) as info:
            await PravegaConnection.connect("127.0.0.1", port, request_timeout=5.0)
        assert info.value.theirs == (90, 100)
        server.close()
        await server.wait_closed()

    run(scenario)


def test_keepalive_is_sent_periodically_and_echoed() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store, keepalive_interval=0.05)
        await asyncio.sleep(0.4)
        # The timer sent several and the store echoed each; the idle check never fired.
        assert store.received["KEEP_ALIVE"] >= 3
        assert connection.is_open
        assert isinstance(await connection.requests.keep_alive(), frames.KeepAlive)
        await connection.close()

    run(scenario)


def test_keepalive_closes_a_connection_to_a_silent_peer() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(16)
            writer.write(struct.pack(">iiii", -127, 8, 17, 5))
            await writer.drain()
            await reader.read()  # swallow keepalives without answering
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connection = await PravegaConnection.connect("127.0.0.1", port,
                                                     keepalive_interval=0.05)
        await asyncio.wait_for(connection.connection.wait_closed(), 2)
        assert "nothing received" in str(connection.connection.closed)
        server.close()
        await server.wait_closed()

    run(scenario)


# -- writing and reading ------------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [None, 64, 1024])
def test_write_then_read_back(block_size: int | None) -> None:
    payloads = [f"event-{i}".encode() * (i % 7 + 1) for i in range(200)] + [b""]

    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT, block_size=block_size)
            futures = [writer.write(p) for p in payloads]
            numbers = await asyncio.gather(*futures)
            assert numbers == list(range(1, len(payloads) + 1))
            assert writer.pending == 0
            assert writer.write_offset == store.table.segments[SEGMENT].length
            events = await SegmentReader(connection, SEGMENT, read_length=100).read_all()
        assert [e.data for e in events] == payloads
        # Offsets step over each record's 8-byte header and payload.
        offsets = [0]
        for p in payloads[:-1]:
            offsets.append(offsets[-1] + 8 + len(p))
        assert [e.offset for e in events] == offsets
        appends = store.received["APPEND_BLOCK_END"]
        assert 1 <= appends < len(payloads)  # events of one turn travel together
        assert store.received["APPEND_BLOCK"] == (0 if block_size is None else appends)

    run(scenario)


def test_segment_bytes_are_event_records() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT)
            await writer.write(b"ab")
            await writer.write(b"xyz")
        assert bytes(store.table.segments[SEGMENT].data) == (
            struct.pack(">ii", 0, 2) + b"ab" + struct.pack(">ii", 0, 3) + b"xyz")

    run(scenario)


def test_read_from_an_offset_until_the_end_of_a_sealed_segment() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT)
            for i in range(10):
                writer.write(bytes([i]) * 100)
            await writer.flush()
            await connection.requests.seal_segment(SEGMENT, "")
            reader = SegmentReader(connection, SEGMENT, offset=3 * 108, read_length=50)
            events = await reader.read_all()
            assert reader.end_of_segment
            assert [e.data[0] for e in events] == list(range(3, 10))
            chunk = await SegmentReader(connection, SEGMENT, offset=10 * 108).read_chunk()
            assert (chunk.at_tail, chunk.end_of_segment, chunk.data) == (True, True, b"")

    run(scenario)


def test_follow_sees_events_written_later() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT)
            reader = SegmentReader(connection, SEGMENT)
            seen: list[bytes] = []

            async def follow() -> None:
                async for event in reader.events(follow=True, poll_interval=0.01):
                    seen.append(event.data)
                    if len(seen) == 3:
                        return

            task = asyncio.create_task(follow())
            for data in (b"a", b"b", b"c"):
                await asyncio.sleep(0.03)
                await writer.write(data)
            await asyncio.wait_for(task, 2)
            assert seen == [b"a", b"b", b"c"]

    run(scenario)


def test_a_writer_resumes_after_the_events_the_segment_holds() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            first = await SegmentWriter.open(connection, SEGMENT)
            await asyncio.gather(*(first.write(b"x") for _ in range(5)))
            await first.close()
        async with await connect(store) as connection:
            again = await SegmentWriter.open(connection, SEGMENT, writer_id=first.writer_id)
            assert again.last_event_number == 5  # from APPEND_SETUP
            assert await again.write(b"y") == 6

    run(scenario)


def test_conditional_append() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT)
            assert await writer.conditional_write(b"first", 0) == 1
            with pytest.raises(ConditionalCheckFailed):
                await writer.conditional_write(b"stale", 0)
            assert await writer.conditional_write(b"second", 13) == 3
            events = await SegmentReader(connection, SEGMENT).read_all()
            assert [e.data for e in events] == [b"first", b"second"]

    run(scenario)


def test_store_keeps_segments_in_its_directory(tmp_path: Path) -> None:
    async def write(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT)
            await asyncio.gather(*(writer.write(b"kept %d" % i) for i in range(20)))

    async def read(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            events = await SegmentReader(connection, SEGMENT).read_all()
            assert [e.data for e in events] == [b"kept %d" % i for i in range(20)]

    run(write, directory=tmp_path)
    run(read, directory=tmp_path)


# -- failures as typed errors -------------------------------------------------------------------


def test_failure_replies_are_typed_errors() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            with pytest.raises(NoSuchSegment) as missing:
                await SegmentWriter.open(connection, "no/such/0")
            assert missing.value.segment == "no/such/0"
            with pytest.raises(NoSuchSegment):
                await SegmentReader(connection, "no/such/0").read_all()
            await create(connection)
            with pytest.raises(RequestFailed) as refused:
                await connection.requests.create_segment(SEGMENT, 0, 0, "")
            assert isinstance(reply_error(refused.value), SegmentAlreadyExists)
            with pytest.raises(ServerError):
                await SegmentReader(connection, SEGMENT, offset=99).read_chunk()
            await connection.requests.seal_segment(SEGMENT, "")
            with pytest.raises(SegmentIsSealed):
                await SegmentWriter.open(connection, SEGMENT)
            assert connection.is_open  # failures are replies, not broken connections

    run(scenario)


def test_sealing_fails_the_unacknowledged_events() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection, await connect(store) as admin:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT)
            assert await writer.write(b"before") == 1
            await admin.requests.seal_segment(SEGMENT, "")
            with pytest.raises(SegmentIsSealed):
                await writer.write(b"after")
            with pytest.raises(SegmentIsSealed):
                await writer.write(b"later still")  # the writer stays failed

    run(scenario)


def test_a_lost_connection_fails_the_unacknowledged_events() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        await create(connection)
        writer = await SegmentWriter.open(connection, SEGMENT)
        future = writer.write(b"x")
        connection.connection.abort()
        with pytest.raises(ConnectionClosed):
            await future

    run(scenario)


def test_deleted_segment() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            await connection.requests.delete_segment(SEGMENT, "")
            with pytest.raises(NoSuchSegment):
                await SegmentReader(connection, SEGMENT).read_chunk()
            info = await connection.requests.get_stream_segment_info(SEGMENT, "")
            assert not info.exists

    run(scenario)


def test_segment_info() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await connect(store) as connection:
            await create(connection)
            writer = await SegmentWriter.open(connection, SEGMENT)
            await writer.write(b"12345")
            info = await connection.requests.get_stream_segment_info(SEGMENT, "")
            assert (info.exists, info.is_sealed, info.write_offset, info.start_offset) == \
                (True, False, 13, 0)

    run(scenario)


def test_store_answers_on_127_0_0_1_only() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        assert store.address[0] == "127.0.0.1"
        with socket.create_connection(store.address, timeout=2):
            pass

    run(scenario)
