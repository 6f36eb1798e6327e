"""Generated Pulsar state machines and typed requests, over an in-memory transport."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.client import PulsarRequests
from protoframe.generated.pulsar.frames import Frame, Payload
from protoframe.generated.pulsar.machines import (
    ProtocolViolation,
    PulsarHooks,
    PulsarProtocol,
    command_of,
)
from protoframe.runtime.errors import (
    ConnectionClosed,
    DecodeError,
    RequestFailed,
    RequestTimeout,
    UnknownCommandError,
)

T = pb.BaseCommand.Type


def frame(kind: pb.BaseCommand.Type, **body: Any) -> Frame:
    return Frame(command=pb.BaseCommand(type_=kind, **body))


class Recorder(PulsarHooks):
    """Hooks that record what they get (two of them: a hook object has only those it needs)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_connected(self, body: pb.CommandConnected, frame: Frame) -> None:
        self.seen.append(f"connected {body.server_version}")

    def on_send_receipt(self, body: pb.CommandSendReceipt, frame: Frame) -> None:
        self.seen.append(f"receipt {body.producer_id}/{body.sequence_id}")


def recorded(server: bool = False) -> tuple[PulsarProtocol, list[str]]:
    """A protocol using a ``Recorder``, and what the recorder has seen."""
    hooks = Recorder()
    return PulsarProtocol(server=server, hooks=hooks), hooks.seen


def handshake(client: PulsarProtocol, server: PulsarProtocol) -> None:
    server.receive_data(client.send(frame(T.CONNECT, connect=pb.CommandConnect(
        client_version="t", protocol_version=21))))
    client.receive_data(server.send(frame(T.CONNECTED, connected=pb.CommandConnected(
        server_version="srv", protocol_version=21))))


def test_handshake_moves_both_sides_and_calls_hooks() -> None:
    (client, seen), (server, _) = recorded(), recorded(server=True)
    assert client.state("connection") == "idle"
    handshake(client, server)
    assert client.state("connection") == server.state("connection") == "connected"
    assert seen == ["connected srv"]


def test_command_before_connect_is_a_violation() -> None:
    server = PulsarProtocol(server=True)
    data = frame(T.PING, ping=pb.CommandPing()).encode()
    with pytest.raises(ProtocolViolation, match="connection: cannot send PING in state 'idle'"):
        server.receive_data(data)


def test_producer_lifecycle_and_violations() -> None:
    (client, seen), (server, _) = recorded(), recorded(server=True)
    handshake(client, server)
    server.receive_data(client.send(frame(T.PRODUCER, producer=pb.CommandProducer(
        topic="persistent://a/b/c", producer_id=0, request_id=5))))
    assert client.state("producer", 0) == "creating"
    with pytest.raises(ProtocolViolation, match="producer 0: cannot send SEND in state 'creating'"):
        client.send(frame(T.SEND, send=pb.CommandSend(producer_id=0, sequence_id=0)))
    # PRODUCER_SUCCESS carries no producer_id: it is routed by request_id to producer 0.
    client.receive_data(server.send(frame(T.PRODUCER_SUCCESS, producer_success=
                                          pb.CommandProducerSuccess(request_id=5,
                                                                    producer_name="p"))))
    assert client.state("producer", 0) == server.state("producer", 0) == "ready"
    server.receive_data(client.send(frame(T.SEND, send=pb.CommandSend(producer_id=0,
                                                                      sequence_id=0))))
    client.receive_data(server.send(frame(T.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
        producer_id=0, sequence_id=0))))
    assert seen[-1] == "receipt 0/0"
    # A receipt for a producer that was never created is refused.
    stray = frame(T.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(producer_id=9,
                                                                     sequence_id=0))
    with pytest.raises(ProtocolViolation, match="producer 9"):
        client.receive_data(stray.encode())
    # Broker-initiated close ends the producer; its id can be used again.
    client.receive_data(server.send(frame(T.CLOSE_PRODUCER, close_producer=
                                          pb.CommandCloseProducer(producer_id=0, request_id=9))))
    assert client.state("producer", 0) == "closed"


def test_error_response_is_routed_to_the_requesting_consumer() -> None:
    client, server = PulsarProtocol(), PulsarProtocol(server=True)
    handshake(client, server)
    server.receive_data(client.send(frame(T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
        topic="t", subscription="s", subType=pb.CommandSubscribe.SubType.Shared,
        consumer_id=3, request_id=1))))
    # A lookup reusing request id 1 (the C++ client does this) is a different request.
    server.receive_data(client.send(frame(T.LOOKUP, lookupTopic=pb.CommandLookupTopic(
        topic="t", request_id=1))))
    client.receive_data(server.send(frame(T.ERROR, error=pb.CommandError(
        request_id=1, error=pb.ServerError.TopicNotFound, message="no"))))
    assert client.state("consumer", 3) == "closed"  # and it reads so (the id may start over)
    assert client.state("lookup", 1) == "pending"
    client.receive_data(server.send(frame(T.LOOKUP_RESPONSE, lookupTopicResponse=
                                          pb.CommandLookupTopicResponse(
                                              request_id=1,
                                              response=pb.CommandLookupTopicResponse.LookupType
                                              .Redirect))))
    assert client.state("lookup", 1) == "redirected"


# A frame whose command does not decode: the DecodeError a read raises after the frames before it.
UNDECODABLE = b"\x00\x00\x00\x05\x00\x00\x00\x01\xff"


@pytest.mark.parametrize("keep", [False, True])
def test_the_violation_policy_passed_in_decides_what_a_refused_frame_does(keep: bool) -> None:
    refused: list[tuple[str, Frame]] = []

    def policy(error: ProtocolViolation | UnknownCommandError, received: Frame) -> bool:
        assert isinstance(error, ProtocolViolation)
        refused.append((error.command, received))
        return keep

    hooks = Recorder()
    client = PulsarProtocol(hooks=hooks, on_violation=policy)
    client.send(frame(T.CONNECT, connect=pb.CommandConnect(client_version="t")))
    stray = frame(T.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(producer_id=9,
                                                                     sequence_id=0))
    connected = frame(T.CONNECTED, connected=pb.CommandConnected(server_version="srv"))
    received = client.receive_data(stray.encode() + connected.encode())
    assert refused == [("SEND_RECEIPT", stray)]
    # A kept frame is dispatched and returned as if allowed; a dropped one is neither, and
    # the frames after it are still handled.
    assert received == ([stray, connected] if keep else [connected])
    assert hooks.seen == (["receipt 9/0", "connected srv"] if keep else ["connected srv"])
    assert client.state("connection") == "connected"
    # Frames decoded before a decode error go through the same policy.
    ping = frame(T.PING, ping=pb.CommandPing())
    with pytest.raises(DecodeError) as failed:
        client.receive_data(stray.encode() + ping.encode() + UNDECODABLE)
    assert failed.value.frames_before == ([stray, ping] if keep else [ping])
    assert [name for name, _ in refused] == ["SEND_RECEIPT", "SEND_RECEIPT"]


def test_without_a_policy_a_refused_frame_fails_the_read() -> None:
    client = PulsarProtocol(hooks=Recorder())
    client.send(frame(T.CONNECT, connect=pb.CommandConnect(client_version="t")))
    stray = frame(T.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(producer_id=9,
                                                                     sequence_id=0))
    with pytest.raises(ProtocolViolation, match="producer 9: cannot receive SEND_RECEIPT"):
        client.receive_data(stray.encode())


def test_hooks_are_declared_for_type_checkers_only() -> None:
    # A hook object has only the methods it defines; the protocol has none of its own.
    assert [n for n in dir(PulsarHooks) if n.startswith("on_")] == []
    assert [n for n in dir(PulsarProtocol) if n.startswith("on_")] == []
    assert [n for n in dir(Recorder) if n.startswith("on_")] == ["on_connected",
                                                                 "on_send_receipt"]


class Broker:
    """An in-memory peer: answers a client's frames through its own PulsarProtocol."""

    def __init__(self) -> None:
        self.proto = PulsarProtocol(server=True)
        self.requests: PulsarRequests | None = None
        self.client_proto = PulsarProtocol()
        self.hold: set[str] = set()
        self.sent: list[str] = []

    async def send_frame(self, out: Frame) -> None:
        data = self.client_proto.send(out)
        for received in self.proto.receive_data(data):
            name, body = command_of(received)
            self.sent.append(name)
            if name in self.hold:
                continue
            reply = self.answer(name, body, received)
            if reply is not None:
                for back in self.client_proto.receive_data(self.proto.send(reply)):
                    assert self.requests is not None
                    self.requests.handle_frame(back)

    def answer(self, name: str, body: object, received: Frame) -> Frame | None:
        if isinstance(body, pb.CommandConnect):
            return frame(T.CONNECTED, connected=pb.CommandConnected(server_version="mem",
                                                                    protocol_version=21))
        if isinstance(body, pb.CommandLookupTopic):
            return frame(T.LOOKUP_RESPONSE, lookupTopicResponse=pb.CommandLookupTopicResponse(
                request_id=body.request_id, brokerServiceUrl="pulsar://127.0.0.1:6650",
                response=pb.CommandLookupTopicResponse.LookupType.Connect,
                authoritative=body.authoritative))
        if isinstance(body, pb.CommandProducer):
            if body.topic == "missing":
                return frame(T.ERROR, error=pb.CommandError(
                    request_id=body.request_id, error=pb.ServerError.TopicNotFound,
                    message="missing"))
            return frame(T.PRODUCER_SUCCESS, producer_success=pb.CommandProducerSuccess(
                request_id=body.request_id, producer_name="mem-1", last_sequence_id=41))
        if isinstance(body, pb.CommandSend):
            assert received.payload is not None
            return frame(T.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
                producer_id=body.producer_id, sequence_id=body.sequence_id,
                message_id=pb.MessageIdData(ledgerId=1, entryId=len(received.payload.data))))
        return None


def test_typed_requests_over_in_memory_transport() -> None:
    async def scenario() -> None:
        broker = Broker()
        requests = PulsarRequests(broker, timeout=1.0)
        broker.requests = requests
        connected = await requests.connect("test-client", protocol_version=21)
        assert connected.server_version == "mem"
        lookup = await requests.lookup_topic("persistent://a/b/c", authoritative=True)
        assert lookup.brokerServiceUrl == "pulsar://127.0.0.1:6650" and lookup.authoritative
        produced = await requests.producer("persistent://a/b/c", producer_id=7)
        assert produced.last_sequence_id == 41
        meta = pb.MessageMetadata(producer_name="mem-1", sequence_id=42, publish_time=1)
        receipt = await requests.send(7, 42, payload=Payload(metadata=meta, data=b"hello"))
        assert receipt.message_id is not None and receipt.message_id.entryId == 5
        with pytest.raises(RequestFailed) as failed:
            await requests.producer("missing", producer_id=8)
        assert failed.value.command == "ERROR"
        assert isinstance(failed.value.body, pb.CommandError)
        assert failed.value.body.error == pb.ServerError.TopicNotFound
        # Ids are allocated per request.
        assert broker.sent.count("PRODUCER") == 2

    asyncio.run(scenario())


def test_timeout_and_connection_loss_leave_nothing_waiting() -> None:
    async def scenario() -> None:
        broker = Broker()
        requests = PulsarRequests(broker, timeout=0.05)
        broker.requests = requests
        await requests.connect("c")
        broker.hold.add("LOOKUP")
        with pytest.raises(RequestTimeout):
            await requests.lookup_topic("slow")
        assert len(requests.pending) == 0
        waiting = asyncio.ensure_future(requests.lookup_topic("slow", timeout=5))
        await asyncio.sleep(0.01)
        assert len(requests.pending) == 1
        requests.connection_lost(ConnectionClosed("gone"))
        with pytest.raises(ConnectionClosed):
            await waiting
        assert len(requests.pending) == 0
        with pytest.raises(ConnectionClosed):
            await requests.lookup_topic("after")

    asyncio.run(scenario())
