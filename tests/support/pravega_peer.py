"""The real Pravega client (PyPI ``pravega``, a Rust core) as a test peer: it runs in a
subprocess (in-process it can block while holding the GIL) with a hard timeout, against our
segment store and controller, which ``run`` starts in the test's event loop on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from protoframe.clients.pravega import ControllerServer, EmbeddedSegmentStore

# Generous: the real client takes ~11 s here, and over 30 s when the 2-core machine is loaded.
PEER_TIMEOUT = 60.0

# The subprocess: argv = controller URI, then a JSON job; prints one JSON result line.
PEER = r"""
import json, sys
import pravega_client

uri, job = sys.argv[1], json.loads(sys.argv[2])
manager = pravega_client.StreamManager(uri, False, False)
result = {}
if job["kind"] == "write":
    result["scope_created"] = manager.create_scope(job["scope"])
    result["stream_created"] = manager.create_stream(job["scope"], job["stream"],
                                                     job["segments"])
    writer = manager.create_writer(job["scope"], job["stream"])
    for key, text in job["events"]:
        writer.write_event_bytes(text.encode(), routing_key=key)
    writer.flush()
elif job["kind"] == "read_group":
    import asyncio, os, time
    group = manager.create_reader_group(job["group"], job["scope"], job["stream"])
    reader = group.create_reader("reader-1")

    async def read() -> list:
        events, deadline = [], time.monotonic() + job["seconds"]
        while len(events) < job["count"] and time.monotonic() < deadline:
            piece = await reader.get_segment_slice_async()
            events.extend(bytes(event.data()).hex() for event in piece)
            reader.release_segment(piece)
        reader.reader_offline()
        return events

    result["events"] = asyncio.run(read())
    # Going offline hands the reader's positions back to the group's state.
    result["positions"] = {str(number): offset for number, offset
                           in group.get_streamcut().get_segment_offset_map().items()}
    print(json.dumps(result), flush=True)
    # The Rust runtime can hang while the interpreter exits after a reader group has read
    # several segments (every object dropped, nothing more sent to our peers): the result
    # is out, so leave at once.
    os._exit(0)
else:
    stream = manager.create_byte_stream(job["scope"], job["stream"])
    tail = stream.current_tail_offset()
    data = bytearray()
    buffer = bytearray(4096)
    while len(data) < tail:
        n = stream.readinto(buffer)
        data += buffer[:n]
    result["tail"] = tail
    result["hex"] = bytes(data).hex()
print(json.dumps(result), flush=True)
"""


class PeerStalled(AssertionError):
    """The real client neither finished nor failed within ``PEER_TIMEOUT``."""


async def run_peer(uri: str, job: dict[str, Any]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PEER, uri, json.dumps(job),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), PEER_TIMEOUT)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        raise PeerStalled(
            f"the Pravega client did not finish within {PEER_TIMEOUT} s; its output:\n"
            f"{out.decode(errors='replace')[-2000:]}\n{err.decode(errors='replace')[-3000:]}"
        ) from None
    assert process.returncode == 0, err.decode(errors="replace")[-3000:]
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def read_group(uri: str, job: dict[str, Any]) -> dict[str, Any]:
    """A ``read_group`` job; if the real client stalls, once more in a fresh reader group.

    Once in a CI run (and in none of 24 runs by hand), the real client's reader never returned
    a slice after a scale our controller did, though the stream no longer changed. The cause
    is not found; the stall is reported as a warning with the client's output, and a second
    group reads the whole stream again, so every assertion still holds on what it read.
    """
    try:
        return await run_peer(uri, job)
    except PeerStalled as stalled:
        warnings.warn(f"reading again in a fresh reader group: {stalled}", stacklevel=2)
        return await run_peer(uri, {**job, "group": f"{job['group']}-again"})


Scenario = Callable[[EmbeddedSegmentStore, ControllerServer], Awaitable[None]]


def run(scenario: Scenario) -> None:
    async def main() -> None:
        async with EmbeddedSegmentStore() as store:
            controller = ControllerServer(store.table, store.address)
            assert (await controller.start()).startswith("tcp://127.0.0.1:")
            try:
                await scenario(store, controller)
            finally:
                await controller.stop()

    asyncio.run(main())
