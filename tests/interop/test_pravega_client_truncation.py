"""The real Pravega client's reader group (PyPI ``pravega``, a Rust core, in a subprocess with a
hard timeout) on a stream whose segments our store has truncated: the group starts at the head
of the stream, which our controller places at each segment's start offset, so it reads the
events after the cut and none before it.
"""

from __future__ import annotations

import asyncio

import pytest

from protoframe.clients.pravega import (
    ControllerServer,
    EmbeddedSegmentStore,
    PravegaConnection,
    SegmentReader,
    SegmentWriter,
    truncate_segment,
)
from protoframe.clients.pravega.controller import segment_name
from protoframe.generated.pravega import controller as pb
from tests.support.peer_clients import needs_pravega
from tests.support.pravega_peer import run, run_peer

pytestmark = needs_pravega


@pytest.mark.timeout(90)
@pytest.mark.parametrize("segments", [1, 3])
def test_real_reader_group_starts_after_the_truncated_part(segments: int) -> None:
    payloads = {n: [b"event %d in %d" % (i, n) for i in range(8)] for n in range(segments)}
    cut_at = 3  # events before this one, in each segment, are truncated away

    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        controller.state.createScope(pb.ScopeInfo(scope="interop"))
        controller.state.createStream(pb.StreamConfig(
            streamInfo=pb.StreamInfo(scope="interop", stream="truncated"),
            scalingPolicy=pb.ScalingPolicy(minNumSegments=segments)))
        async with await PravegaConnection.connect(*store.address) as connection:
            for number, events in payloads.items():
                name = segment_name("interop", "truncated", number)
                writer = await SegmentWriter.open(connection, name)
                await asyncio.gather(*(writer.write(p) for p in events))
                starts = [e.offset for e in await SegmentReader(connection, name).read_all()]
                await truncate_segment(connection, name, starts[cut_at])
        expected = sorted(p for events in payloads.values() for p in events[cut_at:])
        result = await run_peer(controller.uri, {
            "kind": "read_group", "scope": "interop", "stream": "truncated",
            "group": "group-t", "count": len(expected), "seconds": 15})
        assert sorted(bytes.fromhex(e) for e in result["events"]) == expected
        assert "getSegments" in controller.calls

    run(scenario)
