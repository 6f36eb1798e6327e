"""Our reader group and group event reader against the embedded segment store, over TCP on
127.0.0.1.

Covers two readers splitting three segments fairly and reading every event exactly once
(also when a second reader joins late and the first gives back its excess), a closed reader's
successor resuming after the recorded positions, periodic checkpoints, a version conflict on a
segment's entry decided again on the fresh entry, that a reader cannot record a segment it
does not hold, four readers racing for three segments, a dead reader's segments freed at its
last checkpoint, positions kept across a store restart on its directory, a position below a
truncation moved up to it, and a group over the segments the controller names.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest

from protoframe.clients.pravega import (
    EmbeddedSegmentStore,
    PravegaConnection,
    SegmentAlreadyExists,
    SegmentReader,
    SegmentWriter,
    segment_info,
    truncate_segment,
)
from protoframe.clients.pravega.controller import ControllerServer, segment_name
from protoframe.clients.pravega.controller.server import SERVICE
from protoframe.clients.pravega.errors import reply_error
from protoframe.clients.pravega.events import EVENT_HEADER_SIZE
from protoframe.clients.pravega.group_reader import GroupEvent, GroupReader
from protoframe.clients.pravega.group_state import SegmentClaim, encode_claim, segment_key
from protoframe.clients.pravega.reader_group import ReaderGroup, SegmentNotHeld
from protoframe.clients.pravega.stream_segments import current_segments
from protoframe.generated.pravega import controller as pb
from protoframe.runtime.errors import RequestFailed
from tests.support.pravega_store import Scenario, run_in_store

SEGMENTS = [segment_name("scope", "stream", n) for n in range(3)]
def run(scenario: Scenario, timeout: float = 15.0, **options: Any) -> None:
    run_in_store(scenario, timeout, **options)


async def connect(store: EmbeddedSegmentStore) -> PravegaConnection:
    return await PravegaConnection.connect(*store.address, request_timeout=5.0)


async def write(connection: PravegaConnection, count: int, start: int = 0) -> list[bytes]:
    """``count`` events spread over the segments (created if missing); their payloads."""
    payloads = [f"event {i}".encode() for i in range(start, start + count)]
    for index, segment in enumerate(SEGMENTS):
        with contextlib.suppress(SegmentAlreadyExists):
            await create_segment(connection, segment)
        writer = await SegmentWriter.open(connection, segment)
        for payload in payloads[index::len(SEGMENTS)]:
            writer.write(payload)
        await writer.flush()
    return payloads


async def create_segment(connection: PravegaConnection, segment: str) -> None:
    try:
        await connection.requests.create_segment(segment, 0, 0, "")
    except RequestFailed as exc:
        raise reply_error(exc) from None


def payloads(events: list[GroupEvent]) -> list[bytes]:
    return [event.data for _, event in events]


def test_two_readers_split_three_segments_and_read_every_event_once() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        written = await write(connection, 30)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        other = await connect(store)
        # Both members before either takes a share, so each takes ceil(3 / 2) at most.
        await group.add_reader("a")
        await group.add_reader("b")
        a = await GroupReader.join(group, "a")
        b = await GroupReader.join(ReaderGroup.join(other, "scope", "group"), "b")
        assert (len(a.segments), len(b.segments)) == (2, 1)
        assert not set(a.segments) & set(b.segments)
        claims = await group.claims()
        assert {c.segment: c.owner for c in claims.values()} == (
            {s: "a" for s in a.segments} | {s: "b" for s in b.segments})
        read = payloads(await a.read_available()) + payloads(await b.read_available())
        assert sorted(read) == sorted(written) and len(read) == len(set(read))
        assert payloads(await a.read_available()) == []  # nothing new: nothing again
        more = await write(connection, 6, start=30)
        read = payloads(await a.read_available()) + payloads(await b.read_available())
        assert sorted(read) == sorted(more)

    run(scenario)


def test_a_late_reader_gets_the_excess_of_the_first() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        written = await write(connection, 12)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        a = await GroupReader.join(group, "a")
        assert a.segments == sorted(SEGMENTS)  # alone: it holds all three
        first = await a.read_available()
        assert sorted(payloads(first)) == sorted(written)
        b = await GroupReader.join(group, "b")
        assert b.segments == []  # nothing free yet
        await a.rebalance()  # share is now 2: it gives one back at its position
        assert len(a.segments) == 2
        await b.rebalance()
        assert len(b.segments) == 1 and b.segments[0] not in a.segments
        assert await b.read_available() == []  # a had read it to the end
        more = await write(connection, 9, start=12)
        read = payloads(await a.read_available()) + payloads(await b.read_available())
        assert sorted(read) == sorted(more)

    run(scenario)


def test_a_new_reader_resumes_after_the_closed_ones_position() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        written = await write(connection, 15)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        first = await GroupReader.join(group, "first")
        seen = payloads(await first.read_available())
        await first.close()
        assert await group.readers() == []
        claims = await group.claims()
        assert all(c.owner is None and c.offset > 0 for c in claims.values())
        more = await write(connection, 6, start=15)
        # A new connection and a new group handle, as a new process would have.
        again = ReaderGroup.join(await connect(store), "scope", "group")
        second = await GroupReader.join(again, "second")
        assert second.segments == sorted(SEGMENTS)
        rest = payloads(await second.read_available())
        assert sorted(rest) == sorted(more)
        assert sorted(seen + rest) == sorted(written + more)

    run(scenario)


def test_unrecorded_events_are_read_again_and_checkpoints_record_periodically() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        await write(connection, 9)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        reader = await GroupReader.join(group, "r", checkpoint_every=4)
        events = await reader.read_available()
        assert len(events) == 9
        # Checkpoints after the 4th and 8th event: the 9th event's position is not stored.
        stored = {c.segment: c.offset for c in (await group.claims()).values()}
        ninth_segment, ninth = events[8]
        assert stored[ninth_segment] == ninth.offset
        await reader.checkpoint()
        stored = {c.segment: c.offset for c in (await group.claims()).values()}
        assert stored == reader.positions

    run(scenario)


def test_a_version_conflict_is_decided_again_on_the_fresh_entry() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS[:1])
        rival = ReaderGroup.join(await connect(store), "scope", "group")
        seen: list[SegmentClaim] = []
        rival_put: list[asyncio.Task[int]] = []

        def decide(claim: SegmentClaim) -> tuple[str | None, int] | None:
            seen.append(claim)
            if len(seen) == 1:
                # Between our read and our put, the rival takes the segment.
                rival_put.append(asyncio.ensure_future(rival.table.put(
                    segment_key(SEGMENTS[0]), encode_claim("rival", 0),
                    version=claim.version)))
            return ("us", 0) if claim.owner is None else None

        original_put = group.table.put

        async def put_after_rival(key: bytes, value: bytes, *, version: int | None = None
                                  ) -> int:
            await asyncio.gather(*rival_put)
            return await original_put(key, value, version=version)

        group.table.put = put_after_rival  # type: ignore[method-assign]
        assert await group.change(SEGMENTS[0], decide) is None
        assert group.conflicts == 1
        assert [c.owner for c in seen] == [None, "rival"]
        assert seen[1].version > seen[0].version
        assert (await group.claims())[SEGMENTS[0]].owner == "rival"
        with pytest.raises(SegmentNotHeld):
            await group.record("us", SEGMENTS[0], 0)
        assert await group.acquire("us", 1) == []

    run(scenario)


def test_readers_joining_at_once_never_share_a_segment() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        written = await write(connection, 30)
        await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        groups = [ReaderGroup.join(await connect(store), "scope", "group") for _ in range(4)]
        # Four members race for three segments, each over its own connection.
        readers = await asyncio.gather(*(GroupReader.join(g, f"r{i}")
                                         for i, g in enumerate(groups)))
        held = [s for r in readers for s in r.segments]
        assert len(held) == len(set(held))
        claims = await groups[0].claims()
        assert sorted(s for s, c in claims.items() if c.owner is not None) == sorted(held)
        for reader in readers:
            for segment in reader.segments:
                assert claims[segment].owner == reader.reader_id
        read: list[bytes] = []
        for _ in range(3):  # rebalancing until every segment has a holder
            for reader in readers:
                await reader.rebalance()
                read += payloads(await reader.read_available())
        assert sorted(read) == sorted(written) and len(read) == len(set(read))

    run(scenario)


def test_a_dead_readers_segments_resume_from_its_last_checkpoint() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        written = await write(connection, 9)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        dead = await GroupReader.join(group, "dead")
        checkpointed = payloads(await dead.read_available())
        await dead.checkpoint()
        more = await write(connection, 6, start=9)
        lost = payloads(await dead.read_available())  # read, never checkpointed, never closed
        assert sorted(lost) == sorted(more)
        assert await group.reader_offline("dead") == sorted(SEGMENTS)
        assert await group.readers() == []
        heir = await GroupReader.join(group, "heir")
        again = payloads(await heir.read_available())
        assert sorted(again) == sorted(more)  # from the checkpoint on: the unrecorded ones
        assert sorted(checkpointed) == sorted(written)

    run(scenario)


def test_positions_survive_a_store_restart(tmp_path: Path) -> None:
    async def first(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        await write(connection, 12)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        reader = await GroupReader.join(group, "r")
        assert len(await reader.read_available()) == 12
        await reader.close()
        await write(connection, 3, start=12)

    async def second(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        # Creating it again keeps the entries (and positions) already there.
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        reader = await GroupReader.join(group, "r2")
        assert sorted(payloads(await reader.read_available())) == [
            b"event 12", b"event 13", b"event 14"]

    run(first, directory=tmp_path)
    run(second, directory=tmp_path)


def test_a_group_over_the_segments_the_controller_names() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with ControllerServer(store.table, store.address) as uri:
            async with grpc.aio.insecure_channel(uri.removeprefix("tcp://")) as channel:
                for method, message in [
                        ("createScope", pb.ScopeInfo(scope="scope")),
                        ("createStream", pb.StreamConfig(
                            streamInfo=pb.StreamInfo(scope="scope", stream="stream"),
                            scalingPolicy=pb.ScalingPolicy(minNumSegments=3)))]:
                    await channel.unary_unary(
                        f"/{SERVICE}/{method}", request_serializer=lambda m: m.encode(),
                        response_deserializer=lambda b: b)(message, timeout=5.0)
            segments = await current_segments(uri, "scope", "stream")
            assert segments == SEGMENTS
            assert await current_segments(uri, "scope", "absent") == []
        connection = await connect(store)
        written = await write(connection, 9)
        group = await ReaderGroup.create(connection, "scope", "group", segments)
        reader = await GroupReader.join(group)
        assert sorted(payloads(await reader.read_available())) == sorted(written)

    run(scenario)


def test_a_position_below_a_truncation_moves_up_to_it() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        connection = await connect(store)
        await write(connection, 6)
        group = await ReaderGroup.create(connection, "scope", "group", SEGMENTS)
        info = await segment_info(connection, SEGMENTS[0])
        # Cut the first segment after its first event, which no reader has read.
        first_event = (await SegmentReader(connection, SEGMENTS[0]).read_all())[0]
        cut = first_event.offset + EVENT_HEADER_SIZE + len(first_event.data)
        await truncate_segment(connection, SEGMENTS[0], cut)
        reader = await GroupReader.join(group, "r")
        read = payloads(await reader.read_available())
        assert first_event.data not in read
        assert sorted(read) == sorted(f"event {i}".encode() for i in range(1, 6))
        assert reader.positions[SEGMENTS[0]] == info.length

    run(scenario)
