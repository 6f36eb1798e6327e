"""Segment truncation against the embedded segment store, over TCP on 127.0.0.1.

TRUNCATE_SEGMENT moves a segment's start offset forward; reads before it get
SEGMENT_IS_TRUNCATED with the start offset, GET_STREAM_SEGMENT_INFO reports it, offsets after
it keep their meaning (appends go on at the same length), and all of it survives a restart of
the store on its directory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from protoframe.clients.pravega import (
    EmbeddedSegmentStore,
    NoSuchSegment,
    PravegaConnection,
    SegmentIsTruncated,
    SegmentReader,
    SegmentWriter,
    segment_info,
    truncate_segment,
)
from protoframe.clients.pravega.controller import segment_name
from protoframe.clients.pravega.controller.state import ControllerState
from protoframe.clients.pravega.events import frame_events
from protoframe.clients.pravega.store import SegmentTable
from protoframe.generated.pravega import controller as pb

SEGMENT = "scope/stream/0.#epoch.0"
EVENTS = [f"event {i}".encode() * (1 + i % 3) for i in range(10)]


def run(scenario: Callable[[], Awaitable[None]], timeout: float = 10.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), timeout)

    asyncio.run(bounded())


async def connect(store: EmbeddedSegmentStore) -> PravegaConnection:
    return await PravegaConnection.connect(*store.address, request_timeout=5.0)


async def write_events(connection: PravegaConnection, payloads: list[bytes]) -> None:
    writer = await SegmentWriter.open(connection, SEGMENT)
    for payload in payloads:
        writer.write(payload)
    await writer.flush()


async def offsets(connection: PravegaConnection, start: int = 0) -> list[int]:
    return [e.offset for e in await SegmentReader(connection, SEGMENT, offset=start).read_all()]


def test_truncation_moves_the_start_offset_and_refuses_reads_before_it() -> None:
    async def scenario() -> None:
        async with EmbeddedSegmentStore() as store, await connect(store) as connection:
            await connection.requests.create_segment(SEGMENT, 0, 0, "")
            await write_events(connection, EVENTS)
            starts = await offsets(connection)
            length = len(frame_events(EVENTS))
            info = await segment_info(connection, SEGMENT)
            assert (info.start_offset, info.length, info.sealed) == (0, length, False)

            cut = starts[4]
            await truncate_segment(connection, SEGMENT, cut)
            info = await segment_info(connection, SEGMENT)
            assert (info.start_offset, info.length) == (cut, length)

            for below in (0, cut - 1):
                with pytest.raises(SegmentIsTruncated) as refused:
                    await SegmentReader(connection, SEGMENT, offset=below).read_all()
                assert refused.value.start_offset == cut
            rest = await SegmentReader(connection, SEGMENT, offset=cut).read_all()
            assert [(e.offset, e.data) for e in rest] == list(zip(starts[4:], EVENTS[4:],
                                                                  strict=True))
            # The store keeps only what is left.
            assert len(store.table.segments[SEGMENT].data) == length - cut

            # Appends go on at the segment's length, not at what is left of it.
            await write_events(connection, [b"after"])
            tail = await SegmentReader(connection, SEGMENT, offset=cut).read_all()
            assert (tail[-1].offset, tail[-1].data) == (length, b"after")

    run(scenario)


def test_truncation_offsets_outside_the_segment_are_refused_with_the_start_offset() -> None:
    async def scenario() -> None:
        async with EmbeddedSegmentStore() as store, await connect(store) as connection:
            await connection.requests.create_segment(SEGMENT, 0, 0, "")
            await write_events(connection, EVENTS)
            length = len(frame_events(EVENTS))
            await truncate_segment(connection, SEGMENT, 20)
            for offset in (19, 0, length + 1, -1):
                with pytest.raises(SegmentIsTruncated) as refused:
                    await truncate_segment(connection, SEGMENT, offset)
                assert refused.value.start_offset == 20
            assert (await segment_info(connection, SEGMENT)).start_offset == 20
            # At the start offset again (a retried call) and at the very end: both accepted.
            await truncate_segment(connection, SEGMENT, 20)
            await truncate_segment(connection, SEGMENT, length)
            info = await segment_info(connection, SEGMENT)
            assert (info.start_offset, info.length) == (length, length)
            assert await SegmentReader(connection, SEGMENT, offset=length).read_all() == []

            with pytest.raises(NoSuchSegment):
                await truncate_segment(connection, "scope/stream/9.#epoch.0", 0)
            with pytest.raises(NoSuchSegment):
                await segment_info(connection, "scope/stream/9.#epoch.0")

    run(scenario)


def test_a_sealed_segment_can_be_truncated() -> None:
    async def scenario() -> None:
        async with EmbeddedSegmentStore() as store, await connect(store) as connection:
            await connection.requests.create_segment(SEGMENT, 0, 0, "")
            await write_events(connection, EVENTS)
            starts = await offsets(connection)
            await connection.requests.seal_segment(SEGMENT, "")
            await truncate_segment(connection, SEGMENT, starts[9])
            info = await segment_info(connection, SEGMENT)
            assert (info.sealed, info.start_offset) == (True, starts[9])
            reader = SegmentReader(connection, SEGMENT, offset=starts[9])
            assert [e.data for e in await reader.read_all()] == [EVENTS[9]]
            assert reader.end_of_segment

    run(scenario)


def test_truncation_survives_a_store_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with EmbeddedSegmentStore(directory=tmp_path) as store:
            async with await connect(store) as connection:
                await connection.requests.create_segment(SEGMENT, 0, 0, "")
                await write_events(connection, EVENTS[:6])
                starts = await offsets(connection)
                await truncate_segment(connection, SEGMENT, starts[2])
        async with EmbeddedSegmentStore(directory=tmp_path) as store:
            async with await connect(store) as connection:
                info = await segment_info(connection, SEGMENT)
                assert (info.start_offset, info.length) == (starts[2],
                                                            len(frame_events(EVENTS[:6])))
                with pytest.raises(SegmentIsTruncated) as refused:
                    await SegmentReader(connection, SEGMENT, offset=starts[1]).read_all()
                assert refused.value.start_offset == starts[2]
                await write_events(connection, EVENTS[6:])
                assert await offsets(connection, starts[2]) == offsets_of_all(EVENTS)[2:]
                rest = await SegmentReader(connection, SEGMENT, offset=starts[2]).read_all()
                assert [e.data for e in rest] == EVENTS[2:]

    run(scenario)


def offsets_of_all(payloads: list[bytes]) -> list[int]:
    """Where each event starts in a segment that holds ``payloads`` from offset 0."""
    return [len(frame_events(payloads[:i])) for i in range(len(payloads))]


def test_segment_table_keeps_the_start_offset_on_disk(tmp_path: Path) -> None:
    table = SegmentTable(tmp_path)
    segment = table.create(SEGMENT)
    assert segment is not None
    table.append(segment, b"0123456789")
    table.truncate(segment, 4)
    assert (segment.start_offset, segment.length, segment.read(4, 10)) == (4, 10, b"456789")
    with pytest.raises(ValueError):
        table.truncate(segment, 3)
    with pytest.raises(ValueError):
        table.truncate(segment, 11)

    again = SegmentTable(tmp_path).get(SEGMENT)
    assert again is not None
    assert (again.start_offset, again.length, bytes(again.data)) == (4, 10, b"456789")
    table.append(segment, b"ab")
    reloaded = SegmentTable(tmp_path).get(SEGMENT)
    assert reloaded is not None
    assert (reloaded.start_offset, reloaded.length, bytes(reloaded.data)) == (4, 12, b"456789ab")


def test_the_controller_places_the_head_of_a_stream_at_each_segment_start_offset() -> None:
    """A reader group that starts at the head of a truncated stream starts after the cut."""
    table = SegmentTable()
    state = ControllerState(table, ("127.0.0.1", 1))
    state.createScope(pb.ScopeInfo(scope="scope"))
    state.createStream(pb.StreamConfig(
        streamInfo=pb.StreamInfo(scope="scope", stream="stream"),
        scalingPolicy=pb.ScalingPolicy(minNumSegments=2)))
    second = table.get(segment_name("scope", "stream", 1))
    assert second is not None
    table.append(second, frame_events(EVENTS))
    table.truncate(second, 30)

    head = state.getSegments(pb.GetSegmentsRequest(
        streamInfo=pb.StreamInfo(scope="scope", stream="stream"), timestamp=0))
    assert {(s.segmentId or pb.SegmentId()).segmentId: s.offset
            for s in head.segments} == {0: 0, 1: 30}
