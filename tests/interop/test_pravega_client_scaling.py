"""The real Pravega client's reader group (PyPI ``pravega``, a Rust core, in a subprocess with a
hard timeout) on streams our controller scaled and truncated.

Our writer writes ``key:sequence`` events, each to the segment owning its routing key; our
client scales the stream through our controller (1 -> 2 and 2 -> 1) and writes on into the
successors. The real reader reads every event once, and each key's events in the order written:
it asked our controller for the successors of the segments it finished. After a stream
truncation through our controller at a cut in the successors (the segments before it deleted),
it reads only the events after the cut. The binding has no call to scale or truncate a stream
itself, so both are done with our client. The real client's writer, scaled under between two
batches, finds the sealed segment's successors through our controller and writes on there:
nothing lost, nothing twice, each key in order. The binding's one truncation call,
``ByteStream.truncate``, truncates the segment at the store and never asks the controller.
"""

from __future__ import annotations

import asyncio
import sys
from collections import defaultdict

import pytest

from protoframe.clients.pravega import (
    ControllerServer,
    EmbeddedSegmentStore,
    PravegaConnection,
    SegmentReader,
    StreamCut,
    scale_stream,
    truncate_stream,
)
from protoframe.clients.pravega.controller import segment_name
from tests.support.peer_clients import needs_pravega
from tests.support.pravega_peer import PEER_TIMEOUT, read_group, run
from tests.support.pravega_streams import create_stream, write_keyed

pytestmark = needs_pravega

KEYS = [f"key-{i}" for i in range(10)]

# The real client's byte stream truncating the stream's one segment at argv[4].
BYTE_TRUNCATE = r"""
import os, sys
import pravega_client

uri, scope, stream, offset = sys.argv[1:5]
manager = pravega_client.StreamManager(uri, False, False)  # its runtime serves the stream
stream = manager.create_byte_stream(scope, stream)
stream.truncate(int(offset))
print(stream.current_head_offset(), flush=True)
os._exit(0)  # as after a reader group: the Rust runtime may hang at exit
"""

# The real writer in a subprocess: argv = controller URI, scope, stream. It writes and flushes
# events 0-2 of every key, says so, waits for a line on stdin (the scale happens then), writes
# and flushes events 3-5, and says so again.
SCALED_WRITER = r"""
import sys
import pravega_client

uri, scope, stream = sys.argv[1:4]
manager = pravega_client.StreamManager(uri, False, False)
writer = manager.create_writer(scope, stream)
keys = [f"key-{i}" for i in range(10)]
for sequences in (range(3), range(3, 6)):
    for sequence in sequences:
        for key in keys:
            writer.write_event_bytes(f"{key}:{sequence}".encode(), routing_key=key)
    writer.flush()
    print("flushed", flush=True)
    if sequences == range(3):
        sys.stdin.readline()
"""


def by_key(events: list[bytes]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for event in events:
        key, sequence = event.decode().split(":")
        out[key].append(int(sequence))
    return out


@pytest.mark.timeout(180)  # a stall and a second read_group, up to PEER_TIMEOUT each
@pytest.mark.parametrize(("before", "after"), [(1, 2), (2, 1)])
def test_real_reader_group_follows_a_scale_in_order_per_key(before: int, after: int) -> None:
    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        uri = controller.uri
        await create_stream(uri, "interop", "scaled", before)
        old = [(segment_name("interop", "scaled", n), n / before, (n + 1) / before)
               for n in range(before)]
        async with await PravegaConnection.connect(*store.address) as connection:
            written = await write_keyed(connection, old, [(k, s) for s in range(3) for k in KEYS])
            new = await scale_stream(uri, "interop", "scaled", [name for name, _, _ in old],
                                     [(n / after, (n + 1) / after) for n in range(after)])
            ranges = [(name, n / after, (n + 1) / after) for n, name in enumerate(new)]
            written += await write_keyed(connection, ranges,
                                         [(k, s) for s in range(3, 6) for k in KEYS])
        result = await read_group(uri, {
            "kind": "read_group", "scope": "interop", "stream": "scaled", "group": "g",
            "count": len(written), "seconds": 20})
        read = [bytes.fromhex(e) for e in result["events"]]
        assert sorted(read) == sorted(written)
        assert by_key(read) == {key: list(range(6)) for key in KEYS}
        # The successors of each finished segment, asked with the correctly spelt RPC.
        assert "getSegmentsImmediatelyFollowing" in controller.calls
        assert "getSegmentsImmediatlyFollowing" not in controller.calls

    run(scenario)


@pytest.mark.timeout(180)  # a stall and a second read_group, up to PEER_TIMEOUT each
def test_real_reader_group_starts_at_a_cut_our_controller_truncated_after_a_scale() -> None:
    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        uri = controller.uri
        await create_stream(uri, "interop", "cut", 1)
        first = segment_name("interop", "cut", 0)
        async with await PravegaConnection.connect(*store.address) as connection:
            gone = await write_keyed(connection, [(first, 0.0, 1.0)], [(k, 0) for k in KEYS])
            new = await scale_stream(uri, "interop", "cut", [first], [(0.0, 0.5), (0.5, 1.0)])
            ranges = [(new[0], 0.0, 0.5), (new[1], 0.5, 1.0)]
            written = await write_keyed(connection, ranges,
                                        [(k, s) for s in range(1, 4) for k in KEYS])
            cut = {}
            kept: list[bytes] = []
            for name in new:
                events = await SegmentReader(connection, name).read_all()
                cut[name] = events[len(events) // 3].offset
                kept += [e.data for e in events[len(events) // 3:]]
            await truncate_stream(uri, StreamCut("interop", "cut", cut))
        assert store.table.get(first) is None
        result = await read_group(uri, {
            "kind": "read_group", "scope": "interop", "stream": "cut", "group": "g",
            "count": len(kept), "seconds": 15})
        read = [bytes.fromhex(e) for e in result["events"]]
        assert sorted(read) == sorted(kept)
        assert not set(read) & set(gone) and set(kept) < set(written)
        assert "getSegments" in controller.calls  # the head: the cut, not epoch 0

    run(scenario)


@pytest.mark.timeout(150)  # two waits on the real client, of up to PEER_TIMEOUT each
def test_real_writer_moves_to_the_successors_of_a_scaled_segment() -> None:
    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        uri = controller.uri
        await create_stream(uri, "interop", "moved", 1)
        first = segment_name("interop", "moved", 0)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SCALED_WRITER, uri, "interop", "moved",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        assert process.stdin is not None and process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), PEER_TIMEOUT)
            assert line == b"flushed\n", line
            new = await scale_stream(uri, "interop", "moved", [first], [(0.0, 0.5), (0.5, 1.0)])
            process.stdin.write(b"go\n")
            await process.stdin.drain()
            out, err = await asyncio.wait_for(process.communicate(), PEER_TIMEOUT)
        except BaseException:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        assert process.returncode == 0, err.decode(errors="replace")[-3000:]
        assert out == b"flushed\n"
        async with await PravegaConnection.connect(*store.address) as connection:
            before = [e.data for e in await SegmentReader(connection, first).read_all()]
            after = [[e.data for e in await SegmentReader(connection, name).read_all()]
                     for name in new]
        assert sorted(before) == sorted(f"{k}:{s}".encode() for s in range(3) for k in KEYS)
        assert all(after), "both successors got events"
        read = before + sum(after, [])
        assert sorted(read) == sorted(f"{k}:{s}".encode() for s in range(6) for k in KEYS)
        # Each key went on in exactly one successor, in the order written.
        assert by_key(before) == {key: [0, 1, 2] for key in KEYS}
        parts = [by_key(part) for part in after]
        for key in KEYS:
            assert [part.get(key) for part in parts].count([3, 4, 5]) == 1, key
            assert sum(key in part for part in parts) == 1, key
        assert "getSegmentsImmediatelyFollowing" in controller.calls, controller.calls

    run(scenario)


@pytest.mark.timeout(120)
def test_the_real_clients_byte_stream_truncates_at_the_store_not_through_the_controller(
        ) -> None:
    async def scenario(store: EmbeddedSegmentStore, controller: ControllerServer) -> None:
        await create_stream(controller.uri, "interop", "bytes", 1)
        name = segment_name("interop", "bytes", 0)
        async with await PravegaConnection.connect(*store.address) as connection:
            await write_keyed(connection, [(name, 0.0, 1.0)], [(k, 0) for k in KEYS])
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", BYTE_TRUNCATE, controller.uri, "interop", "bytes", "40",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(process.communicate(), PEER_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        assert process.returncode == 0, err.decode(errors="replace")[-3000:]
        assert out == b"40\n"
        segment = store.table.get(name)
        assert segment is not None and segment.start_offset == 40
        assert "TRUNCATE_SEGMENT" in store.received
        assert "truncateStream" not in controller.calls

    run(scenario)
