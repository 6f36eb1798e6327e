"""runtime.io.limits through runtime.io.server, and the stream buffer's cost, on 127.0.0.1.

The served protocol is written here: a frame is a 4-byte big-endian length and that many bytes,
decoded by ``FrameStream`` (so the server can see the bytes of an unfinished frame, as it sees
every generated protocol's). Each test fails without the limit it tests: the connection it
expects closed would stay open (see the note of issue 18's failure 6).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable, Sequence

from protoframe.runtime.codec.stream import FrameStream
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.limits import ConnectionLimits, partial_bytes_of
from protoframe.runtime.io.server import Server, Session, serve

_LEN = struct.Struct(">I")
MAX_FRAME = 1 << 20


def frame_length(buf: bytes, pos: int, end: int, limit: int) -> int | None:
    if end - pos < 4:
        return None
    return 4 + int(_LEN.unpack_from(buf, pos)[0])


def decode(buf: bytes, start: int, end: int) -> bytes:
    return buf[start + 4:end]


class Sized:
    """Length-prefixed frames of bytes."""

    def __init__(self) -> None:
        self.decoder = FrameStream(frame_length, decode, MAX_FRAME)

    def receive_data(self, data: bytes) -> Sequence[bytes]:
        return self.decoder.feed(data)

    def send(self, frame: bytes) -> bytes:
        return _LEN.pack(len(frame)) + frame


def framed(body: bytes) -> bytes:
    return _LEN.pack(len(body)) + body


class Echo(Session[bytes]):
    def __init__(self) -> None:
        super().__init__(Sized())
        self.lost: ConnectionClosed | None = None

    def frame_received(self, frame: bytes) -> None:
        self.connection.write(frame)

    def connection_lost(self, reason: ConnectionClosed) -> None:
        self.lost = reason


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        await asyncio.wait_for(scenario(), 25)
    asyncio.run(main())


async def start(limits: ConnectionLimits) -> Server[Echo]:
    return await serve("127.0.0.1", 0, Echo, name="sized", limits=limits)


Dialled = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def dial(server: Server[Echo]) -> Dialled:
    return await asyncio.open_connection("127.0.0.1", server.port)


async def echoes(peer: Dialled, body: bytes = b"ping") -> bool:
    """Whether the connection still answers a frame (False once the server closed it)."""
    reader, writer = peer
    try:
        writer.write(framed(body))
        head = await asyncio.wait_for(reader.readexactly(4), 5)
        return await asyncio.wait_for(reader.readexactly(_LEN.unpack(head)[0]), 5) == body
    except (asyncio.IncompleteReadError, ConnectionError):
        return False


async def closed_by_server(peer: Dialled, timeout: float) -> bool:
    """Whether the server closes the connection within ``timeout`` (reading what comes)."""
    reader, _ = peer
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


def test_connections_beyond_the_maximum_are_closed_at_once() -> None:
    async def scenario() -> None:
        server = await start(ConnectionLimits(max_connections=3))
        peers = [await dial(server) for _ in range(3)]
        for peer in peers:
            assert await echoes(peer)
        extra = await dial(server)
        assert await closed_by_server(extra, 5)
        assert server.refused == 1 and len(server.sessions) == 3
        assert all([await echoes(peer) for peer in peers])
        peers[0][1].close()
        while len(server.sessions) > 2:
            await asyncio.sleep(0.01)
        assert await echoes(await dial(server))  # room again
        await server.stop()

    run(scenario)


def test_a_connection_without_a_handshake_is_closed_at_the_deadline() -> None:
    async def scenario() -> None:
        server = await start(ConnectionLimits(handshake_timeout=0.5))
        loop = asyncio.get_running_loop()
        silent = await dial(server)
        talking = await dial(server)
        assert await echoes(talking)  # a frame is this protocol's handshake (the default)
        began = loop.time()
        assert await closed_by_server(silent, 10)
        assert loop.time() - began >= 0.4
        await asyncio.sleep(0.3)
        assert await echoes(talking)
        sessions = list(server.sessions)
        assert len(sessions) == 1 and sessions[0].lost is None
        await server.stop()

    run(scenario)


def test_a_trickled_frame_is_closed_when_its_time_is_up_and_whole_frames_are_not() -> None:
    async def scenario() -> None:
        server = await start(ConnectionLimits(frame_timeout=0.6))
        trickler = await dial(server)
        steady = await dial(server)
        body = framed(b"x" * 200)
        for i in range(60):  # one byte every 50 ms: progress, but no frame in 0.6 s
            if trickler[0].at_eof():
                break
            trickler[1].write(body[i:i + 1])
            if i % 4 == 0:
                assert await echoes(steady)  # whole frames, for longer than the limit
            await asyncio.sleep(0.05)
        assert await closed_by_server(trickler, 5)
        assert await echoes(steady)
        reasons = [s.lost for s in server.sessions]
        assert reasons == [None]
        await server.stop()

    run(scenario)


def test_a_frame_parked_one_byte_short_counts_against_the_connection_budget() -> None:
    async def scenario() -> None:
        server = await start(ConnectionLimits(max_partial_bytes=64 << 10))
        parker = await dial(server)
        other = await dial(server)
        parker[1].write(framed(b"y" * (512 << 10))[:-1])
        assert await closed_by_server(parker, 10)
        assert await echoes(other, b"z" * (60 << 10))  # under the budget: served
        assert server.budget.held == 0
        await server.stop()

    run(scenario)


def test_the_global_budget_closes_the_connection_that_goes_over_it() -> None:
    async def scenario() -> None:
        server = await start(ConnectionLimits(max_partial_bytes_total=100 << 10))
        parked = [await dial(server) for _ in range(3)]
        head = framed(b"p" * (40 << 10))
        for i, (_, writer) in enumerate(parked):
            writer.write(head[:-1])
            await writer.drain()
            want = min(2, i + 1) * (len(head) - 1)
            while server.budget.held < want:
                await asyncio.sleep(0.01)
        assert await closed_by_server(parked[2], 10)  # the third one went over 100 KiB
        assert server.budget.held == 2 * (len(head) - 1)
        for reader, writer in parked[:2]:
            writer.write(head[-1:])  # finish the frames: their bytes are released
            assert await asyncio.wait_for(reader.readexactly(len(head)), 5) == head
        assert server.budget.held == 0
        assert await echoes(await dial(server), b"q" * (90 << 10))
        await server.stop()

    run(scenario)


def test_a_trickled_frame_is_parsed_once_not_on_every_read() -> None:
    # The buffer of an unfinished frame grows in place and its header is read once; before,
    # every read re-joined and re-parsed everything held (CPU quadratic in the pieces).
    calls = 0

    def counting(buf: bytes, pos: int, end: int, limit: int) -> int | None:
        nonlocal calls
        calls += 1
        return frame_length(buf, pos, end, limit)

    stream = FrameStream(counting, decode, MAX_FRAME)
    data = framed(bytes(range(256)) * 256) + framed(b"next")
    got: list[bytes] = []
    for i in range(len(data) - 3):
        got += stream.feed(data[i:i + 1])
        if i == 4:
            assert stream.expected == 4 + 65536 and stream.buffered == 5
    assert got == [bytes(range(256)) * 256]
    assert stream.buffered == 5 and stream.expected == 8
    got += stream.feed(data[-3:])
    assert got[-1] == b"next" and stream.buffered == 0 and stream.expected == 0
    assert calls <= 12, calls  # a handful per frame, not one per byte


def test_partial_bytes_are_read_from_a_protocols_decoder() -> None:
    protocol = Sized()
    probe = partial_bytes_of(protocol)
    assert probe is not None and probe() == 0
    protocol.receive_data(framed(b"abc")[:5])
    assert probe() == 5
    assert partial_bytes_of(object()) is None
