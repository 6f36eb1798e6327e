"""Interop with the real Pravega client (PyPI ``pravega``, a Rust core) through our servers.

Our embedded segment store and test controller run in the test's event loop on 127.0.0.1;
the Pravega client runs in a subprocess (in-process it can block while holding the GIL) with
a hard timeout. It creates a scope and streams over gRPC, writes events through our store, and
our typed reader reads them back; it reads, as a byte stream, the events our writer wrote;
and its reader group (its state in our store's table segments) reads with an event reader what
it and our writer wrote.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from protoframe.clients.pravega import (
    ControllerServer,
    EmbeddedSegmentStore,
    PravegaConnection,
    SegmentReader,
    SegmentWriter,
    TableSegmentClient,
)
from protoframe.clients.pravega.controller import segment_name
from protoframe.generated.pravega import controller as pb
from tests.support.peer_clients import needs_pravega
from tests.support.pravega_peer import run, run_peer

pytestmark = needs_pravega

@pytest.mark.timeout(150)
@pytest.mark.parametrize("segments", [1, 3])
def test_real_client_writes_and_our_reader_reads(segments: int) -> None:
    events = [[f"key-{i % 5}", f"event {i} " + "x" * (i % 13)] for i in range(60)]

    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        job = {"kind": "write", "scope": "interop", "stream": "written", "segments": segments,
               "events": events}
        assert await run_peer(controller.uri, job) == {"scope_created": True,
                                                       "stream_created": True}
        used_by_peer = set(store.received)
        per_segment: list[list[bytes]] = []
        async with await PravegaConnection.connect(*store.address) as connection:
            for number in range(segments):
                name = segment_name("interop", "written", number)
                per_segment.append([e.data for e in
                                    await SegmentReader(connection, name).read_all()])
        assert sorted(sum(per_segment, [])) == sorted(text.encode() for _, text in events)
        # Each routing key maps to one segment, where its events keep the order written.
        for key in {k for k, _ in events}:
            wanted = [t.encode() for k, t in events if k == key]
            assert [[e for e in got if e in wanted] for got in per_segment].count(wanted) == 1
        if segments > 1:
            assert sum(1 for got in per_segment if got) > 1  # the keys really were spread
        # What the real client needed from us, over gRPC and on the wire.
        assert set(controller.calls) == {"createScope", "createStream", "getCurrentSegments",
                                         "getURI"}
        assert used_by_peer == {"HELLO", "SETUP_APPEND", "APPEND_BLOCK_END"}

    run(scenario)


@pytest.mark.timeout(150)
def test_real_client_reads_what_our_writer_wrote() -> None:
    payloads = [b"from protoframe %d" % i for i in range(25)] + [bytes(range(256))]

    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        controller.state.createScope(pb.ScopeInfo(scope="interop"))
        controller.state.createStream(pb.StreamConfig(
            streamInfo=pb.StreamInfo(scope="interop", stream="ours"),
            scalingPolicy=pb.ScalingPolicy(minNumSegments=1)))
        async with await PravegaConnection.connect(*store.address) as connection:
            writer = await SegmentWriter.open(connection, segment_name("interop", "ours", 0),
                                              block_size=100)
            await asyncio.gather(*(writer.write(p) for p in payloads))
        result = await run_peer(controller.uri, {"kind": "read_bytes", "scope": "interop",
                                                 "stream": "ours"})
        expected = b"".join(struct.pack(">ii", 0, len(p)) + p for p in payloads)
        assert result["tail"] == len(expected)
        assert bytes.fromhex(result["hex"]) == expected
        assert "GET_STREAM_SEGMENT_INFO" in store.received
        assert "READ_SEGMENT" in store.received
        assert "getSegments" in controller.calls

    run(scenario)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("segments", [1, 3])
def test_real_reader_group_reads_what_both_writers_wrote(segments: int) -> None:
    theirs = [[f"key-{i % 7}", f"theirs {i}"] for i in range(30)]
    ours = [b"ours %d in %d" % (i, n) for n in range(segments) for i in range(5)]

    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        job = {"kind": "write", "scope": "interop", "stream": "grouped", "segments": segments,
               "events": theirs}
        assert await run_peer(controller.uri, job) == {"scope_created": True,
                                                       "stream_created": True}
        async with await PravegaConnection.connect(*store.address) as connection:
            for number in range(segments):
                writer = await SegmentWriter.open(
                    connection, segment_name("interop", "grouped", number))
                await asyncio.gather(*(writer.write(p) for p in ours
                                       if p.endswith(b" in %d" % number)))
        expected = sorted([t.encode() for _, t in theirs] + ours)
        read_job = {"kind": "read_group", "scope": "interop", "stream": "grouped",
                    "group": "group-1", "count": len(expected), "seconds": 15}
        result = await run_peer(controller.uri, read_job)
        assert sorted(bytes.fromhex(e) for e in result["events"]) == expected
        # The group's position in each segment is the segment's end, as read.
        lengths = {str(n): store.table.segments[segment_name("interop", "grouped", n)].length
                   for n in range(segments)}
        assert result["positions"] == lengths
        # The reader group kept its state in a table segment of ours, through the table
        # commands; our table client reads what it wrote there.
        assert {"CREATE_TABLE_SEGMENT", "UPDATE_TABLE_ENTRIES",
                "READ_TABLE_ENTRIES_DELTA"} <= set(store.received)
        assert "getSegments" in controller.calls
        async with await PravegaConnection.connect(*store.address) as connection:
            state = TableSegmentClient(connection,
                                       segment_name("interop", "group-1_kvtable", 0))
            keys = [entry.key async for entry in state.entries()]
        assert keys
        for number in range(segments):  # each stream segment is named in the group's state
            name = segment_name("interop", "grouped", number).encode()
            assert any(name in key for key in keys), (name, keys)
        # A later process's reader in the same group resumes from those positions: it reads
        # the events written since, and none of the earlier ones again.
        later = [b"later %d" % n for n in range(segments)]
        async with await PravegaConnection.connect(*store.address) as connection:
            for number, payload in enumerate(later):
                writer = await SegmentWriter.open(
                    connection, segment_name("interop", "grouped", number))
                await writer.write(payload)
        result = await run_peer(controller.uri, {**read_job, "count": len(later)})
        assert sorted(bytes.fromhex(e) for e in result["events"]) == later

    run(scenario)
