"""The embedded broker's limits as the official Pulsar client sees them (issue 18, failures 1
to 3): a name over the limit fails that one call at once with NotAllowedError, and a huge ack set
from another connection is refused; the broker keeps storing, restarting and serving.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar.broker import BrokerThread
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandConnect,
    CommandFlow,
    CommandProducer,
    CommandSend,
    CommandSubscribe,
    MessageIdData,
    MessageMetadata,
    ServerError,
)

Type = BaseCommand.Type
LONG = "n" * 70_000


@pytest.fixture
def quiet() -> logging.Logger:
    logger = logging.getLogger("pulsar.official")
    logger.setLevel(logging.CRITICAL)  # it would log the 70,000-byte names
    return logger


def round_trip(client: Any, topic: str, payloads: list[bytes]) -> list[bytes]:
    consumer = client.subscribe(topic, "rt", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for payload in payloads:
        producer.send(payload)
    got = []
    for _ in payloads:
        message = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(message)
        got.append(message.data())
    producer.close()
    consumer.close()
    return got


def test_long_names_fail_one_call_and_the_broker_keeps_writing(tmp_path: Path,
                                                               quiet: logging.Logger) -> None:
    with BrokerThread(port=0, data_dir=tmp_path) as broker:
        client = pulsar.Client(broker.url, logger=quiet, operation_timeout_seconds=15)
        start = time.monotonic()
        with pytest.raises(pulsar.NotAllowedError):
            client.subscribe("limits", LONG)
        with pytest.raises(pulsar.NotAllowedError):
            client.create_producer("limits", producer_name=LONG)
        # Refused at once, not after the operation timeout (a loaded machine has a margin).
        assert time.monotonic() - start < 10
        assert round_trip(client, "limits", [b"a", b"b"]) == [b"a", b"b"]
        producer = client.create_producer("kept")
        producer.send(b"durable")
        client.close()
    with BrokerThread(port=0, data_dir=tmp_path) as broker:
        client = pulsar.Client(broker.url, logger=quiet, operation_timeout_seconds=15)
        consumer = client.subscribe("kept", "s",
                                    initial_position=pulsar.InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=10_000).data() == b"durable"
        client.close()


class RawSocket:
    """A blocking connection speaking raw frames, for the abusive side."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("pulsar://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.decoder = frames.StreamDecoder()
        self.pending: list[frames.Frame] = []

    def send(self, command: BaseCommand, payload: frames.Payload | None = None) -> None:
        self.sock.sendall(frames.Frame(command=command, payload=payload).encode())

    def expect(self, kind: BaseCommand.Type) -> frames.Frame:
        while True:
            while self.pending:
                frame = self.pending.pop(0)
                if frame.command.type_ == kind:
                    return frame
            data = self.sock.recv(65536)
            assert data, "closed by the broker"
            self.pending.extend(self.decoder.feed(data))


def test_a_huge_ack_set_is_refused_while_the_official_client_runs(quiet: logging.Logger) -> None:
    with BrokerThread(port=0) as broker:
        raw = RawSocket(broker.url)
        raw.send(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
            client_version="abuser", protocol_version=20)))
        raw.expect(Type.CONNECTED)
        raw.send(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
            topic="abused", producer_id=1, request_id=1)))
        raw.expect(Type.PRODUCER_SUCCESS)
        raw.send(BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=1, sequence_id=0, num_messages=4)), frames.Payload(
                metadata=MessageMetadata(producer_name="abuser", sequence_id=0, publish_time=1,
                                         num_messages_in_batch=4), data=b"batch"))
        receipt = raw.expect(Type.SEND_RECEIPT).command.send_receipt
        assert receipt is not None and receipt.message_id is not None
        raw.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
            topic="abused", subscription="s", subType=CommandSubscribe.SubType.Exclusive,
            consumer_id=1, request_id=2,
            initialPosition=CommandSubscribe.InitialPosition.Earliest)))
        raw.expect(Type.SUCCESS)
        raw.send(BaseCommand(type_=Type.FLOW, flow=CommandFlow(consumer_id=1, messagePermits=10)))
        raw.expect(Type.MESSAGE)
        # 80,000 words (640 KB): a minute of the event loop before the fix.
        raw.send(BaseCommand(type_=Type.ACK, ack=CommandAck(
            consumer_id=1, ack_type=CommandAck.AckType.Individual, request_id=3,
            message_id=[MessageIdData(ledgerId=receipt.message_id.ledgerId,
                                      entryId=receipt.message_id.entryId,
                                      ack_set=[-1] * 80_000)])))
        client = pulsar.Client(broker.url, logger=quiet, operation_timeout_seconds=15)
        assert round_trip(client, "bystander", [b"x", b"y"]) == [b"x", b"y"]
        client.close()
        answer = raw.expect(Type.ACK_RESPONSE).command.ackResponse
        assert answer is not None and answer.error == ServerError.NotAllowedError
        raw.sock.close()

