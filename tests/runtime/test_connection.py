"""runtime.io.connection and runtime.io.backoff against small asyncio peers on 127.0.0.1.

The peer speaks the generated PulsarProtocol(server=True), but nothing here is Pulsar-specific
beyond the frames it exchanges: the runtime only sees a sans-IO protocol object.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.client import PulsarRequests
from protoframe.generated.pulsar.frames import Frame, Payload, StreamDecoder
from protoframe.generated.pulsar.machines import PulsarProtocol, command_of
from protoframe.runtime.errors import ChecksumFailure, ConnectionClosed, RequestTimeout
from protoframe.runtime.io.backoff import Backoff
from protoframe.runtime.io.connection import Connection, open_connection
from protoframe.runtime.io.endpoint import Endpoint
from protoframe.runtime.io.keepalive import IdlePing, KeepalivePolicy, PingPong, PingWhenQuiet
from protoframe.runtime.io.pool import ConnectionPool
from protoframe.runtime.io.tls import make_ssl_context

T = pb.BaseCommand.Type


def frame(kind: pb.BaseCommand.Type, **body: Any) -> Frame:
    return Frame(command=pb.BaseCommand(type_=kind, **body))


class Keepalive:
    def ping(self) -> Frame:
        return frame(T.PING, ping=pb.CommandPing())

    def pong(self) -> Frame:
        return frame(T.PONG, pong=pb.CommandPong())

    def is_ping(self, f: Frame) -> bool:
        return f.command.type_ is T.PING


class Peer(asyncio.Protocol):
    """A scripted server: answers CONNECT and LOOKUP; the rest is up to the test."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.proto = PulsarProtocol(server=True)
        self.transport: asyncio.Transport | None = None
        self.received: list[str] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.peers.append(self)

    def data_received(self, data: bytes) -> None:
        if self.server.silent:
            return  # a dead peer: reads, but neither decodes nor answers
        for f in self.proto.receive_data(data):
            name, body = command_of(f)
            self.received.append(name)
            if name == "CONNECT":
                self.send(frame(T.CONNECTED, connected=pb.CommandConnected(
                    server_version="fake", protocol_version=21)))
            elif name == "PING" and self.server.answer_pings:
                self.send(frame(T.PONG, pong=pb.CommandPong()))
            elif name == "LOOKUP" and "LOOKUP" not in self.server.hold:
                answer = pb.CommandLookupTopicResponse(
                    request_id=body.request_id, brokerServiceUrl="pulsar://127.0.0.1:1",
                    response=pb.CommandLookupTopicResponse.LookupType.Connect)
                self.send(frame(T.LOOKUP_RESPONSE, lookupTopicResponse=answer))

    def send(self, f: Frame) -> None:
        assert self.transport is not None
        self.transport.write(self.proto.send(f))

    def write_raw(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)


class FakeServer:
    def __init__(self) -> None:
        self.peers: list[Peer] = []
        self.silent = False
        self.answer_pings = True
        self.hold: set[str] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> FakeServer:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: Peer(self), "127.0.0.1", 0,
                                               ssl=ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for peer in self.peers:
            if peer.transport is not None:
                peer.transport.abort()
        await self.server.wait_closed()


def run(coro_fn: Callable[[], Any], timeout: float = 20) -> None:
    async def main() -> None:
        await asyncio.wait_for(coro_fn(), timeout)
    asyncio.run(main())


async def connect(server: FakeServer, on_frame: Callable[[Frame], None] | None = None,
                  **options: Any) -> tuple[Connection[Frame], PulsarRequests]:
    conn: Connection[Frame] = await open_connection(
        "127.0.0.1", server.port, PulsarProtocol(), on_frame, **options)
    requests = PulsarRequests(conn, timeout=2.0)
    conn.on_close(requests.connection_lost)
    if on_frame is None:
        conn.on_frame = lambda f: None if requests.handle_frame(f) else None
    await requests.connect("test", protocol_version=21)
    return conn, requests


# ---- Backoff ---------------------------------------------------------------------------------


def test_backoff_doubles_up_to_the_cap_with_jitter_and_resets() -> None:
    b = Backoff(0.1, 1.0, jitter=0.0)
    assert [round(b.next(), 3) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    b.reset()
    assert b.next() == pytest.approx(0.1)
    jittered = Backoff(1.0, 10.0, jitter=0.5, rand=lambda: 1.0)
    assert jittered.next() == pytest.approx(0.5)  # at most half taken off
    assert jittered.next() == pytest.approx(1.0)
    real = Backoff(1.0, 10.0, jitter=0.2)
    delays = [real.next() for _ in range(3)]
    assert 0.8 <= delays[0] <= 1.0 and 1.6 <= delays[1] <= 2.0 and 3.2 <= delays[2] <= 4.0
    with pytest.raises(ValueError):
        Backoff(0, 1)
    limited = Backoff(1.0, 1.0, jitter=0.0, deadline=2.5)
    limited.next()
    limited.next()
    assert not limited.expired
    limited.next()
    assert limited.expired


# ---- requests and closing ---------------------------------------------------------------------


def test_requests_correlate_and_every_pending_request_fails_on_disconnect() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        conn, requests = await connect(server)
        answer = await requests.lookup_topic("persistent://a/b/c")
        assert answer.brokerServiceUrl == "pulsar://127.0.0.1:1"
        server.hold.add("LOOKUP")
        waiting = [asyncio.ensure_future(requests.lookup_topic("t", timeout=10)) for _ in range(3)]
        # An Endpoint's requests too: it ties them to its connection's end by itself.
        endpoint = Endpoint(PulsarProtocol(), lambda c: PulsarRequests(c, timeout=2.0))
        await endpoint.connect("127.0.0.1", server.port)
        await endpoint.requests.connect("test", protocol_version=21)
        own = asyncio.ensure_future(endpoint.requests.lookup_topic("t", timeout=10))
        await asyncio.sleep(0.05)
        assert len(requests.pending) == 3 and len(endpoint.requests.pending) == 1
        await server.stop()  # the peer goes away
        for task in [*waiting, own]:
            with pytest.raises(ConnectionClosed):
                await task
        assert len(requests.pending) == 0 and len(endpoint.requests.pending) == 0
        assert not endpoint.is_open
        assert conn.closed is not None and not conn.is_open
        with pytest.raises(ConnectionClosed):
            await conn.send_frame(frame(T.PING, ping=pb.CommandPing()))
        with pytest.raises(ConnectionClosed):
            await requests.lookup_topic("after")

    run(scenario)


def test_local_close_fails_pending_and_calls_close_listeners_once() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        conn, requests = await connect(server)
        server.hold.add("LOOKUP")
        seen: list[ConnectionClosed] = []
        conn.on_close(seen.append)
        task = asyncio.ensure_future(requests.lookup_topic("t", timeout=10))
        await asyncio.sleep(0.02)
        conn.close()
        with pytest.raises(ConnectionClosed):
            await task
        await conn.wait_closed()
        assert len(seen) == 1
        late: list[ConnectionClosed] = []
        conn.on_close(late.append)  # registered after the end: called at once
        assert late == seen
        await server.stop()

    run(scenario)


def test_request_timeout_forgets_the_request() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        conn, requests = await connect(server)
        server.hold.add("LOOKUP")
        with pytest.raises(RequestTimeout):
            await requests.lookup_topic("t", timeout=0.05)
        assert len(requests.pending) == 0 and conn.is_open
        conn.close()
        await server.stop()

    run(scenario)


def test_connect_failure_raises_connection_closed() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        port = server.port
        await server.stop()
        with pytest.raises(ConnectionClosed, match="could not connect"):
            await open_connection("127.0.0.1", port, PulsarProtocol(), connect_timeout=2)

    run(scenario)


# ---- keepalive --------------------------------------------------------------------------------


def test_ping_from_the_peer_is_answered_at_once() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        conn, _ = await connect(server, keepalive=Keepalive(), keepalive_interval=30)
        peer = server.peers[0]
        peer.send(frame(T.PING, ping=pb.CommandPing()))
        for _ in range(100):
            if "PONG" in peer.received:
                break
            await asyncio.sleep(0.01)
        assert "PONG" in peer.received
        conn.close()
        await server.stop()

    run(scenario)


def test_keepalive_pings_and_closes_a_silent_connection() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        conn, requests = await connect(server, keepalive=Keepalive(), keepalive_interval=0.1)
        # A peer that answers pings keeps the connection alive well past 2x the interval.
        await asyncio.sleep(0.45)
        assert conn.is_open
        assert server.peers[0].received.count("PING") >= 2
        # A peer that stops answering is dropped once nothing arrived for 2x the interval.
        server.silent = True
        server.hold.add("LOOKUP")
        task = asyncio.ensure_future(requests.lookup_topic("t", timeout=30))
        loop = asyncio.get_running_loop()
        start = loop.time()
        await conn.wait_closed()
        elapsed = loop.time() - start
        assert 0.1 <= elapsed <= 3.0, elapsed  # about 0.2-0.3 s; generous for loaded hosts
        assert conn.closed is not None and "nothing received" in str(conn.closed)
        with pytest.raises(ConnectionClosed):
            await task
        await server.stop()

    run(scenario)


class TakesPongs(KeepalivePolicy[Frame]):
    """A policy of a test's own: overrides ``received`` and leaves ``may_take`` as it is."""

    def __init__(self) -> None:
        super().__init__(30.0)
        self.seen: list[str] = []

    def received(self, frame: Frame) -> bool:
        self.seen.append(command_of(frame)[0])
        return frame.command.type_ is T.PONG

    def tick(self, connection: Any, now: float) -> None:
        pass


def test_only_the_frames_a_policy_may_take_reach_it() -> None:
    # Ping-answering policies are asked about pings only, policies that take nothing are not
    # asked at all: the per-frame cost on a busy connection (python -m bench client).
    may_take = PingPong(Keepalive(), 30).may_take
    assert may_take is not None
    assert may_take(frame(T.PING, ping=pb.CommandPing()))
    assert not may_take(frame(T.PONG, pong=pb.CommandPong()))
    assert PingWhenQuiet(Keepalive().ping, 30).may_take is None
    assert IdlePing(Keepalive().ping, 30).may_take is None

    async def scenario() -> None:
        server = await FakeServer().start()
        policy = TakesPongs()
        got: list[str] = []
        conn: Connection[Frame] = await open_connection(
            "127.0.0.1", server.port, RawProtocol(), lambda f: got.append(command_of(f)[0]),
            keepalive=policy)
        for _ in range(100):
            if server.peers:
                break
            await asyncio.sleep(0.01)
        server.peers[0].write_raw(frame(T.PONG, pong=pb.CommandPong()).encode()
                                  + message_frame(1, b"one"))
        for _ in range(100):
            if got:
                break
            await asyncio.sleep(0.01)
        # A policy overriding ``received`` sees every frame; the one it takes goes no further.
        assert policy.seen == ["PONG", "MESSAGE"] and got == ["MESSAGE"]
        conn.close()
        await server.stop()

    run(scenario)


# ---- decoding problems ------------------------------------------------------------------------


class RawProtocol:
    """The smallest sans-IO protocol: frames without state machines."""

    def __init__(self) -> None:
        self.decoder = StreamDecoder()

    def receive_data(self, data: bytes) -> list[Frame]:
        return self.decoder.feed(data)

    def send(self, f: Frame) -> bytes:
        return f.encode()

    def command(self, f: Frame) -> tuple[str, Any]:
        return command_of(f)


def message_frame(entry: int, data: bytes) -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1)
    return Frame(command=pb.BaseCommand(type_=T.MESSAGE, message=pb.CommandMessage(
        consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=entry))),
        payload=Payload(metadata=meta, data=data)).encode()


def test_checksum_failure_goes_to_the_corrupt_handler_and_decoding_continues() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        got: list[int] = []
        corrupt: list[tuple[int, ChecksumFailure]] = []

        def on_frame(f: Frame) -> None:
            if f.command.message is not None:
                got.append(f.command.message.message_id.entryId)

        def on_corrupt(f: Frame, exc: ChecksumFailure) -> None:
            # The frame as far as it could be trusted: its command (the payload is withheld).
            assert f.command.message is not None
            corrupt.append((f.command.message.message_id.entryId, exc))

        conn: Connection[Frame] = await open_connection(
            "127.0.0.1", server.port, RawProtocol(), on_frame, on_corrupt_frame=on_corrupt)
        for _ in range(100):
            if server.peers:
                break
            await asyncio.sleep(0.01)
        peer = server.peers[0]
        # Good, corrupt (last data byte flipped), good in one write; then one more.
        bad = bytearray(message_frame(2, b"two"))
        bad[-1] ^= 0xFF
        peer.write_raw(message_frame(1, b"one") + bytes(bad) + message_frame(3, b"three"))
        peer.write_raw(message_frame(4, b"four"))
        for _ in range(100):
            if len(got) == 3:
                break
            await asyncio.sleep(0.01)
        assert got == [1, 3, 4]
        assert [c[0] for c in corrupt] == [2]
        assert conn.is_open
        conn.close()
        await server.stop()

    run(scenario)


def test_garbage_closes_the_connection() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        conn, requests = await connect(server)
        server.hold.add("LOOKUP")
        task = asyncio.ensure_future(requests.lookup_topic("t", timeout=30))
        await asyncio.sleep(0.02)
        server.peers[0].write_raw(b"\x00\x00\x00\x05\x00\x00\x00\x01\xff")
        with pytest.raises(ConnectionClosed):
            await task
        assert conn.closed is not None
        await server.stop()

    run(scenario)


def test_endpoint_offers_frames_to_its_route_first_and_corrupt_ones_to_its_hook() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        seen: list[str] = []
        taken: list[int] = []
        corrupt: list[int] = []
        listened: list[str] = []
        take = {"MESSAGE"}

        def route(f: Frame) -> None:
            name = command_of(f)[0]
            seen.append(name)
            if name not in take:
                endpoint.dispatch(f)
            elif f.command.message is not None:
                taken.append(f.command.message.message_id.entryId)

        def on_corrupt(f: Frame, exc: ChecksumFailure) -> None:
            assert f.command.message is not None
            corrupt.append(f.command.message.message_id.entryId)

        endpoint = Endpoint(RawProtocol(), lambda c: PulsarRequests(c, timeout=2.0),
                            route=route, on_corrupt_frame=on_corrupt)
        endpoint.add_listener(lambda f: listened.append(command_of(f)[0]))
        await endpoint.connect("127.0.0.1", server.port)
        # An answer the route hands on goes to its request, not to the listeners.
        await endpoint.requests.connect("test", protocol_version=21)
        assert seen == ["CONNECTED"] and listened == []
        peer = server.peers[0]
        bad = bytearray(message_frame(2, b"two"))
        bad[-1] ^= 0xFF
        peer.write_raw(message_frame(1, b"one") + bytes(bad) + message_frame(3, b"three")
                       + frame(T.PONG, pong=pb.CommandPong()).encode())
        for _ in range(100):
            if listened:
                break
            await asyncio.sleep(0.01)
        assert taken == [1, 3] and corrupt == [2]
        assert listened == ["PONG"]  # neither taken nor an answer
        # The route runs before the requests: an answer it keeps never reaches its request.
        take.add("LOOKUP_RESPONSE")
        with pytest.raises(RequestTimeout):
            await endpoint.requests.lookup_topic("t", timeout=0.3)
        assert seen[-1] == "LOOKUP_RESPONSE" and endpoint.is_open
        endpoint.close()
        await endpoint.wait_closed()
        await server.stop()

    run(scenario)


# ---- writing and backpressure -----------------------------------------------------------------


def test_writes_wait_while_the_buffer_is_over_the_high_water_mark() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        conn: Connection[Frame] = await open_connection(
            "127.0.0.1", server.port, RawProtocol(), high_water=64 * 1024, low_water=16 * 1024)
        for _ in range(100):
            if server.peers:
                break
            await asyncio.sleep(0.01)
        peer = server.peers[0]
        assert peer.transport is not None
        peer.transport.pause_reading()  # the peer stops reading: our buffer fills
        server.silent = True
        big = Frame.decode(message_frame(1, bytes(256 * 1024)))
        writes = 0
        while conn.writable and writes < 2000:
            conn.write(big)
            writes += 1
        assert not conn.writable, "the transport never reported a full buffer"
        resumed: list[bool] = []
        conn.on_writable(lambda: resumed.append(True))
        drained = asyncio.ensure_future(conn.drain())
        await asyncio.sleep(0.05)
        assert not drained.done()
        peer.transport.resume_reading()
        await asyncio.wait_for(drained, 10)
        assert conn.writable and resumed
        conn.close()
        await server.stop()

    run(scenario)


# ---- pool -------------------------------------------------------------------------------------


def test_pool_shares_one_connection_per_address_and_replaces_closed_ones() -> None:
    async def scenario() -> None:
        server = await FakeServer().start()
        made: list[Connection[Frame]] = []

        async def make(key: tuple[str, int]) -> Connection[Frame]:
            conn, _ = await connect(server)
            made.append(conn)
            return conn

        pool: ConnectionPool[tuple[str, int], Connection[Frame]] = ConnectionPool(make)
        key = ("127.0.0.1", server.port)
        got = await asyncio.gather(*(pool.get(key) for _ in range(10)))
        assert len(made) == 1 and all(c is made[0] for c in got)
        assert len(pool) == 1 and pool.peek(key) is made[0]
        made[0].close()
        await made[0].wait_closed()
        again = await pool.get(key)
        assert again is not made[0] and len(made) == 2
        pool.close()
        await again.wait_closed()
        with pytest.raises(ConnectionClosed):
            await pool.get(key)
        await server.stop()

    run(scenario)


# ---- TLS --------------------------------------------------------------------------------------


def test_tls_with_a_ca_file(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate

    async def scenario() -> None:
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_context.load_cert_chain(str(cert), str(key))
        server = await FakeServer().start(server_context)
        conn: Connection[Frame] = await open_connection(
            "127.0.0.1", server.port, PulsarProtocol(),
            ssl_context=make_ssl_context(str(cert)), connect_timeout=5)
        requests = PulsarRequests(conn, timeout=2.0)
        conn.on_frame = lambda f: None if requests.handle_frame(f) else None
        connected = await requests.connect("tls-test", protocol_version=21)
        assert connected.server_version == "fake"
        assert conn.transport is not None
        assert conn.transport.get_extra_info("ssl_object") is not None
        conn.close()
        # Without the CA the handshake fails; with verification off it works.
        with pytest.raises(ConnectionClosed):
            await open_connection("127.0.0.1", server.port, PulsarProtocol(),
                                  ssl_context=make_ssl_context(), connect_timeout=5)
        insecure = await open_connection("127.0.0.1", server.port, PulsarProtocol(),
                                         ssl_context=make_ssl_context(verify=False),
                                         connect_timeout=5)
        insecure.close()
        await server.stop()

    run(scenario)
