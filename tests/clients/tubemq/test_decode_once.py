"""A received TubeMQ frame's command body is decoded once, not once per layer that looks at it.

TubeMQ's commands are routed: the method's message travels serialized inside the RPC envelope,
so naming a frame's command (``command_of``) decodes that message. The machines decode it to
check the frame; the client's requests and the embedded peer's handlers must be given that
decoded command instead of decoding the frame again.

Decodes are counted by wrapping ``decode`` and ``decode_from`` of every method message (the
body classes of the spec's routes) and the decoders in the routing tables. Decodes made while a
side sends a frame (the machines check outgoing frames too) are counted apart: every frame sent
is received once by the other side, so on the receiving sides there must be exactly as many
decodes of each message as frames of it sent.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from protoframe.clients.tubemq import Consumer, EmbeddedTubeMQ, Producer, TubeMQConnection
from protoframe.generated.tubemq import broker_service as bs
from protoframe.generated.tubemq import commands, rpc
from protoframe.generated.tubemq import master_service as ms
from protoframe.generated.tubemq.client import TubemqRequests
from protoframe.generated.tubemq.frames import Frame, StreamDecoder
from protoframe.generated.tubemq.machines import (
    TubemqHooks,
    TubemqProtocol,
    command_of,
    frame_of_exception,
    frame_of_register_m2p,
)

TIMEOUT = 10.0

# The message of every routed command: what ``command_of`` decodes from a frame's payload.
BODIES: list[type[Any]] = [
    ms.RegisterRequestP2M, ms.HeartRequestP2M, ms.CloseRequestP2M,
    ms.RegisterRequestC2M, ms.HeartRequestC2M, ms.CloseRequestC2M,
    ms.RegisterResponseM2P, ms.HeartResponseM2P, ms.CloseResponseM2P,
    ms.RegisterResponseM2C, ms.HeartResponseM2C, ms.CloseResponseM2C,
    bs.SendMessageRequestP2B, bs.RegisterRequestC2B, bs.HeartBeatRequestC2B,
    bs.GetMessageRequestC2B, bs.CommitOffsetRequestC2B,
    bs.SendMessageResponseB2P, bs.RegisterResponseB2C, bs.HeartBeatResponseB2C,
    bs.GetMessageResponseB2C, bs.CommitOffsetResponseB2C,
]


class Decodes:
    """Decodes of method messages, split into those made while sending and the others."""

    def __init__(self) -> None:
        self.sending = 0  # depth of TubemqProtocol.send calls in progress
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self.inside = 0  # depth of counted decode calls in progress

    def count(self, cls: type[Any]) -> None:
        (self.sent if self.sending else self.received)[cls.__name__] += 1

    def clear(self) -> None:
        self.sent.clear()
        self.received.clear()


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Decodes]:
    seen = Decodes()

    def counted(cls: type[Any], fn: Callable[..., Any]) -> Callable[..., Any]:
        # Only the outermost call counts: the Python codec's decode calls decode_from.
        def call(*args: Any) -> Any:
            if not seen.inside:
                seen.count(cls)
            seen.inside += 1
            try:
                return fn(*args)
            finally:
                seen.inside -= 1

        return call

    # What the route tables hold: the bodies' decode as looked up at import.
    body_of = {body.decode: body for body in BODIES}
    for body in BODIES:
        for name in ("decode", "decode_from"):
            original = body.__dict__[name].__func__
            monkeypatch.setattr(body, name, classmethod(counted(body, original)))
    # The route tables took each body's decode when the module was imported.
    for table in (commands.ROUTE_0, commands.ROUTE_1):
        for value, (command, decode) in list(table.items()):
            cls = body_of.get(decode)
            if cls is not None:
                monkeypatch.setitem(table, value, (command, counted(cls, decode)))
    send = TubemqProtocol.send

    def sending(self: TubemqProtocol, frame: Frame) -> bytes:
        seen.sending += 1
        try:
            return send(self, frame)
        finally:
            seen.sending -= 1

    monkeypatch.setattr(TubemqProtocol, "send", sending)
    yield seen
    monkeypatch.undo()  # before pure_python() puts the compiled methods back


def test_loopback_client_and_peer_decode_each_received_body_once(decodes: Decodes) -> None:
    """Producer and consumer against the embedded master and broker, over TCP on 127.0.0.1."""

    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        await producer.heartbeat()
        for i in range(3):
            await producer.send(b"m%d" % i, partition=0)
        consumer = await Consumer.create(peer.master, "t", "g", heartbeat_interval=None)
        await consumer.heartbeat()
        assert len(await consumer.get_messages(0)) == 3
        assert await consumer.get_messages(0) == []  # answered with success = false
        assert await consumer.commit(0) == 3
        await consumer.close()
        await producer.close()

    async def main() -> None:
        async with EmbeddedTubeMQ(partitions=1) as peer:
            await asyncio.wait_for(scenario(peer), TIMEOUT)

    asyncio.run(main())
    # Every method was called, and each call's request and answer each crossed once.
    assert set(decodes.sent) == {b.__name__ for b in BODIES}
    # Each frame was received once: one decode per received frame, on the client and the peer.
    assert decodes.received == decodes.sent


class _MemoryTransport(asyncio.Transport):
    """A transport that keeps what is written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def test_connection_hands_the_machines_decoded_answer_to_the_request(
        decodes: Decodes) -> None:
    """The client path on its own: a ``TubeMQConnection`` over a transport in memory."""

    async def main() -> None:
        conn = TubeMQConnection("memory")
        transport = _MemoryTransport()
        conn.conn.connection_made(transport)
        register = asyncio.ensure_future(conn.requests.register_producer_to_master(
            ms.RegisterRequestP2M(clientId="p", brokerCheckSum=0, hostName="h")))
        while not transport.written:
            await asyncio.sleep(0)
        [request] = StreamDecoder().feed(bytes(transport.written))
        answer = frame_of_register_m2p(
            ms.RegisterResponseM2P(success=True, errCode=200, errMsg="OK", brokerCheckSum=9),
            serial_no=request.serial_no).encode()
        decodes.clear()
        conn.conn.data_received(answer[:7])  # nothing is decoded before a frame is whole
        assert decodes.received == Counter()
        conn.conn.data_received(answer[7:])
        assert (await register).brokerCheckSum == 9
        assert conn.protocol.state("producer", "p") == "registered"
        assert decodes.received == Counter({"RegisterResponseM2P": 1})

    asyncio.run(main())


class _Unused:
    """A transport for requests that never send."""

    async def send_frame(self, frame: Frame) -> None:
        raise AssertionError("nothing is sent here")


class _Hooked(TubemqHooks):
    def __init__(self) -> None:
        self.hooked: list[object] = []

    def on_register_m2p(self, body: ms.RegisterResponseM2P, frame: Frame) -> None:
        self.hooked.append(body)


def test_command_gives_back_what_receive_data_decoded(decodes: Decodes) -> None:
    hooks = _Hooked()
    protocol = TubemqProtocol(hooks=hooks)
    requests = TubemqRequests(_Unused())
    first = frame_of_register_m2p(
        ms.RegisterResponseM2P(success=True, errCode=200, errMsg="", brokerCheckSum=1),
        serial_no=1)
    failure = frame_of_exception(rpc.RspExceptionBody(exceptionName="E"), serial_no=2)
    received = protocol.receive_data(first.encode() + failure.encode())
    assert received == [first, failure]
    assert decodes.received == Counter({"RegisterResponseM2P": 1})
    name, body = protocol.command(received[0])
    assert name == "REGISTER_M2P"
    assert body is hooks.hooked[0]  # the very object the machines and the hook were given
    assert protocol.command(received[1])[0] == "EXCEPTION"
    assert not requests.handle_frame(received[0], protocol.command(received[0]))
    assert decodes.received == Counter({"RegisterResponseM2P": 1})
    # An equal frame that receive_data did not return is decoded afresh.
    assert protocol.command(first) == command_of(first) == (name, body)
    assert decodes.received == Counter({"RegisterResponseM2P": 3})
    # Without a decoded command, handle_frame decodes the frame itself (as it always did).
    assert not requests.handle_frame(received[0])
    assert decodes.received == Counter({"RegisterResponseM2P": 4})
    # The next read forgets the previous one's frames.
    assert protocol.receive_data(b"") == []
    protocol.command(received[0])
    assert decodes.received == Counter({"RegisterResponseM2P": 5})
