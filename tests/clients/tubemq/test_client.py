"""The typed TubeMQ client against the embedded master and broker, over real TCP on 127.0.0.1.

Every scenario runs under ``asyncio.wait_for``; raw sockets read with timeouts.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest

from protoframe.clients.tubemq import (
    Consumer,
    EmbeddedTubeMQ,
    MasterStandby,
    Producer,
    RpcException,
    ServerError,
    TubeMQConnection,
)
from protoframe.clients.tubemq.peer import UNSUPPORTED_EXCEPTION
from protoframe.generated.tubemq import broker_service as bs
from protoframe.generated.tubemq import master_service as ms
from protoframe.generated.tubemq.frames import Frame, RpcContent, RpcRequest, StreamDecoder
from protoframe.generated.tubemq.machines import command_of, frame_of_heartbeat_p2m
from protoframe.generated.tubemq.rpc import (
    RequestBody,
    RequestHeader,
    RpcConnHeader,
    RspExceptionBody,
)
from protoframe.runtime.errors import ConnectionClosed

Scenario = Callable[[EmbeddedTubeMQ], Awaitable[None]]
TIMEOUT = 10.0


def run(scenario: Scenario, partitions: int = 2) -> None:
    async def main() -> None:
        async with EmbeddedTubeMQ(partitions=partitions) as peer:
            await asyncio.wait_for(scenario(peer), TIMEOUT)

    asyncio.run(main())


async def raw_exchange(address: str, data: bytes) -> tuple[list[Frame], bool]:
    """Send bytes on a fresh socket; the frames that come back and whether the peer closed."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), TIMEOUT)
    writer.write(data)
    decoder = StreamDecoder()
    frames: list[Frame] = []
    closed = False
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), 0.5)
            except TimeoutError:
                break
            if not chunk:
                closed = True
                break
            frames += decoder.feed(chunk)
    finally:
        writer.close()
    return frames, closed


def test_producer_register_heartbeat_send_close() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "orders", client_id="p1",
                                         heartbeat_interval=None)
        assert peer.state.producers == {"p1": ["orders"]}
        assert producer.master.protocol.state("producer", "p1") == "registered"
        assert [(i.topic, i.partitions) for i in producer.partitions] == [("orders", 2)]
        await producer.heartbeat()
        assert producer.master.protocol.state("producer", "p1") == "registered"
        results = [await producer.send(b"m%d" % i) for i in range(4)]
        assert [r.partition for r in results] == [0, 1, 0, 1]
        assert [r.offset for r in results] == [0, 0, 1, 1]
        assert len({r.message_id for r in results}) == 4
        assert [m.data for m in peer.messages("orders", 0)] == [b"m0", b"m2"]
        pinned = await producer.send(b"pinned", partition=1)
        assert (pinned.partition, pinned.offset) == (1, 2)
        await producer.close()
        assert peer.state.producers == {}
        # The machine forgets a closed producer: it is back to its initial state.
        assert producer.master.protocol.state("producer", "p1") == "closed"

    run(scenario)


def test_consumer_gets_what_was_sent_and_commits() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        sent = {b"x%d" % i for i in range(10)}
        for data in sorted(sent):
            await producer.send(data)
        consumer = await Consumer.create(peer.master, "t", "g1", client_id="c1",
                                         heartbeat_interval=None)
        assert sorted(consumer.partitions) == [0, 1]
        broker = consumer.partitions[0].conn
        assert broker.protocol.state("partition", 0) == "consuming"
        await consumer.heartbeat()
        got = []
        for partition in (0, 1):
            got += await consumer.get_messages(partition)
            assert await consumer.commit(partition) == 5
        assert {m.data for m in got} == sent
        assert await consumer.get_messages(0) == []
        await producer.send(b"late", partition=0)
        assert [m.data for m in await consumer.get_messages(0)] == [b"late"]
        await consumer.close()  # "late" was fetched but not committed
        assert peer.state.consumers == {}
        again = await Consumer.create(peer.master, "t", "g1", heartbeat_interval=None)
        assert [m.data for m in await again.get_messages(0)] == [b"late"]
        other = await Consumer.create(peer.master, "t", "g2", heartbeat_interval=None)
        assert len(await other.get_messages(0)) == 6  # each group has its own offsets
        for c in (again, other):
            await c.close()
        await producer.close()

    run(scenario)


def test_background_heartbeats() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        beats: list[str] = []
        original = peer.handlers["HEARTBEAT_P2M"]

        def counting(body: ms.HeartRequestP2M) -> ms.HeartResponseM2P:
            beats.append(body.clientId)
            return original(body)  # type: ignore[no-any-return]

        peer.handlers["HEARTBEAT_P2M"] = counting
        producer = await Producer.create(peer.master, "t", client_id="hb",
                                         heartbeat_interval=0.05)
        while len(beats) < 3:
            await asyncio.sleep(0.02)
        await producer.close()

    run(scenario)


def test_exception_answer_becomes_a_typed_error() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        peer.standby = True
        with pytest.raises(MasterStandby) as info:
            await Producer.create(peer.master, "t")
        assert info.value.exception_name.endswith("StandbyException")
        assert info.value.message == "this master is a standby"
        assert info.value.method == "REGISTER_P2M"
        assert isinstance(info.value, RpcException)
        peer.standby = False
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        await producer.close()

    run(scenario)


def test_success_false_becomes_server_error() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        broker = await TubeMQConnection.open(f"{peer.host}:{peer.broker_port}")
        request = bs.SendMessageRequestP2B(clientId="c", topicName="t", partitionId=7,
                                           data=b"x", flag=0, checkSum=-1, sentAddr=0)
        with pytest.raises(ServerError) as info:
            await broker.checked("SEND_MESSAGE_P2B",
                                 broker.requests.send_message_to_broker(request))
        assert info.value.err_code == 400
        assert "no partition 7" in info.value.err_msg
        broker.close()

    run(scenario)


def test_unsupported_method_is_answered_with_an_exception() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        # Method 11 (a producer registering with a broker) is not served upstream either.
        frame = Frame(serial_no=77, content=RpcContent(
            conn_header=RpcConnHeader(flag=0),
            request=RpcRequest(header=RequestHeader(serviceType=3, protocolVer=3),
                               body=RequestBody(method=11, request=b""))))
        frames, closed = await raw_exchange(f"{peer.host}:{peer.broker_port}", frame.encode())
        assert not closed
        [answer] = frames
        assert answer.serial_no == 77
        name, body = command_of(answer)
        assert name == "EXCEPTION"
        assert isinstance(body, RspExceptionBody)
        assert body.exceptionName == UNSUPPORTED_EXCEPTION

    run(scenario)


@pytest.mark.parametrize("garbage", [
    b"\x00" * 16,  # bad token
    # One block holding an RpcConnHeader of a request (flag 0) and nothing after it.
    struct.pack(">IIII", 0xFF7FF4FE, 1, 1, 3) + b"\x02\x08\x00",
    struct.pack(">III", 0xFF7FF4FE, 1, 5000),  # more blocks than any frame may have
], ids=["bad-token", "bad-content", "too-many-blocks"])
def test_bad_frame_closes_only_that_connection(garbage: bytes) -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        for address in (peer.master, f"{peer.host}:{peer.broker_port}"):
            frames, closed = await raw_exchange(address, garbage)
            assert closed and frames == []
        await producer.heartbeat()  # the producer's own connections are untouched
        assert (await producer.send(b"still here")).offset == 0
        await producer.close()

    run(scenario)


def test_protocol_violation_closes_only_that_connection() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        # A heartbeat from a producer that never registered: the machines refuse it.
        frame = frame_of_heartbeat_p2m(ms.HeartRequestP2M(clientId="ghost", brokerCheckSum=0,
                                                          hostName="h"), serial_no=1)
        frames, closed = await raw_exchange(peer.master, frame.encode())
        assert closed and frames == []
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        await producer.close()

    run(scenario)


def test_client_refuses_to_send_what_the_machines_forbid() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        conn = await TubeMQConnection.open(peer.master)
        with pytest.raises(Exception, match="cannot send HEARTBEAT_P2M in state 'idle'"):
            await conn.requests.producer_heartbeat_to_master(
                ms.HeartRequestP2M(clientId="x", brokerCheckSum=0, hostName="h"))
        conn.close()

    run(scenario)


def test_requests_fail_when_the_connection_goes() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        conn = await TubeMQConnection.open(peer.master)

        def drop(body: ms.RegisterRequestP2M) -> ms.RegisterResponseM2P:
            for session in list(peer.sessions):
                session.connection.abort()
            raise RuntimeError("the connection is gone")

        peer.handlers["REGISTER_P2M"] = drop
        with pytest.raises(ConnectionClosed):
            await conn.requests.register_producer_to_master(
                ms.RegisterRequestP2M(clientId="c", brokerCheckSum=0, hostName="h"))

    run(scenario)
