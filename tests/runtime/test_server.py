"""runtime.io.server and runtime.io.keepalive against plain asyncio stream clients on 127.0.0.1.

The served protocol is a line protocol written here (a frame is a line; a line with ``!`` in
it does not decode), so nothing depends on a generated protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from protoframe.runtime.errors import ConnectionClosed, DecodeError
from protoframe.runtime.io.keepalive import IdlePing, KeepalivePolicy, PingWhenQuiet
from protoframe.runtime.io.server import Server, Session, serve


class Lines:
    """Bytes in, lines out; a line holding ``!`` is a decode error."""

    def __init__(self) -> None:
        self.buffer = b""

    def receive_data(self, data: bytes) -> Sequence[str]:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if b"!" in line:
                raise DecodeError(f"bad line {line!r}")
        return [line.decode() for line in lines]

    def send(self, frame: str) -> bytes:
        return frame.encode() + b"\n"


class Echo(Session[str]):
    """Greets, echoes each line upper-cased, records its life."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(Lines())
        self.log = log

    def connection_made(self) -> None:
        self.log.append("made")
        self.connection.write("hello")

    def frame_received(self, frame: str) -> None:
        self.log.append(f"got {frame}")
        if frame == "bye":
            self.connection.close()
        else:
            self.connection.write(frame.upper())

    def connection_lost(self, reason: ConnectionClosed) -> None:
        self.log.append("lost")


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        await asyncio.wait_for(scenario(), 20)
    asyncio.run(main())


async def start(log: list[str], keepalive: Callable[[Echo], KeepalivePolicy[Any] | None]
                | None = None) -> Server[Echo]:
    return await serve("127.0.0.1", 0, lambda: Echo(log), keepalive=keepalive, name="echo")


async def dial(server: Server[Echo]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port)


async def line(reader: asyncio.StreamReader, timeout: float = 2.0) -> bytes:
    """The next line without its newline; b"" once the server has closed the connection."""
    return (await asyncio.wait_for(reader.readline(), timeout)).rstrip(b"\n")


async def until(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_a_session_per_connection_sees_its_whole_life_once() -> None:
    async def scenario() -> None:
        log: list[str] = []
        server = await start(log)
        reader, writer = await dial(server)
        assert await line(reader) == b"hello"
        writer.write(b"a\nb\n")
        assert [await line(reader), await line(reader)] == [b"A", b"B"]
        assert len(server.sessions) == 1
        writer.write(b"bye\n")
        assert await line(reader) == b""  # the session closed the connection
        await until(lambda: not server.sessions)
        assert log == ["made", "got a", "got b", "got bye", "lost"]
        writer.close()
        await server.stop()

    run(scenario)


def test_a_frame_that_does_not_decode_closes_only_its_connection() -> None:
    async def scenario() -> None:
        log: list[str] = []
        server = await start(log)
        bad_reader, bad_writer = await dial(server)
        good_reader, good_writer = await dial(server)
        await line(bad_reader)
        await line(good_reader)
        bad_writer.write(b"fine\n")
        assert await line(bad_reader) == b"FINE"
        bad_writer.write(b"not!fine\n")
        assert await line(bad_reader) == b""
        await until(lambda: len(server.sessions) == 1)
        good_writer.write(b"still\n")
        assert await line(good_reader) == b"STILL"
        for writer in (bad_writer, good_writer):
            writer.close()
        await server.stop()

    run(scenario)


def test_stop_closes_every_connection_and_stops_listening() -> None:
    async def scenario() -> None:
        log: list[str] = []
        server = await start(log)
        readers = [(await dial(server))[0] for _ in range(3)]
        for reader in readers:
            await line(reader)
        await server.stop()
        for reader in readers:
            assert await line(reader) == b""
        assert log.count("lost") == 3 and not server.sessions
        try:
            await dial(server)
        except OSError:
            pass
        else:
            raise AssertionError("the server still accepts connections")

    run(scenario)


def test_idle_ping_is_sent_only_after_an_interval_without_sending() -> None:
    async def scenario() -> None:
        log: list[str] = []
        server = await start(log, keepalive=lambda s: IdlePing(lambda: "ping", 0.3))
        reader, writer = await dial(server)
        assert await line(reader) == b"hello"
        # Busy: an answer goes out every 50 ms or so, so no interval passes without sending
        # (a ping would stand where an answer is expected).
        for n in range(12):
            writer.write(f"m{n}\n".encode())
            assert await line(reader) == f"M{n}".encode()
            await asyncio.sleep(0.05)
        # Quiet: a ping goes out, and the peer need not answer it.
        assert await line(reader) == b"ping"
        assert await line(reader) == b"ping"
        assert len(server.sessions) == 1
        writer.close()
        await server.stop()

    run(scenario)


def test_ping_when_quiet_pings_quiet_peers_and_drops_silent_ones() -> None:
    async def scenario() -> None:
        log: list[str] = []
        expired: list[ConnectionClosed] = []

        def policy(session: Echo) -> KeepalivePolicy[Any]:
            def on_expired(reason: ConnectionClosed) -> None:
                expired.append(reason)
                session.connection.abort(reason)
            return PingWhenQuiet(lambda: "ping", 0.1, on_expired=on_expired)

        server = await start(log, keepalive=policy)
        reader, writer = await dial(server)
        assert await line(reader) == b"hello"
        # A peer that answers every ping is kept.
        for _ in range(3):
            assert await line(reader, timeout=1.0) == b"ping"
            writer.write(b"pong\n")
            assert await line(reader) == b"PONG"
        assert not expired
        # A peer that stops answering is dropped one interval after the unanswered ping.
        assert await line(reader, timeout=1.0) == b"ping"
        assert await line(reader, timeout=1.0) == b""
        assert len(expired) == 1 and "no answer to a ping" in str(expired[0])
        await until(lambda: not server.sessions)
        writer.close()
        await server.stop()

    run(scenario)


def test_ping_when_quiet_waits_while_pings_are_not_allowed() -> None:
    async def scenario() -> None:
        log: list[str] = []
        allowed = False
        server = await start(log, keepalive=lambda s: PingWhenQuiet(
            lambda: "ping", 0.05, may_ping=lambda: allowed))
        reader, writer = await dial(server)
        assert await line(reader) == b"hello"
        await asyncio.sleep(0.3)  # six intervals of silence, pinging not allowed: kept, quiet
        assert len(server.sessions) == 1
        allowed = True
        assert await line(reader, timeout=1.0) == b"ping"
        writer.close()
        await server.stop()

    run(scenario)
