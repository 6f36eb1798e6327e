"""Truncating a whole stream through our controller (truncateStream, a stream cut) over the
embedded segment store, with our client's ``truncate_stream``.

Covers each segment of the cut truncated at its offset (reads below it refused, the head of the
stream moved there), a cut after a scale deleting the segments before it and a group reader
started before the scale going on to read only what follows the cut, the refusals that change
nothing (a cut not covering the key space, an offset past a segment's end, an unknown stream),
and the controller in another process than the store (the truncation sent over the wire).
"""

from __future__ import annotations

from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest

from protoframe.clients.pravega import (
    ControllerServer,
    EmbeddedSegmentStore,
    GroupReader,
    NoSuchSegment,
    PravegaConnection,
    ReaderGroup,
    SegmentIsTruncated,
    SegmentReader,
    StreamCut,
    TruncationFailed,
    scale_stream,
    segment_info,
    truncate_stream,
)
from protoframe.clients.pravega.controller import RemoteSegmentTable, segment_name
from protoframe.clients.pravega.controller.server import SERVICE
from protoframe.clients.pravega.controller.streams import pack_id
from protoframe.generated.pravega import controller as pb
from tests.support.pravega_store import Scenario, run_in_store
from tests.support.pravega_streams import create_stream, write_keyed

KEYS = [f"key-{i}" for i in range(8)]
HALVES = [(segment_name("scope", "stream", 0), 0.0, 0.5),
          (segment_name("scope", "stream", 1), 0.5, 1.0)]
NAMES = [name for name, _, _ in HALVES]


def run(scenario: Scenario, timeout: float = 30.0, **options: Any) -> None:
    run_in_store(scenario, timeout, **options)


async def connect(store: EmbeddedSegmentStore) -> PravegaConnection:
    return await PravegaConnection.connect(*store.address, request_timeout=10.0)


async def head(uri: str) -> dict[int, int]:
    async with grpc.aio.insecure_channel(uri.removeprefix("tcp://")) as channel:
        reply = await channel.unary_unary(
            f"/{SERVICE}/getSegments", request_serializer=lambda m: m.encode(),
            response_deserializer=pb.SegmentsAtTime.decode)(pb.GetSegmentsRequest(
                streamInfo=pb.StreamInfo(scope="scope", stream="stream")), timeout=10.0)
    return {(s.segmentId or pb.SegmentId()).segmentId: s.offset for s in reply.segments}


async def event_offsets(connection: PravegaConnection, segment: str) -> list[int]:
    return [e.offset for e in await SegmentReader(connection, segment).read_all()]


def test_truncate_stream_cuts_every_segment_of_the_cut() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 2)
            connection = await connect(store)
            await write_keyed(connection, HALVES, [(k, s) for s in range(4) for k in KEYS])
            cut = {name: (await event_offsets(connection, name))[2] for name in NAMES}
            await truncate_stream(uri, StreamCut("scope", "stream", cut))
            for name in NAMES:
                info = await segment_info(connection, name)
                assert info.start_offset == cut[name]
                with pytest.raises(SegmentIsTruncated) as refused:
                    await SegmentReader(connection, name).read_all()
                assert refused.value.start_offset == cut[name]
            assert await head(uri) == {0: cut[NAMES[0]], 1: cut[NAMES[1]]}
            # Truncating again below the start changes nothing and is no error.
            await truncate_stream(uri, StreamCut("scope", "stream", dict.fromkeys(NAMES, 0)))
            assert await head(uri) == {0: cut[NAMES[0]], 1: cut[NAMES[1]]}

    run(scenario)


def test_refused_cuts_change_nothing() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 2)
            connection = await connect(store)
            await write_keyed(connection, HALVES, [(k, 0) for k in KEYS])
            lengths = {n: (await segment_info(connection, n)).length for n in NAMES}
            status = pb.UpdateStreamStatus.Status
            for cut, expected in [
                    (StreamCut("scope", "stream", {NAMES[0]: 0}), status.FAILURE),
                    (StreamCut("scope", "stream", {NAMES[0]: lengths[NAMES[0]] + 1,
                                                   NAMES[1]: 0}), status.FAILURE),
                    (StreamCut("scope", "stream", {NAMES[0]: -1, NAMES[1]: 0}),
                     status.FAILURE),
                    (StreamCut("scope", "absent",
                               {segment_name("scope", "absent", 0): 0}),
                     status.STREAM_NOT_FOUND)]:
                with pytest.raises(TruncationFailed) as refused:
                    await truncate_stream(uri, cut)
                reply = refused.value.reply
                assert isinstance(reply, pb.UpdateStreamStatus) and reply.status == expected
            for name in NAMES:
                info = await segment_info(connection, name)
                assert (info.start_offset, info.length) == (0, lengths[name])
            with pytest.raises(ValueError, match="not a segment of"):
                await truncate_stream(uri, StreamCut("scope", "other", {NAMES[0]: 0}))

    run(scenario)


def test_a_cut_after_a_scale_deletes_the_segments_before_it() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 2)
            connection = await connect(store)
            before = await write_keyed(connection, HALVES, [(k, 0) for k in KEYS])
            group = await ReaderGroup.create(connection, "scope", "group", NAMES,
                                             controller=uri)
            reader = await GroupReader.join(group, "r")
            (merged,) = await scale_stream(uri, "scope", "stream", NAMES, [(0.0, 1.0)])
            assert merged == segment_name("scope", "stream", pack_id(1, 2))
            after = await write_keyed(connection, [(merged, 0.0, 1.0)],
                                      [(k, s) for s in (1, 2) for k in KEYS])
            offsets = await event_offsets(connection, merged)
            await truncate_stream(uri, StreamCut("scope", "stream",
                                                 {merged: offsets[len(KEYS)]}))
            for name in NAMES:
                with pytest.raises(NoSuchSegment):
                    await segment_info(connection, name)
            assert await head(uri) == {pack_id(1, 2): offsets[len(KEYS)]}
            # The reader never read the deleted segments: their events are gone, and it goes
            # on into the successor from the cut.
            read = [e.data for _, e in await reader.read_available()]
            assert sorted(read) == sorted(after[len(KEYS):])
            assert not set(read) & set(before)
            assert reader.segments == [merged]

    run(scenario)


def test_a_controller_in_another_process_sends_the_truncation_to_the_store() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = RemoteSegmentTable(store.address)
        try:
            async with ControllerServer(table, store.address, after_call=table.sync) as uri:
                await create_stream(uri, "scope", "stream", 2)
                connection = await connect(store)
                await write_keyed(connection, HALVES, [(k, s) for s in range(3) for k in KEYS])
                cut = {name: (await event_offsets(connection, name))[1] for name in NAMES}
                await truncate_stream(uri, StreamCut("scope", "stream", cut))
                for name in NAMES:
                    assert (await segment_info(connection, name)).start_offset == cut[name]
                assert await head(uri) == {0: cut[NAMES[0]], 1: cut[NAMES[1]]}
                assert not table.pending
        finally:
            await table.close()

    run(scenario)
