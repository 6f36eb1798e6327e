"""Protocol discipline: nothing but CONNECT before CONNECTED, and every request is answered.

Regression tests for issue 18, failure 8: PRODUCER then SEND without CONNECT stored the
message, SUBSCRIBE and FLOW without CONNECT delivered, and NEW_TXN, END_TXN,
TC_CLIENT_CONNECT_REQUEST, WATCH_TOPIC_LIST and AUTH_RESPONSE got no answer at all.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.commands import COMMANDS, INTERACTIONS
from protoframe.generated.pulsar.machines import command_of
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandFlow,
    CommandPing,
    CommandProducer,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
    ServerError,
)
from tests.support.pulsar_frames import body_fields, minimal
from tests.support.pulsar_raw import RawClient, run

Type = BaseCommand.Type
SubType = CommandSubscribe.SubType


# --- nothing but CONNECT first ---------------------------------------------------------------


@run
async def test_producer_and_send_without_connect_are_refused_and_store_nothing() -> None:
    broker = EmbeddedBroker(port=0)
    async with broker as url:
        rogue = await RawClient.connect(url, handshake=False)
        # Both in one write, as an attacker would send them.
        await rogue.send_bytes(
            frames.Frame(command=BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
                topic="no-handshake", producer_id=1, request_id=4))).encode()
            + frames.Frame(command=BaseCommand(type_=Type.SEND, send=CommandSend(
                producer_id=1, sequence_id=0)), payload=frames.Payload(
                    metadata=MessageMetadata(producer_name="p", sequence_id=0, publish_time=1),
                    data=b"smuggled")).encode())
        error = (await rogue.expect(Type.ERROR)).command.error
        assert error is not None and error.request_id == 4
        assert error.error == ServerError.NotAllowedError
        assert "PRODUCER before CONNECT" in error.message
        assert await rogue.closed_by_broker()
        assert broker.state.topics == {}  # not even the topic
        client = await RawClient.connect(url)
        await client.subscribe("no-handshake", "sub", permits=10)
        await client.nothing()
        await client.close()


@run
async def test_subscribe_and_flow_without_connect_deliver_nothing() -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        await client.producer("guarded")
        await client.publish(1, 0, b"secret")
        await client.receipt()
        rogue = await RawClient.connect(url, handshake=False)
        await rogue.send_bytes(
            frames.Frame(command=BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
                topic="guarded", subscription="s", subType=SubType.Exclusive, consumer_id=1,
                request_id=1, initialPosition=CommandSubscribe.InitialPosition.Earliest))
                         ).encode()
            + frames.Frame(command=BaseCommand(type_=Type.FLOW, flow=CommandFlow(
                consumer_id=1, messagePermits=100))).encode())
        frame = await rogue.recv()
        assert frame.command.type_ == Type.ERROR
        assert await rogue.closed_by_broker()
        await client.close()


@pytest.mark.parametrize("kind", [Type.PING, Type.LOOKUP, Type.NEW_TXN, Type.AUTH_RESPONSE],
                         ids=lambda kind: kind.name)
@run
async def test_anything_before_connect_is_an_error_and_a_close(kind: BaseCommand.Type) -> None:
    attr, cls = body_fields()[kind]
    async with EmbeddedBroker(port=0) as url:
        rogue = await RawClient.connect(url, handshake=False)
        await rogue.send(BaseCommand(type_=kind, **{attr: minimal(cls)}))
        error = (await rogue.expect(Type.ERROR)).command.error
        assert error is not None and f"{kind.name} before CONNECT" in error.message
        assert await rogue.closed_by_broker()
        # CONNECT still works on a new connection.
        client = await RawClient.connect(url)
        await client.send(BaseCommand(type_=Type.PING, ping=CommandPing()))
        await client.expect(Type.PONG)
        await client.close()


# --- every request is answered ---------------------------------------------------------------

# What answers the requests the broker does not serve (an error, in these answers' error fields
# where they have them): what the clients waiting for them complete on.
UNSUPPORTED: dict[str, str] = {
    "NEW_TXN": "NEW_TXN_RESPONSE",
    "ADD_PARTITION_TO_TXN": "ADD_PARTITION_TO_TXN_RESPONSE",
    "ADD_SUBSCRIPTION_TO_TXN": "ADD_SUBSCRIPTION_TO_TXN_RESPONSE",
    "END_TXN": "END_TXN_RESPONSE",
    "END_TXN_ON_PARTITION": "END_TXN_ON_PARTITION_RESPONSE",
    "END_TXN_ON_SUBSCRIPTION": "END_TXN_ON_SUBSCRIPTION_RESPONSE",
    "TC_CLIENT_CONNECT_REQUEST": "TC_CLIENT_CONNECT_RESPONSE",
    "SCALABLE_TOPIC_LOOKUP": "SCALABLE_TOPIC_UPDATE",
    "SCALABLE_TOPIC_SUBSCRIBE": "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE",
    "WATCH_SCALABLE_TOPICS": "WATCH_SCALABLE_TOPICS_UPDATE",
    "WATCH_TC_ASSIGNMENTS": "WATCH_TC_ASSIGNMENTS_UPDATE",
    "AUTH_RESPONSE": "ERROR",
}
# Requests the spec leaves out of INTERACTIONS (one-way there, or missing) that are answered.
EXTRA: dict[str, frozenset[str]] = {
    "ACK": frozenset({"ACK_RESPONSE"}),  # with a request_id, an ack wants its receipt
    "GET_OR_CREATE_SCHEMA": frozenset({"GET_OR_CREATE_SCHEMA_RESPONSE"}),
    # Served since the broker watches topic lists (broker/topic_watchers.py).
    "WATCH_TOPIC_LIST": frozenset({"WATCH_TOPIC_LIST_SUCCESS"}),
    "WATCH_TOPIC_LIST_CLOSE": frozenset({"SUCCESS"}),
}
ANSWERS: dict[str, frozenset[str]] = {
    **{i.request: i.answers for i in INTERACTIONS if i.request != "CONNECT"},
    **EXTRA,
    **{request: frozenset({answer}) for request, answer in UNSUPPORTED.items()},
}
# What the broker pushes on its own (not answers) while a request is handled.
PUSHES = {Type.MESSAGE, Type.CLOSE_CONSUMER, Type.ACTIVE_CONSUMER_CHANGE, Type.PING}


def _has_request_id(name: str) -> bool:
    attr = next(c.body for c in COMMANDS if c.name == name)
    hint = typing.get_type_hints(BaseCommand.__init__)[attr]
    cls = next(a for a in typing.get_args(hint) if a is not type(None))
    return "request_id" in cls.__slots__ or "_request_id" in cls.__slots__


def test_the_walk_covers_every_command_that_carries_a_request_id() -> None:
    """Each command with a request_id either is a request walked below or answers one."""
    answer_names = set().union(*ANSWERS.values())
    for command in COMMANDS:
        name = command.name
        if not _has_request_id(name) or name in ANSWERS or name in answer_names:
            continue
        asked = name.removesuffix("_RESPONSE").removesuffix("_SUCCESS")
        assert asked != name and (asked in ANSWERS or f"{asked}_REQUEST" in ANSWERS), \
            f"{name} carries a request_id but is neither walked nor an answer"
    assert {"NEW_TXN", "END_TXN", "TC_CLIENT_CONNECT_REQUEST", "WATCH_TOPIC_LIST",
            "AUTH_RESPONSE"} <= set(ANSWERS)
    assert {i.request for i in INTERACTIONS} - {"CONNECT"} <= set(ANSWERS)


def _request(name: str) -> frames.Frame:
    kind = BaseCommand.Type[name]
    attr, cls = body_fields()[kind]
    body: Any = minimal(cls)
    if name == "PRODUCER":
        body.producer_id = 2  # producer 1 exists already
    if name == "SUBSCRIBE":
        body.consumer_id = 2
    if name == "ACK":
        body.request_id = 1
    if name == "WATCH_TOPIC_LIST":
        body.namespace = "public/default"
        body.topics_pattern = "persistent://public/default/.*"
    payload = None
    if name == "SEND":
        payload = frames.Payload(metadata=MessageMetadata(
            producer_name="walk", sequence_id=body.sequence_id, publish_time=1), data=b"x")
    return frames.Frame(command=BaseCommand(type_=kind, **{attr: body}), payload=payload)


def _correlated(request: Any, answer: Any) -> bool:
    for field in ("request_id", "session_id", "watch_id", "producer_id", "sequence_id"):
        mine, theirs = getattr(request, field, None), getattr(answer, field, None)
        if isinstance(mine, int) and isinstance(theirs, int) and mine != theirs:
            return False
    return True


@pytest.mark.parametrize("name", sorted(ANSWERS))
@run
async def test_every_request_gets_an_answer(name: str) -> None:
    async with EmbeddedBroker(port=0) as url:
        client = await RawClient.connect(url)
        # Producer 1 and consumer 1 exist, so that requests naming them are well formed.
        answer = await client.producer("x", producer_id=1, request_id=90, name="walk")
        assert answer.command.type_ == Type.PRODUCER_SUCCESS
        await client.publish(1, 0, b"m0", producer_name="walk")
        await client.receipt()
        await client.subscribe("x", "walk", consumer_id=1, request_id=91)
        request = _request(name)
        await client.send_bytes(request.encode())
        while True:
            frame = await client.recv(timeout=10)
            if frame.command.type_ not in PUSHES:
                break
        got, body = command_of(frame)
        assert got in ANSWERS[name], f"{name} answered with {got}: {frame.command!r}"
        assert _correlated(command_of(request)[1], body), (request.command, frame.command)
        if name in UNSUPPORTED and got != "SUCCESS":
            error = getattr(body, "error", None)
            assert error in (ServerError.NotAllowedError, ServerError.AuthenticationError)
            assert "not supported" in body.message or "no authentication" in body.message
        await client.close()

