"""Output backpressure in the embedded broker (issue 18, failure 5), in process: a consumer
that grants 10^9 permits and does not read gets no more than about one high-water mark of
messages queued in its connection's transport; reading again resumes delivery where it
stopped, nothing lost or repeated; on a Shared subscription the others get what it cannot take.

Before the fix the broker wrote the whole backlog into the transport of a consumer that does
not read (the buffer assertion fails with the backlog's size).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.session import Session
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandConnect,
    CommandFlow,
    CommandProducer,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
)
from protoframe.runtime.io.connection import DEFAULT_HIGH_WATER

Type = BaseCommand.Type
SubType = CommandSubscribe.SubType
MESSAGES = 1500
SIZE = 10_000  # 15 MB of backlog: more than the high-water mark and the kernel buffers (4 MB)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        await asyncio.wait_for(scenario(), 60)
    asyncio.run(main())


class Raw:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = frames.StreamDecoder(8 << 20)
        self.pending: list[frames.Frame] = []

    @classmethod
    async def connect(cls, port: int) -> Raw:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)  # fills up soon
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        # A small read limit: the stream stops reading the socket once it holds 64 KiB.
        reader, writer = await asyncio.open_connection(sock=sock, limit=32 << 10)
        raw = cls(reader, writer)
        await raw.send(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
            client_version="backpressure-test", protocol_version=20)))
        await raw.expect(Type.CONNECTED)
        return raw

    async def send(self, command: BaseCommand, payload: frames.Payload | None = None) -> None:
        self.writer.write(frames.Frame(command=command, payload=payload).encode())
        await self.writer.drain()

    async def expect(self, kind: BaseCommand.Type) -> frames.Frame:
        while not self.pending:
            data = await asyncio.wait_for(self.reader.read(65536), 10)
            assert data, "closed by the broker"
            self.pending.extend(self.decoder.feed(data))
        frame = self.pending.pop(0)
        assert frame.command.type_ == kind, f"expected {kind.name}, got {frame.command!r}"
        return frame

    async def subscribe(self, subscription: str, sub_type: SubType) -> None:
        await self.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
            topic="backlog", subscription=subscription, subType=sub_type, consumer_id=1,
            request_id=1, initialPosition=CommandSubscribe.InitialPosition.Earliest)))
        await self.expect(Type.SUCCESS)
        await self.send(BaseCommand(type_=Type.FLOW, flow=CommandFlow(
            consumer_id=1, messagePermits=10**9)))

    async def entry_ids(self, count: int) -> list[int]:
        ids = []
        for _ in range(count):
            message = (await self.expect(Type.MESSAGE)).command.message
            assert message is not None
            ids.append(message.message_id.entryId)
        return ids


async def produce(port: int) -> None:
    raw = await Raw.connect(port)
    await raw.send(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
        topic="backlog", producer_id=1, request_id=1, producer_name="backlog")))
    await raw.expect(Type.PRODUCER_SUCCESS)
    for sequence_id in range(MESSAGES):
        await raw.send(BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=1, sequence_id=sequence_id, num_messages=1)), frames.Payload(
            metadata=MessageMetadata(producer_name="backlog", sequence_id=sequence_id,
                                     publish_time=int(time.time() * 1000)),
            data=bytes([sequence_id % 256]) * SIZE))
    for _ in range(MESSAGES):
        await raw.expect(Type.SEND_RECEIPT)
    raw.writer.close()


def queued(session: Session) -> int:
    """What the broker holds for one connection: its transport's buffer and what is queued
    for the transport."""
    return session.transport.get_write_buffer_size() + session.connection._out_size


async def settle(broker: EmbeddedBroker) -> None:
    """Wait until no connection's output changes any more (dispatch has stopped)."""
    last: list[int] = []
    while True:
        await asyncio.sleep(0.3)
        now = sorted(queued(s) for s in broker.sessions)
        if now == last:
            return
        last = now


def broker_test(scenario: Callable[[EmbeddedBroker, int], Awaitable[None]]) -> None:
    """Run ``scenario(broker, port)`` against a fresh in-memory broker holding the backlog."""
    async def main() -> None:
        broker = EmbeddedBroker(port=0)
        url = await broker.start()
        try:
            port = int(url.rsplit(":", 1)[1])
            await produce(port)
            await scenario(broker, port)
        finally:
            await broker.stop()
    run(main)


def test_a_consumer_that_does_not_read_is_paused_and_resumes_where_it_stopped() -> None:
    async def scenario(broker: EmbeddedBroker, port: int) -> None:
        stuck = await Raw.connect(port)
        await stuck.subscribe("stuck", SubType.Exclusive)
        await settle(broker)
        held = max(queued(s) for s in broker.sessions)
        assert held < DEFAULT_HIGH_WATER + (512 << 10), f"{held} bytes queued"
        # Reading again: everything, in order, once.
        assert await stuck.entry_ids(MESSAGES) == list(range(MESSAGES))

    broker_test(scenario)


def test_on_a_shared_subscription_the_reading_consumer_gets_what_a_stuck_one_cannot_take(
        ) -> None:
    async def scenario(broker: EmbeddedBroker, port: int) -> None:
        stuck = await Raw.connect(port)
        await stuck.subscribe("shared", SubType.Shared)
        await settle(broker)
        [stuck_session] = [s for s in broker.sessions if s.consumers]
        stuck_holds = len(stuck_session.consumers[1].pending)
        assert queued(stuck_session) < DEFAULT_HIGH_WATER + (512 << 10)
        assert stuck_holds < MESSAGES // 2
        # The stuck consumer keeps what went out before it was paused; the rest is the
        # reader's, all of it (round-robin would have given the stuck one every other one).
        reader = await Raw.connect(port)
        await reader.subscribe("shared", SubType.Shared)
        got = await reader.entry_ids(MESSAGES - stuck_holds)
        assert len(set(got)) == len(got) == MESSAGES - stuck_holds
        taken = await stuck.entry_ids(stuck_holds)
        assert sorted(got + taken) == list(range(MESSAGES))

    broker_test(scenario)
