"""Scaling a stream through our controller (gRPC, our generated messages) over the embedded
segment store, and our reader group moving on to the successors of the segments that end.

Covers the scale RPC (sealing, successors with their key ranges and epochs, the refusals that
change nothing), both spellings of the successor lookup, checkScale, the current and epoch
segments after scales, a writer refused by a sealed segment, and the group reader across a
scale-up 1 -> 2 and a scale-down 2 -> 1: every event read once, in order per routing key, a
successor read only after all its predecessors were read to their end (with two readers, the
successor of two segments waits for the second).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest

from protoframe.clients.pravega import (
    ControllerError,
    ControllerServer,
    EmbeddedSegmentStore,
    GroupEvent,
    GroupReader,
    PravegaConnection,
    ReaderGroup,
    ScaleFailed,
    SegmentIsSealed,
    SegmentWriter,
    current_segments,
    scale_stream,
    segment_info,
    successors,
)
from protoframe.clients.pravega.controller import segment_name
from protoframe.clients.pravega.controller.server import SERVICE
from protoframe.clients.pravega.controller.state import parse_segment_name
from protoframe.clients.pravega.controller.streams import ScaleRefused, StreamSegments, pack_id
from protoframe.generated.pravega import controller as pb
from tests.support.pravega_store import Scenario, run_in_store
from tests.support.pravega_streams import create_stream, write_keyed

KEYS = [f"key-{i}" for i in range(12)]
INFO = pb.StreamInfo(scope="scope", stream="stream")


def run(scenario: Scenario, timeout: float = 30.0, **options: Any) -> None:
    run_in_store(scenario, timeout, **options)


def name(segment_id: int) -> str:
    return segment_name("scope", "stream", segment_id)


def in_order_per_key(events: list[GroupEvent]) -> dict[str, list[int]]:
    """The sequence numbers read of each key, in reading order."""
    out: dict[str, list[int]] = defaultdict(list)
    for _, event in events:
        key, sequence = event.data.decode().split(":")
        out[key].append(int(sequence))
    return out


async def rpc(uri: str, method: str, request: Any, response: type[Any]) -> Any:
    async with grpc.aio.insecure_channel(uri.removeprefix("tcp://")) as channel:
        return await channel.unary_unary(
            f"/{SERVICE}/{method}", request_serializer=lambda m: m.encode(),
            response_deserializer=response.decode)(request, timeout=10.0)


def test_stream_segments_scale_and_cuts() -> None:
    segments = StreamSegments.even(2)
    (a, b) = segments.scale([0], [(0.0, 0.25), (0.25, 0.5)])
    assert (a.id, b.id) == (pack_id(1, 2), pack_id(1, 3))
    assert (a.predecessors, b.predecessors) == ((0,), (0,))
    assert [s.id for s in segments.current] == [a.id, b.id, 1]
    (merged,) = segments.scale([b.id, 1], [(0.25, 1.0)])
    assert merged.id == pack_id(2, 4) and merged.predecessors == (1, b.id)  # by id
    assert [s.id for s in segments.following(0)] == [a.id, b.id]
    assert [s.id for s in segments.following(1)] == [merged.id]
    assert segments.following(merged.id) == []
    assert segments.before([merged.id]) == {b.id, 1, 0}
    assert segments.is_cut([a.id, merged.id]) and segments.is_cut([0, 1])
    assert segments.is_cut([a.id, b.id, 1])
    assert not segments.is_cut([a.id])  # leaves [0.25, 1) uncovered
    assert not segments.is_cut([0, a.id, b.id, 1])  # overlaps
    assert not segments.is_cut([a.id, 99])
    for sealed, ranges in [([0], [(0.0, 0.5)]),  # 0 is sealed already
                           ([a.id], [(0.0, 0.2)]),  # does not cover [0, 0.25)
                           ([a.id], [(0.0, 0.2), (0.1, 0.25)]),  # overlaps
                           ([a.id], [(0.0, 0.3)]),  # reaches into another segment
                           ([], [(0.0, 1.0)]), ([a.id], [])]:
        with pytest.raises(ScaleRefused):
            segments.scale(sealed, ranges)
    assert segments.epoch == 2 and [s.id for s in segments.current] == [a.id, merged.id]


def test_scale_rpcs_successors_and_refusals() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 2)
            first = await current_segments(uri, "scope", "stream")
            assert first == [name(0), name(1)]
            assert parse_segment_name(first[1]) == ("scope", "stream", 1)
            split = await scale_stream(uri, "scope", "stream", [first[0]],
                                       [(0.0, 0.25), (0.25, 0.5)])
            assert split == [name(pack_id(1, 2)), name(pack_id(1, 3))]
            assert await current_segments(uri, "scope", "stream") == split + [first[1]]
            assert (await segment_info(await connect(store), first[0])).sealed
            assert await successors(uri, first[0]) == {s: [first[0]] for s in split}
            assert await successors(uri, first[1]) == {}  # open: nothing follows it yet
            merged = await scale_stream(uri, "scope", "stream", [split[1], first[1]],
                                        [(0.25, 1.0)])
            assert merged == [name(pack_id(2, 4))]
            assert await successors(uri, first[1]) == {merged[0]: sorted([split[1], first[1]])}
            for method in ("getSegmentsImmediatelyFollowing", "getSegmentsImmediatlyFollowing"):
                reply = await rpc(uri, method, pb.SegmentId(streamInfo=INFO,
                                                            segmentId=pack_id(1, 3)),
                                  pb.SuccessorResponse)
                (entry,) = reply.segments
                assert (entry.segment.segmentId.segmentId, entry.segment.minKey,
                        entry.segment.maxKey) == (pack_id(2, 4), 0.25, 1.0)
                assert sorted(entry.value) == [1, pack_id(1, 3)]
            epoch1 = await rpc(uri, "getEpochSegments",
                               pb.GetEpochSegmentsRequest(streamInfo=INFO, epoch=1),
                               pb.SegmentRanges)
            assert [(r.segmentId.segmentId, r.minKey, r.maxKey) for r in epoch1.segmentRanges] \
                == [(pack_id(1, 2), 0.0, 0.25), (pack_id(1, 3), 0.25, 0.5), (1, 0.5, 1.0)]
            status = pb.ScaleStatusResponse.ScaleStatus
            for epoch, expected in [(0, status.SUCCESS), (1, status.SUCCESS),
                                    (2, status.INVALID_INPUT)]:
                reply = await rpc(uri, "checkScale",
                                  pb.ScaleStatusRequest(streamInfo=INFO, epoch=epoch),
                                  pb.ScaleStatusResponse)
                assert reply.status == expected
            before = await current_segments(uri, "scope", "stream")
            for sealed, ranges in [([first[0]], [(0.0, 0.5)]), ([merged[0]], [(0.2, 1.0)])]:
                with pytest.raises(ScaleFailed) as refused:
                    await scale_stream(uri, "scope", "stream", sealed, ranges)
                reply = refused.value.reply
                assert isinstance(reply, pb.ScaleResponse)
                assert reply.status == pb.ScaleResponse.ScaleStreamStatus.PRECONDITION_FAILED
            assert await current_segments(uri, "scope", "stream") == before
            reply = await rpc(uri, "scale", pb.ScaleRequest(
                streamInfo=pb.StreamInfo(scope="scope", stream="absent"), sealedSegments=[0],
                newKeyRanges=[pb.ScaleRequest.KeyRangeEntry(start=0.0, end=1.0)]),
                pb.ScaleResponse)
            assert reply.status == pb.ScaleResponse.ScaleStreamStatus.FAILURE

    run(scenario)


async def connect(store: EmbeddedSegmentStore) -> PravegaConnection:
    return await PravegaConnection.connect(*store.address, request_timeout=10.0)


def test_a_writer_on_a_scaled_segment_is_refused() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 1)
            connection = await connect(store)
            writer = await SegmentWriter.open(connection, name(0))
            await writer.write(b"before")
            await scale_stream(uri, "scope", "stream", [name(0)], [(0.0, 0.5), (0.5, 1.0)])
            with pytest.raises(SegmentIsSealed):
                await SegmentWriter.open(connection, name(0))

    run(scenario)


def test_a_group_reader_follows_a_scale_up_in_order_per_key() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 1)
            connection = await connect(store)
            before = await write_keyed(connection, [(name(0), 0.0, 1.0)],
                                       [(k, s) for s in range(3) for k in KEYS])
            group = await ReaderGroup.create(connection, "scope", "group", [name(0)],
                                             controller=uri)
            reader = await GroupReader.join(group, "r")
            early = await reader.read_available()
            assert sorted(e.data for _, e in early) == sorted(before)
            upper = await scale_stream(uri, "scope", "stream", [name(0)],
                                       [(0.0, 0.5), (0.5, 1.0)])
            ranges = [(upper[0], 0.0, 0.5), (upper[1], 0.5, 1.0)]
            after = await write_keyed(connection, ranges,
                                      [(k, s) for s in range(3, 6) for k in KEYS])
            assert {segment for segment, _, _ in ranges} == set(upper)
            late = await reader.read_available()
            assert sorted(e.data for _, e in late) == sorted(after)
            assert {segment for segment, _ in late} == set(upper)
            assert reader.segments == upper
            for key, sequences in in_order_per_key(early + late).items():
                assert sequences == list(range(6)), key
            claims = await group.claims()
            assert claims[name(0)].ended and claims[name(0)].owner is None
            assert await group.fair_share() == 2
            assert await reader.read_available() == []

    run(scenario)


def test_a_successor_of_two_segments_waits_for_both() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 2)
            connection = await connect(store)
            halves = [(name(0), 0.0, 0.5), (name(1), 0.5, 1.0)]
            before = await write_keyed(connection, halves,
                                       [(k, s) for s in range(3) for k in KEYS])
            group = await ReaderGroup.create(connection, "scope", "group",
                                             [name(0), name(1)], controller=uri)
            first = await GroupReader.join(
                ReaderGroup.join(await connect(store), "scope", "group", controller=uri), "a")
            second = await GroupReader.join(
                ReaderGroup.join(await connect(store), "scope", "group", controller=uri), "b")
            await first.rebalance()  # joined alone, it took both: it gives one back
            await second.rebalance()
            assert (first.segments, second.segments) == ([name(0)], [name(1)])
            (merged,) = await scale_stream(uri, "scope", "stream", [name(0), name(1)],
                                           [(0.0, 1.0)])
            after = await write_keyed(connection, [(merged, 0.0, 1.0)],
                                      [(k, s) for s in range(3, 6) for k in KEYS])
            read_first = await first.read_available()
            # Its segment ended, but the other predecessor is not read yet: no successor.
            assert merged not in await group.claims()
            assert first.segments == []
            read_second = await second.read_available()
            assert second.segments == [merged]
            assert sorted(e.data for _, e in read_first + read_second) == \
                sorted(before + after)
            in_merged = [e for segment, e in read_second if segment == merged]
            assert sorted(e.data for e in in_merged) == sorted(after)
            for key, sequences in in_order_per_key(read_first + read_second).items():
                assert sequences == list(range(6)), key
            assert await first.read_available() == []
            await second.close()
            await first.rebalance()  # the merged segment, freed at its position
            assert first.segments == [merged] and await first.read_available() == []

    run(scenario)


def test_an_ended_segment_waits_for_a_reachable_controller() -> None:
    """Ending a segment asks for its successors first: with the controller unreachable the
    reader returns what it read and keeps the segment (not ended), and ends it on a later
    read; with no controller at all the segment just ends."""
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            await create_stream(uri, "scope", "stream", 1)
            connection = await connect(store)
            written = await write_keyed(connection, [(name(0), 0.0, 1.0)],
                                        [(k, 0) for k in KEYS])
            (merged,) = await scale_stream(uri, "scope", "stream", [name(0)], [(0.0, 1.0)])
            after = await write_keyed(connection, [(merged, 0.0, 1.0)],
                                      [(k, 1) for k in KEYS])
            async with ControllerServer(store.table, store.address) as gone:
                pass  # a controller address with nobody listening any more
            group = await ReaderGroup.create(connection, "scope", "group", [name(0)],
                                             controller=gone)
            reader = await GroupReader.join(group, "r")
            assert sorted(e.data for _, e in await reader.read_available()) == sorted(written)
            claim = (await group.claims())[name(0)]
            assert (claim.owner, claim.ended) == ("r", False)
            assert reader.segments == [name(0)]
            with pytest.raises(ControllerError):
                await successors(gone, name(0))
            group.controller = uri
            read = [e.data for _, e in await reader.read_available()]
            assert sorted(read) == sorted(after)
            assert reader.segments == [merged]
            lone = await ReaderGroup.create(connection, "scope", "lone", [name(0)])
            lone_reader = await GroupReader.join(lone, "r")
            assert sorted(e.data for _, e in await lone_reader.read_available()) == \
                sorted(written)
            assert (await lone.claims())[name(0)].ended and lone_reader.segments == []
            assert merged not in await lone.claims()

    run(scenario)
