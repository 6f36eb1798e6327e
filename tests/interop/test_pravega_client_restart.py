"""The real Pravega client's writer (PyPI ``pravega``, a Rust core) across a restart of our
segment store on its directory: nothing it had acknowledged is lost, and nothing it wrote
is stored twice.

The client runs in a subprocess with a hard timeout. It writes and flushes a first half of the
events and says so. Then either it waits while the test stops the store (every connection
drops) and writes the second half into the outage, or it writes the second half at once and
the store stops under it, with events in flight. The test starts a new store on the same port
and directory.
The client's writer reconnects and sets up its appends again; our store answers with each
writer id's last event number, which it kept with the data, so the client sends again only
what the segment does not hold.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pravega import (
    ControllerServer,
    EmbeddedSegmentStore,
    PravegaConnection,
    SegmentReader,
)
from protoframe.clients.pravega.controller import segment_name
from tests.support.peer_clients import needs_pravega

pytestmark = needs_pravega

PEER_TIMEOUT = 40.0
OUTAGE = 1.0  # seconds the store is down while the client writes
COUNT = 400
HALF = 200

# argv = controller URI, then a JSON job. Prints "flushed" after the first half, waits for a
# line on stdin if the job says so, writes the second half, and prints one JSON line once that
# is flushed too.
PEER = r"""
import json, sys
import pravega_client

uri, job = sys.argv[1], json.loads(sys.argv[2])
manager = pravega_client.StreamManager(uri, False, False)
manager.create_scope(job["scope"])
manager.create_stream(job["scope"], job["stream"], job["segments"])
writer = manager.create_writer(job["scope"], job["stream"])
for key, text in job["first"]:
    writer.write_event_bytes(text.encode(), routing_key=key)
writer.flush()
print("flushed", flush=True)
if job["wait"]:
    sys.stdin.readline()
for key, text in job["second"]:
    writer.write_event_bytes(text.encode(), routing_key=key)
writer.flush()
print(json.dumps({"written": len(job["first"]) + len(job["second"])}), flush=True)
"""


async def read_stream(store: EmbeddedSegmentStore, scope: str, stream: str,
                      segments: int) -> list[list[bytes]]:
    async with await PravegaConnection.connect(*store.address, request_timeout=5.0) as c:
        return [[e.data for e in await SegmentReader(c, segment_name(scope, stream, n)).read_all()]
                for n in range(segments)]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("segments", [1, 3])
@pytest.mark.parametrize("when", ["between writes", "while writing"])
def test_real_writer_loses_and_repeats_nothing_across_a_store_restart(
        tmp_path: Path, segments: int, when: str) -> None:
    events = [[f"key-{i % 5}", f"event {i:03d} " + "y" * (i % 17)] for i in range(COUNT)]
    job: dict[str, Any] = {"scope": "interop", "stream": "restarted", "segments": segments,
                           "first": events[:HALF], "second": events[HALF:],
                           "wait": when == "between writes"}

    async def scenario() -> None:
        store = EmbeddedSegmentStore(directory=tmp_path)
        await store.start()
        port = store.port
        controller = ControllerServer(store.table, store.address)
        await controller.start()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PEER, controller.uri, json.dumps(job),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        assert process.stdin is not None and process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), PEER_TIMEOUT)
            assert line.strip() == b"flushed", line
            # Everything written so far is acknowledged; it must survive the restart.
            acknowledged = await read_stream(store, "interop", "restarted", segments)
            flushed = sorted(t.encode() for _, t in events[:HALF])
            if job["wait"]:
                assert sorted(sum(acknowledged, [])) == flushed
            else:  # and maybe some of the second half already
                assert set(flushed) <= set(sum(acknowledged, []))

            await store.stop()
            process.stdin.write(b"go\n")
            await process.stdin.drain()
            await asyncio.sleep(OUTAGE)
            store = EmbeddedSegmentStore(port=port, directory=tmp_path)
            controller.state.table = store.table
            await store.start()

            out, err = await asyncio.wait_for(process.communicate(), PEER_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise AssertionError(f"the Pravega client did not finish within {PEER_TIMEOUT} s"
                                 ) from None
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await controller.stop()
        try:
            assert process.returncode == 0, err.decode(errors="replace")[-3000:]
            assert json.loads(out.decode().strip().splitlines()[-1]) == {"written": COUNT}
            stored = await read_stream(store, "interop", "restarted", segments)
            # Every event exactly once...
            assert sorted(sum(stored, [])) == sorted(t.encode() for _, t in events)
            # ...each segment still starting with what it held before the restart...
            for before, after in zip(acknowledged, stored, strict=True):
                assert after[:len(before)] == before
            # ...and each routing key's events in the order written, in one segment.
            for key in {k for k, _ in events}:
                wanted = [t.encode() for k, t in events if k == key]
                assert [[e for e in got if e in wanted] for got in stored].count(wanted) == 1
            # The client really did reconnect and set its appends up again on the new store.
            assert store.received["SETUP_APPEND"] >= 1
        finally:
            await store.stop()

    asyncio.run(scenario())
